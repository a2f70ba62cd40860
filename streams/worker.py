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
    app = create_app(pipeline)
    start_metrics_server(settings.worker.metrics_port, settings.worker.metrics_addr)
    worker = Worker(app, loglevel=loglevel, quiet=True, redirect_stdouts=False)
    worker.spinner = None  # Faust's spinner sets the root logger to DEBUG: every library debug call builds a record
    worker.execute_from_commandline()
