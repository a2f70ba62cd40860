"""Run the hpcguard Faust worker in this process."""
from __future__ import annotations

import logging
import os
from typing import Iterable

from hpcguard.settings import Settings
from hpcguard.streams.topics import TopicNames

ROLES = ("normalize", "windows", "io", "jobs", "decide", "adapter", "sink")


def build_adapter(settings: Settings, adapter_kind: str | None = None, **options):
    """The configured adapter behind the safety governor (limits, ledger, validation)."""
    from hpcguard.connectors.governor import Governor

    return Governor.from_settings(settings, adapter_kind, **options)


def build_pipeline(settings: Settings, roles: Iterable[str] = ROLES, adapter=None):
    from hpcguard.streams.app import Pipeline
    from hpcguard.streams.predictors import load_predictor

    predictor = load_predictor(settings.worker.model_dir)
    roles = frozenset(roles)
    if "windows" in roles and predictor is None:
        logging.getLogger("hpcguard.worker").warning(
            "no --model given: node predictions are off (train one with 'hpcguard train failure' or "
            "'hpcguard train baseline')")
    if "adapter" in roles and adapter is None:
        adapter = build_adapter(settings)
    from hpcguard.streams.decisions import plan_for, policy_for

    policy, plan = policy_for(settings), plan_for(settings)
    sink = None
    if "sink" in roles and settings.influx.url:
        from hpcguard.connectors.influx import InfluxSink

        sink = InfluxSink.from_settings(settings.influx)
    return Pipeline(settings=settings, topics=TopicNames.from_settings(settings.topics), predictor=predictor,
                    adapter=adapter, roles=roles, policy=policy, plan=plan, sink=sink)


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
    worker.execute_from_commandline()
