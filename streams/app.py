"""The hpcguard Faust application: the app, its topics and tables.  The agents live in
their own modules (``streams/agents_*.py``) and register themselves on the app;
decode/publish/dead-letter/guard are in ``streams/plumbing.py``.

```
ldms.<schema> ─┐ normalize ─> samples.io (1 s IO) ─> io (CanarIO) ─> io.degradation, actions
raw.ipmi ──────┤           ─> samples.ipmi ┐
               │           ─> samples.os ──┴> windows (node grids) ─> predictions.node ─> decide ─> actions ─> adapter ─> actions.ack
raw.slurm ─────┘           ─> jobs ─> jobs (cluster job timeline, global) ───────────────┘
every rejected input ─> dlq                                           predictions, actions... ─> sink (InfluxDB)
```

Event-time semantics (watermarks, lateness, idleness) are described in ``docs/streaming.md``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable

import faust

from hpcguard.connectors.kafka import faust_broker_config, faust_consumer_class, kafka_python_config
from hpcguard.connectors.validation import DoorLimits, NodeInventory
from hpcguard.settings import Settings
from hpcguard.streams import metrics
from hpcguard.streams.cluster_view import ClusterView
from hpcguard.streams.liveness import StreamClock, StreamWait
from hpcguard.streams.plumbing import Plumbing, announce_inventory
from hpcguard.streams.topics import TopicNames, out  # noqa: F401  (out: where agents publish; re-exported)

# Faust stops fetching a partition once its agent's buffer is 80 % full, but a poll already fetched is delivered
# in full, and delivering into a full buffer blocks the app's one consumer for every topic.  An agent that awaits
# another stream (IO windows wait for probes, decisions for jobs) would then wait for records that cannot arrive:
# a poll never larger than the buffer's last fifth always fits.
STREAM_BUFFER = 4096
MAX_POLL_RECORDS = STREAM_BUFFER // 8
#: messages Faust's producer buffer holds before an agent waits for it to drain (Faust's own: 100). Each 15 s
#: step sends a verdict per node: at 1,000 nodes 100 logged "producer buffer full" 1,500–3,000 times per run and
#: made an agent wait per 100 sends; 5,000 logged none and drained the same replay 3.6 % faster (2 runs each)
PRODUCER_BUFFER = 5000

#: agent families in pipeline order: role name → module registering it
ROOMS = {
    "normalize": "hpcguard.streams.agents_normalize",
    "windows": "hpcguard.streams.agents_windows",
    "io": "hpcguard.streams.agents_io",
    "jobs": "hpcguard.streams.agents_jobs",
    "decide": "hpcguard.streams.agents_decide",
    "adapter": "hpcguard.streams.agents_adapter",
    "sink": "hpcguard.streams.agents_sink",
}


@dataclass
class Pipeline:
    """What the agents are given: settings, topic names, predictor, adapter, policy."""

    settings: Settings
    topics: TopicNames
    predictor: Any = None  # streams.predictors.*Predictor; None → no node predictions
    adapter: Any = None  # connectors.governor.Governor or an adapter; None → no adapter agent
    policy: Callable[..., list[dict]] | None = None
    plan: Callable[[dict, int], dict] | None = None  # periodic checkpoint plan at job start
    canario: Any = None  # models.canario.online.CanarioState
    sink: Any = None  # connectors.influx.InfluxSink; None → no sink agent
    mapping: Any = None  # connectors.mapping.SensorMapping; None → the packaged default
    roles: frozenset[str] = frozenset(ROOMS)
    clock: Callable[[], float] = time.monotonic  # processing time (idleness only)
    outbox: list | None = None  # tests: collect what agents publish instead of sending
    info: dict = field(default_factory=dict)  # start-up facts for /metrics and the log


def create_app(pipeline: Pipeline) -> faust.App:
    """The Faust app with every agent of ``pipeline.roles`` registered."""
    import importlib

    s, t, w = pipeline.settings, pipeline.topics, pipeline.settings.worker
    app = faust.App(
        w.app_id,
        **faust_broker_config(s.kafka),
        store="memory://",
        datadir=w.data_dir,
        web_enabled=bool(w.web_port),
        web_port=w.web_port or 6066,
        topic_partitions=s.topics.partitions,
        topic_replication_factor=s.topics.replication,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=10,
        broker_heartbeat_interval=1,
        broker_rebalance_timeout=10,
        stream_wait_empty=False,
        stream_buffer_maxsize=STREAM_BUFFER,
        broker_max_poll_records=MAX_POLL_RECORDS,
        # why: the bulk of the traffic is small records; bigger, lingering batches keep the producer ahead
        producer_linger=0.02,
        producer_max_batch_size=512 * 1024,
        table_cleanup_interval=60,
        table_standby_replicas=w.standby_replicas,
        # why: tansu lists a changelog's end offset short of its last record batch, so on a second
        # rebalance in one process Faust's check took the offsets it had read for "persisted offsets
        # beyond the end" and crashed recovery; tables live in memory (nothing persisted to disagree),
        # and the agents read their changelogs to the true end themselves (streams/output_log.py)
        recovery_consistency_check=False,
    )
    app.transport.Consumer = faust_consumer_class(s.kafka.fetch_max_wait_ms)
    app.producer.buffer.max_messages = PRODUCER_BUFFER

    def raw(*names: str, internal: bool = False) -> faust.TopicT:
        # raw bytes in and out: plumbing decodes and checks every record once
        return app.topic(*names, value_serializer="raw", key_serializer="raw", internal=internal)

    inventory = NodeInventory.from_settings(s.door)
    announce_inventory(inventory, pipeline.roles)  # without door.nodes: a WARNING line, and /metrics
    app.hpc = SimpleNamespace(  # type: ignore[attr-defined]
        pipeline=pipeline, settings=s, names=t,
        topics=SimpleNamespace(**{a: raw(getattr(t, a)) for a in (
            "samples_ipmi", "samples_os", "samples_io", "jobs", "probes", "predictions", "io_degradation",
            "actions", "acks", "dlq", "raw_ipmi", "raw_slurm", "node_jobs", "plans", "cluster", "labels")}),
        raw=raw,
        plumbing=Plumbing(dlq=raw(t.dlq), limits=DoorLimits.from_settings(s.door),
                          inventory=inventory, outbox=pipeline.outbox),
        tables=SimpleNamespace(
            # node → NodeGrid state (changelogged: a restarted worker resumes its grids)
            grids=app.Table("node-grids", default=None, partitions=s.topics.partitions),
            # node → current warning episode {first_warn, last_warn}
            warnings=app.Table("node-warnings", default=None, partitions=s.topics.partitions),
        ),
        # cluster-wide, on every worker: all jobs, nodes' first samples, warning episodes (a broadcast join);
        # what internal.cluster says of a node counts once the node is known (streams/cluster_view.py)
        cluster=ClusterView(s.topics.partitions, s.worker.jobs_lateness_s, nodes_configured=inventory.fixed,
                            max_pending=s.door.max_nodes),
        # idleness clock of the node grids and the IO windows: stands still while nothing arrives
        stream_clock=StreamClock(pipeline.clock),
        # group → (topics, live consumer or None) of the batch readers outside Faust (plumbing.consume_batches):
        # the liveness check watches their commits too
        batch_groups={},
    )
    # decisions and IO actions read the jobs at their event time: they wait for the job stream's watermark
    app.hpc.job_wait = StreamWait("job stream", app.hpc.cluster.job_watermark, s.worker.job_wait_s,
                                  metrics.JOB_JOIN_TIMEOUTS)
    if pipeline.outbox is not None:
        app.hpc.plumbing.dlq = t.dlq
    for role, module in ROOMS.items():
        if role in pipeline.roles:
            importlib.import_module(module).register(app)
    # a windows worker without door.nodes reads the job records too: the nodes they name are admitted (NodeInventory)
    if pipeline.outbox is None and (pipeline.roles & {"jobs", "decide", "io"}
                                    or ("windows" in pipeline.roles and not inventory.fixed)):
        from hpcguard.streams.agents_jobs import check_cluster_record

        @app.task
        async def follow_cluster() -> None:
            kafka = {**kafka_python_config(s.kafka), "fetch_max_wait_ms": s.kafka.fetch_max_wait_ms}
            await app.hpc.cluster.follow(kafka, t.jobs, t.cluster,
                                         lambda kind, raw: check_cluster_record(app, kind, raw))
    if pipeline.outbox is None:  # stall detection (streams/liveness.py): not in Faust's test context
        from hpcguard.streams import liveness

        liveness.install(app, s.liveness)
        ready = metrics.CONSUMER_READY.labels("faust")
        ready.set(0)

        @app.on_rebalance_complete.connect
        async def consumer_ready(sender, **kwargs) -> None:
            ready.set(1)  # joined the group and recovered the tables: records are read as they arrive

        @app.on_partitions_revoked.connect
        async def consumer_rebalancing(sender, revoked, **kwargs) -> None:
            ready.set(0)
    app.pipeline = pipeline  # type: ignore[attr-defined]
    return app
