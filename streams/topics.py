"""The canonical topic set (names come from ``Settings.topics``).

| suffix | key | record |
|---|---|---|
| samples.ipmi | node | NodeSample |
| samples.io | system | NodeSamples: batches of NodeSample (LDMS 1 s IO: io_read_bytes, io_write_bytes) |
| samples.os | node | NodeSamples: batches of one node's NodeSample (LDMS operating-system samplers) |
| jobs | job | JobEvent |
| probes | probe | ProbeResult |
| predictions.node | node | NodePrediction |
| io.degradation | system | IoDegradation |
| actions | job or node | Action |
| actions.ack | action_id | ActionAck |
| dlq | source | DeadLetter |
| raw.ipmi | node | RawLine (FreeIPMI / ipmitool / Telegraf text) |
| raw.slurm | job | RawLine (sacct --parsable2 rows) |
| raw.probes | probe | RawLine (probe log rows) |
| checkpoint.plans | job | periodic checkpoint plan (aware interval) published at job start |
| labels | node | FailureLabel: failures recognised from silences, warning episodes resolved true/false |
| internal.node-jobs | node | job events re-keyed by node (worker-internal) |
| internal.cluster | node | nodes' first sample times and warning episodes (every worker reads all of it) |
| internal.probes | system | probe results re-keyed by file system (its IO worker owns them) |
LDMS rows arrive on LDMS's own topics, ``ldms.<schema>`` by default.  Consumers of the
samples topics take a single ``NodeSample`` as well as a ``NodeSamples`` batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpcguard.settings import TopicSettings

CANONICAL = {
    "samples_ipmi": "samples.ipmi",
    "samples_io": "samples.io",
    "samples_os": "samples.os",
    "jobs": "jobs",
    "probes": "probes",
    "predictions": "predictions.node",
    "io_degradation": "io.degradation",
    "actions": "actions",
    "acks": "actions.ack",
    "dlq": "dlq",
    "raw_ipmi": "raw.ipmi",
    "raw_slurm": "raw.slurm",
    "raw_probes": "raw.probes",
    "node_jobs": "internal.node-jobs",
    "cluster": "internal.cluster",
    "probes_fs": "internal.probes",
    "plans": "checkpoint.plans",
    "labels": "labels",
}


@dataclass(frozen=True)
class TopicNames:
    samples_ipmi: str
    samples_io: str
    samples_os: str
    jobs: str
    probes: str
    predictions: str
    io_degradation: str
    actions: str
    acks: str
    dlq: str
    raw_ipmi: str
    raw_slurm: str
    raw_probes: str
    node_jobs: str
    cluster: str
    plans: str
    probes_fs: str
    labels: str
    ldms: tuple[str, ...]

    @classmethod
    def from_settings(cls, topics: TopicSettings) -> "TopicNames":
        names = {attr: topics.name(suffix) for attr, suffix in CANONICAL.items()}
        return cls(**names, ldms=tuple(topics.ldms(s) for s in topics.ldms_schemas))

    def all(self) -> list[str]:
        return [getattr(self, a) for a in CANONICAL] + list(self.ldms)


def out(app: Any, attr: str) -> Any:
    """The topic an agent publishes to (its name when collecting into an outbox): ``attr`` of the app's
    topic names or topics (``app.hpc``, set up by ``streams.app.create_app``)."""
    return getattr(app.hpc.names, attr) if app.hpc.pipeline.outbox is not None else getattr(app.hpc.topics, attr)
