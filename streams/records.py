"""Canonical, versioned records exchanged on hpcguard's Kafka topics.

Every record carries ``v`` (schema version).  Records serialize as JSON, so
integrators can consume the topics from any language.  Field names follow
``../shared/BRIEF.md``; times are UNIX epoch seconds (float).

Example
-------
>>> s = NodeSample(node="n001", time=1679682808.0, source="ipmi", values={"cpu_temp": 51.0})
>>> NodeSample.loads(s.dumps()).values["cpu_temp"]
51.0
"""
from __future__ import annotations

from typing import Dict, List, Optional

import faust

# the one ack type (adapters build it, below this layer); one list of action kinds and one of
# ack statuses, shared with the door checks and the adapters
from hpcguard.connectors.adapters import ActionAck  # noqa: F401
from hpcguard.connectors.validation import ACK_STATUSES, ACTION_KINDS  # noqa: F401

SCHEMA_VERSION = 1


class _Versioned(faust.Record, serializer="json", include_metadata=False):
    """Base: JSON on the wire, no faust-specific metadata, explicit version."""


class NodeSample(_Versioned):
    """One node's canonical metric values at one time.

    ``values`` maps canonical names (``models.features.CANONICAL_SENSORS`` plus
    ``io_read_bytes``/``io_write_bytes`` rates) to floats.  ``source`` names the
    input format the values came from (``ldms:<schema>``, ``ipmi``...).
    """

    node: str
    time: float
    source: str
    values: Dict[str, float]
    job_id: Optional[str] = None
    ingest_time: Optional[float] = None  # wall time the raw input reached Kafka
    v: int = SCHEMA_VERSION


class NodeSamples(_Versioned):
    """A batch of ``NodeSample`` records: what normalize publishes for LDMS rows, one record per
    node (``samples.os``) or file system (``samples.io``) and input batch, so that the bulk of the
    traffic costs one Kafka record and one agent event per batch instead of per sample.  Every
    consumer of a samples topic also accepts single ``NodeSample`` records.
    """

    samples: List[NodeSample]
    v: int = SCHEMA_VERSION


class JobEvent(_Versioned):
    """A batch-job lifecycle event: submit, start, end, requeue, hold, release."""

    job_id: str
    event: str
    time: float
    nodes: List[str] = []
    num_nodes: int = 0
    user: str = ""
    partition: str = ""
    name: str = ""
    state: str = ""
    time_limit_s: Optional[float] = None
    submit_time: Optional[float] = None
    start_time: Optional[float] = None
    end_time: Optional[float] = None
    exit_code: Optional[str] = None
    script: Optional[str] = None  # batch script text, when the source has it (CanarIO job classifier)
    reason: str = ""  # a node-state event's Slurm reason ("Not responding")
    v: int = SCHEMA_VERSION


class JobProgress(_Versioned):
    """A job source's progress marker on the job topic: every job event up to ``time`` was published
    before it.  It moves the job stream's watermark (``models.jobs.JobTimeline``) and names no job."""

    event: str  # always "progress" (models.jobs.PROGRESS)
    time: float
    v: int = SCHEMA_VERSION


class ProbeResult(_Versioned):
    """A completed canary probe run (CanarIO)."""

    probe_id: str
    probe_type: str
    start: float
    end: float
    runtime_s: float
    node: str = ""
    v: int = SCHEMA_VERSION


class NodePrediction(_Versioned):
    """A failure predictor's verdict on one node at one time."""

    node: str
    time: float
    model: str
    model_version: str
    failure_probability: float
    warn: bool
    lead_minutes: float
    network_probabilities: List[float] = []
    vote: str = ""
    sample_time: Optional[float] = None  # newest input sample the verdict used
    ingest_time: Optional[float] = None  # wall time that sample reached Kafka
    detail: Dict[str, object] = {}
    mem_usage_percent: Optional[float] = None  # the node's memory in use (meminfo) at the step: sizes a checkpoint
    v: int = SCHEMA_VERSION


class IoDegradation(_Versioned):
    """A 1-minute IO observation window with the degradation detector's verdict."""

    system: str
    window_start: float
    window_end: float
    features: Dict[str, float]
    degraded: bool
    probability: float
    model: str
    v: int = SCHEMA_VERSION


class Action(_Versioned):
    """What to do, to what, why and by when.

    ``action_id`` is deterministic from the trigger (see ``models.policy.action_id``)
    so replaying the same input yields the same id.
    """

    action_id: str
    kind: str
    source: str
    reason: Dict[str, object]
    time: float
    job_id: Optional[str] = None
    nodes: List[str] = []
    deadline: Optional[float] = None
    trigger_time: Optional[float] = None  # wall time the triggering sample reached Kafka
    v: int = SCHEMA_VERSION


class DeadLetter(_Versioned):
    """A rejected input: where it came from, why, and the payload itself."""

    source: str
    reason: str
    error_kind: str
    payload: str
    time: float
    offset: Optional[int] = None
    line: Optional[int] = None
    v: int = SCHEMA_VERSION
