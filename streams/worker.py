"""Run the hpcguard Faust worker in this process.

Worker options (``[worker]`` settings, ``HPCGUARD_WORKER__<KEY>``): ``idle_s`` (a source
silent this many wall seconds stops holding a node's watermark), ``lateness_s`` (how far
the watermark trails the slowest live source), ``grid_sources`` (sources a node waits for
from its first record), ``job_wait_s`` and ``jobs_lateness_s`` (the bounded wait of a
decision for the job stream), ``sensor_map`` (the site's sensor mapping; its digest is
compared with the model's at start).  See ``docs/streaming.md``.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Iterable

from hpcguard.settings import Settings
from hpcguard.streams.app import ROOMS
from hpcguard.streams.topics import TopicNames

ROLES = tuple(ROOMS)
log = logging.getLogger("hpcguard.worker")


def build_adapter(settings: Settings, adapter_kind: str | None = None, **options):
    """The configured adapter behind the safety governor (limits, ledger, validation).

    The adapter agent reconciles the ledger rows an interrupted worker left ``executing``
    (``Governor.reconcile``) and publishes their acks before it takes any action.
    """
    from hpcguard.connectors.governor import Governor

    return Governor.from_settings(settings, adapter_kind, **options)


def model_mapping_digest(predictor) -> str | None:
    """The sensor-mapping digest the model's manifest recorded (``None`` when it has none)."""
    manifest = getattr(predictor, "metadata", None) or {}
    for where in (manifest, manifest.get("metadata") if isinstance(manifest.get("metadata"), dict) else {}):
        for key in ("sensor_map_sha256", "sensor_map_digest"):  # the model store writes sensor_map_sha256
            if where.get(key):
                return str(where[key])
    return None


def check_mapping(mapping, predictor) -> dict:
    """Compare the worker's mapping with the model's; log and expose a mismatch in ``/metrics``."""
    from hpcguard.streams import metrics

    worker_digest, model_digest = mapping.digest, model_mapping_digest(predictor)
    info = {"sensor_map_digest": worker_digest, "model_sensor_map_digest": model_digest,
            "sensor_map_mismatch": bool(model_digest and model_digest != worker_digest)}
    if model_digest:
        metrics.MAPPING_MISMATCH.labels(worker_digest[:12], model_digest[:12]).set(int(info["sensor_map_mismatch"]))
    if info["sensor_map_mismatch"]:
        log.warning("sensor mapping %s differs from the one model %s was trained with (%s): its inputs may not "
                    "mean what the model learned", worker_digest[:12], getattr(predictor, "version", "?"),
                    model_digest[:12])
    return info


def build_pipeline(settings: Settings, roles: Iterable[str] = ROLES, adapter=None):
    from hpcguard.connectors.mapping import SensorMapping
    from hpcguard.streams.app import Pipeline
    from hpcguard.streams.decisions import plan_for, policy_for
    from hpcguard.streams.predictors import load_predictor

    predictor = load_predictor(settings.worker.model_dir)
    roles = frozenset(roles)
    if "windows" in roles and predictor is None:
        log.warning("no --model given: node predictions are off (train one with 'hpcguard train failure' or "
                    "'hpcguard train baseline')")
    if "adapter" in roles and adapter is None:
        adapter = build_adapter(settings)
    mapping = SensorMapping.load(settings.worker.sensor_map or None)
    sink = None
    if "sink" in roles and settings.influx.url:
        from hpcguard.connectors.influx import InfluxSink

        sink = InfluxSink.from_settings(settings.influx)
    return Pipeline(settings=settings, topics=TopicNames.from_settings(settings.topics), predictor=predictor,
                    adapter=adapter, roles=roles, policy=policy_for(settings), plan=plan_for(settings), sink=sink,
                    mapping=mapping, info=check_mapping(mapping, predictor) if predictor is not None else {})


def fill_gaps_once(consumer_class=None) -> None:
    """Make Faust's commit offsets count each offset once when it fills a gap (installed by :func:`run_worker`).

    Faust commits a partition up to the first run of consecutive offsets in its list of acknowledged
    offsets (``Consumer._new_offset``).  When its read offset jumps (``_drain_messages`` sees a record
    more than one past the read offset), it records the offsets in between as a *gap* and later adds
    them to that list as if acknowledged, without asking whether they were acknowledged already.  They
    can be: after a restart with a backlog, Faust's recovery resumes the stream partitions while the
    fetcher runs and only then seeks to the committed offsets, so records fetched in that window are
    delivered and acknowledged and the seek then sets the read offset back to the committed one; the
    next record makes a gap over exactly those records.  Each of them is then listed twice, every
    commit advances one offset only (every ``broker_commit_interval``, 2.8 s), and the group's
    committed offset crawls through the range: 752 ``raw.ipmi`` records uncommitted for 400 s in
    ``test_kill_inside_the_adapter``, and no stall verdict, because the committed offset moves.

    Here offsets of a gap that are acknowledged already are not added again, and the ones added join
    the acknowledged index, so a later acknowledgement of one of them is not listed again either.

    >>> import asyncio
    >>> from collections import defaultdict
    >>> from types import SimpleNamespace
    >>> from intervaltree import IntervalTree
    >>> from faust.transport.consumer import Consumer
    >>> def after_restart(new_offset):  # committed 285; 285-330 acknowledged, then read offset reset, gap 286-331
    ...     c = SimpleNamespace(_acked=defaultdict(list), _acked_index=defaultdict(set), _gap=defaultdict(IntervalTree),
    ...                         _committed_offset=defaultdict(lambda: None))
    ...     c._committed_offset["t"] = 285
    ...     c._acked["t"].extend(range(285, 331)); c._acked_index["t"].update(range(285, 331))
    ...     asyncio.run(Consumer._add_gap(c, "t", 286, 331))
    ...     c._acked["t"].extend(range(331, 1173)); c._acked_index["t"].update(range(331, 1173))
    ...     commits = []
    ...     for _ in range(3):
    ...         commits.append(new_offset(c, "t")); c._committed_offset["t"] = commits[-1]
    ...     return commits
    >>> after_restart(_faust_new_offset())  # Faust's own: one offset per commit
    [287, 288, 289]
    >>> after_restart(_new_offset_filling_gaps_once)  # every acknowledged offset at once
    [1173, None, None]
    """
    from faust.transport.consumer import Consumer

    cls = consumer_class or Consumer
    if getattr(cls._new_offset, "fills_gaps_once", False):
        return
    _faust_new_offset()  # kept before it is replaced
    cls._new_offset = _new_offset_filling_gaps_once


HOLE_AFTER_S = 10.0  # how long a hole at the head of the acknowledged offsets stands before it is filled


def fill_lost_head(consumer, tp, now: float) -> range | None:
    """Count as acknowledged the offsets between the committed offset and the first acknowledged one
    when they were read, none of them is in flight, and the hole stood for ``HOLE_AFTER_S``.

    Why: Faust commits nothing while its first acknowledged offset lies more than one past the
    committed one (``Consumer._new_offset``), and a rebalance can lose those acknowledgements for
    good: its revocation clears the acknowledged offsets of records still in a ``take`` buffer, and a
    record fetched again after the seek to the committed offset is dropped when a batch fetched
    before it moved the read offset past it.  The partition then never commits again, and the
    liveness check exits 75 (``test_kill_inside_the_adapter``: ``predictions.node/0`` committed at 3
    while read to 1066).  A record in flight (delivered, not acknowledged) is tracked in
    ``_unacked_messages``; one behind the read offset that is not in flight was read already.

    Returns the offsets filled, or ``None``.

    >>> from types import SimpleNamespace
    >>> c = SimpleNamespace(_acked={"t": [5, 6, 7]}, _acked_index={"t": {5, 6, 7}}, _committed_offset={"t": 3},
    ...                     _read_offset={"t": 7}, _unacked_messages=set())
    >>> fill_lost_head(c, "t", 0.0) is None  # seen: the clock starts
    True
    >>> fill_lost_head(c, "t", 11.0), c._acked["t"]
    (range(3, 5), [5, 6, 7, 3, 4])
    >>> c._acked["t"] = [5]; c._unacked_messages = [SimpleNamespace(tp="t", offset=4)]  # offset 4 is in flight
    >>> fill_lost_head(c, "t", 30.0), fill_lost_head(c, "t", 50.0)
    (None, None)
    """
    holes = consumer.__dict__.setdefault("_hpc_holes", {})
    acked, committed = consumer._acked.get(tp), consumer._committed_offset.get(tp)
    read = getattr(consumer, "_read_offset", {}).get(tp)
    head = min(acked) if acked else None
    if (head is None or committed is None or head - committed <= 1 or read is None or read < head
            or any(m.tp == tp and m.offset < head for m in list(getattr(consumer, "_unacked_messages", ())))):
        holes.pop(tp, None)
        return None
    first = holes.get(tp)
    if first is None or first[:2] != (committed, head):
        holes[tp] = (committed, head, now)
        return None
    if now - first[2] < HOLE_AFTER_S:
        return None
    holes.pop(tp, None)
    filled = range(committed, head)
    index = consumer._acked_index[tp]
    acked.extend(o for o in filled if o not in index)
    index.update(filled)
    log.warning("offsets %d-%d of %s were read and never acknowledged (a rebalance lost them), none in flight "
                "for %.0f s: counted as done so its commits go on", committed, head - 1, tp, now - first[2])
    from hpcguard.streams.metrics import COMMIT_HOLES_FILLED

    COMMIT_HOLES_FILLED.labels(str(getattr(tp, "topic", tp))).inc(len(filled))
    return filled


def _new_offset_filling_gaps_once(self, tp):
    """Faust's ``Consumer._new_offset`` after moving the gaps below the newest acknowledged offset into the
    acknowledged offsets, each offset once (see :func:`fill_gaps_once`), and filling a lost head
    (:func:`fill_lost_head`)."""
    fill_lost_head(self, tp, time.monotonic())
    acked, gaps = self._acked[tp], self._gap.get(tp)
    if acked and gaps:
        spans = gaps.overlap(0, max(acked))
        if spans:
            index = self._acked_index[tp]
            filled = {o for span in spans for o in range(span.begin, span.end)} - index - set(acked)
            acked.extend(filled)
            index.update(filled)
            gaps.chop(0, max(max(span.end for span in spans), max(acked) + 1))
    return _faust_new_offset()(self, tp)


_new_offset_filling_gaps_once.fills_gaps_once = True  # type: ignore[attr-defined]
_FAUST: list = []  # Faust's own Consumer._new_offset (imported late: faust is heavy)


def _faust_new_offset():
    if not _FAUST:
        from faust.transport.consumer import Consumer

        own = Consumer.__dict__["_new_offset"]
        assert not getattr(own, "fills_gaps_once", False), "Faust's _new_offset was replaced before it was kept"
        _FAUST.append(own)
    return _FAUST[0]


def run_worker(settings: Settings, roles: Iterable[str] = ROLES, loglevel: str = "warning", adapter=None) -> None:
    """Create the topics, build the app and run it until SIGTERM/SIGINT."""
    from faust.worker import Worker

    from hpcguard.connectors.kafka import ensure_topics, wait_for_broker
    from hpcguard.streams.app import create_app
    from hpcguard.streams.metrics import start_metrics_server

    os.makedirs(settings.worker.data_dir, exist_ok=True)
    wait_for_broker(settings.kafka)
    topics = TopicNames.from_settings(settings.topics)
    ensure_topics(settings.kafka, topics.all(), settings.topics.partitions, settings.topics.replication)
    pipeline = build_pipeline(settings, roles, adapter)
    fill_gaps_once()  # Faust's commit offsets crawl after a restart with a backlog otherwise
    app = create_app(pipeline)
    start_metrics_server(settings.worker.metrics_port, settings.worker.metrics_addr)
    worker = Worker(app, loglevel=loglevel, quiet=True, redirect_stdouts=False)
    worker.spinner = None  # Faust's spinner sets the root logger to DEBUG: every library debug call builds a record
    worker.execute_from_commandline()
