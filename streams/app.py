"""The hpcguard Faust application.

Agents are thin: parse → call ``models/`` → publish.

```
ldms.<schema> ─┐ normalize ─> samples.io (1 s IO) ─> io windows ─> io.degradation
raw.ipmi ──────┤           ─> samples.ipmi ┐
               │           ─> samples.os ──┴> node windows ─> predictions.node ─> decide ─> actions ─> adapter ─> actions.ack
raw.slurm ─────┘           ─> jobs ─> internal.node-jobs (node → job table) ──────┘
every rejected input ─> dlq
```
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import faust
import numpy as np

from hpcguard.connectors.kafka import faust_broker_config
from hpcguard.models.actions import action_id
from hpcguard.models.grid import NodeGrid
from hpcguard.settings import Settings
from hpcguard.streams import metrics
from hpcguard.streams.records import (Action, ActionAck, DeadLetter, IoDegradation, JobEvent, NodePrediction,
                                      NodeSample, ProbeResult)
from hpcguard.streams.topics import TopicNames

log = logging.getLogger("hpcguard.worker")


@dataclass
class Pipeline:
    """Everything the agents share: settings, topics, predictor, adapter, local caches."""

    settings: Settings
    topics: TopicNames
    predictor: Any = None  # streams.predictors.*Predictor; None → no node predictions
    adapter: Any = None  # connectors.governor.Governor or an adapter; None → no adapter agent
    policy: Callable[..., list[dict]] | None = None
    plan: Callable[[dict, int], dict] | None = None  # periodic checkpoint plan at job start
    canario: Any = None  # streams.agents_canario.CanarioState
    sink: Any = None  # connectors.influx.InfluxSink; None → no sink agent
    roles: frozenset[str] = frozenset({"normalize", "windows", "io", "jobs", "decide", "adapter", "sink"})
    grids: dict[str, NodeGrid] = field(default_factory=dict)
    pending: list[tuple[str, float, np.ndarray, float | None]] = field(default_factory=list)
    nodes_seen: set[str] = field(default_factory=set)


def create_app(pipeline: Pipeline) -> faust.App:
    s, t = pipeline.settings, pipeline.topics
    if pipeline.canario is None:
        from hpcguard.models.canario.detector import IoDegradationDetector
        from hpcguard.models.canario.probes import ProbeTracker
        from hpcguard.streams.agents_canario import CanarioState

        classifier = None
        if s.worker.job_classifier:
            from hpcguard.connectors.canario_io import load_job_classifier

            classifier = load_job_classifier(s.worker.job_classifier)
        pipeline.canario = CanarioState(
            detector=IoDegradationDetector(initial_bank_s=3600.0 * s.worker.io_initial_bank_h,
                                           retrain_every_s=60.0 * s.worker.io_retrain_minutes),
            classifier=classifier, tracker=ProbeTracker(n_baseline=s.worker.probe_baseline_runs))
    w = s.worker
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
        producer_linger=0.005,
        table_cleanup_interval=60,
    )

    def topic(name: str, value_type: Any = None, internal: bool = False) -> faust.TopicT:
        if value_type is None:
            return app.topic(name, value_serializer="raw", internal=internal)
        return app.topic(name, value_type=value_type, internal=internal)

    samples_ipmi = topic(t.samples_ipmi, NodeSample)
    samples_os = topic(t.samples_os, NodeSample)
    samples_io = topic(t.samples_io, NodeSample)
    jobs = topic(t.jobs, JobEvent)
    predictions = topic(t.predictions, NodePrediction)
    io_degradation = topic(t.io_degradation, IoDegradation)
    actions = topic(t.actions, Action)
    acks = topic(t.acks, ActionAck)
    dlq = topic(t.dlq, DeadLetter)
    node_jobs_topic = app.topic(t.node_jobs, value_serializer="json", internal=True)
    plans = app.topic(t.plans, value_serializer="json")

    node_jobs = app.Table("node-jobs", default=None, partitions=s.topics.partitions)
    node_warnings = app.Table("node-warnings", default=None, partitions=s.topics.partitions)
    grid_state = app.Table("node-grids", default=None, partitions=s.topics.partitions)

    async def publish(tp: faust.TopicT, key: str, value: Any) -> None:
        # buffered: the producer's own task flushes it, the agent does not wait per record
        tp.send_soon(key=key.encode() if isinstance(key, str) else key, value=value)
        metrics.RECORDS_OUT.labels(tp.get_topic_name()).inc()

    async def dead_letter(source: str, error_kind: str, reason: str, payload: Any, offset: int | None = None,
                          line: int | None = None) -> None:
        if isinstance(payload, bytes):
            payload = payload.decode("utf-8", "replace")
        elif not isinstance(payload, str):
            payload = json.dumps(payload, default=str)
        metrics.DEAD_LETTERS.labels(source, error_kind).inc()
        await publish(dlq, source, DeadLetter(source=source, reason=reason, error_kind=error_kind,
                                              payload=payload[:65536], time=time.time(), offset=offset, line=line))

    async def decode(record_cls: type, raw: bytes, source: str, stream: faust.StreamT) -> Any:
        """Validate a canonical record; a bad one goes to the DLQ and ``None`` comes back."""
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise TypeError("a record must be a JSON object")
            version = data.get("v", 1)
            if version != 1:
                raise ValueError(f"unsupported schema version v={version}")
            return record_cls(**data)
        except (ValueError, TypeError) as exc:
            ev = stream.current_event
            await dead_letter(ev.message.topic if ev is not None else source, "bad_record",
                              f"not a valid {record_cls.__name__}: {exc}", raw, offset=offset(stream))
            return None

    async def emit_action(a: dict, trigger: str, fallback_key: str, trigger_time: float | None = None) -> None:
        """Publish a policy's action dict; its id is derived from what triggered it (replays repeat it)."""
        action = Action(action_id=action_id(a["kind"], a.get("job_id"), a.get("nodes", []), trigger), kind=a["kind"],
                        source=a["source"], reason=a.get("reason", {}), time=time.time(), job_id=a.get("job_id"),
                        nodes=list(a.get("nodes", [])), deadline=a.get("deadline"), trigger_time=trigger_time)
        metrics.ACTIONS.labels(action.kind, action.source).inc()
        await publish(actions, action.job_id or fallback_key, action)

    def ingest_time(stream: faust.StreamT) -> float | None:
        ev = stream.current_event
        if ev is None or ev.message.timestamp is None:
            return None
        return float(ev.message.timestamp)

    def offset(stream: faust.StreamT) -> int | None:
        ev = stream.current_event
        return None if ev is None else ev.message.offset

    # -- normalize ------------------------------------------------------------------
    if "normalize" in pipeline.roles:
        from hpcguard.connectors.errors import ParseError
        from hpcguard.connectors.ipmi import decode_ipmi_envelope
        from hpcguard.connectors.ldms import LdmsDecoder
        from hpcguard.connectors.mapping import SensorMapping
        from hpcguard.connectors.sacct import decode_slurm_envelope

        mapping = SensorMapping.load(None)
        ldms_decoder = LdmsDecoder(mapping)

        def make_ldms_agent(schema: str, name: str) -> None:
            src = topic(name)
            out = samples_io if schema == "lustre_client" else samples_os

            async def normalize_ldms(stream: faust.StreamT) -> None:
                # batches: the 1 s IO stream is the bulk of all traffic
                async for events in stream.take_events(500, within=0.1):
                    metrics.RECORDS_IN.labels(name).inc(len(events))
                    for ev in events:
                        raw = ev.value
                        try:
                            row = json.loads(raw)
                            if not isinstance(row, dict):
                                raise ParseError("bad_json", "LDMS JSON row must be an object", source=name)
                            sample = ldms_decoder.decode(schema, row)
                        except ParseError as exc:
                            await dead_letter(name, exc.kind, exc.reason, raw, offset=ev.message.offset)
                            continue
                        except (ValueError, TypeError) as exc:
                            await dead_letter(name, "bad_json", f"not an LDMS JSON row: {exc}", raw,
                                              offset=ev.message.offset)
                            continue
                        if sample is not None:
                            await publish(out, sample["node"], NodeSample(**sample, ingest_time=ev.message.timestamp))

            app.agent(src, name=f"normalize-ldms-{schema}")(normalize_ldms)

        for schema, name in zip(s.topics.ldms_schemas, t.ldms):
            make_ldms_agent(schema, name)

        def ipmi_records(raw: bytes, ingested: float | None) -> list[tuple[str, NodeSample]]:
            if raw[:1] == b"{":
                env = json.loads(raw)
            else:  # Telegraf's Kafka output: bare ipmi_sensor line protocol
                env = {"format": "telegraf-lp", "text": raw.decode("utf-8"), "source": t.raw_ipmi}
            return [(d["node"], NodeSample(**d, ingest_time=ingested)) for d in decode_ipmi_envelope(env, mapping)]

        def slurm_records(raw: bytes, ingested: float | None) -> list[tuple[str, JobEvent]]:
            event = decode_slurm_envelope(json.loads(raw))
            return [(event["job_id"], JobEvent(**event))]

        def make_envelope_agent(source: str, out: faust.TopicT, parse: Callable, what: str) -> None:
            async def normalize_envelopes(stream: faust.StreamT) -> None:
                async for raw in stream:
                    metrics.RECORDS_IN.labels(source).inc()
                    try:
                        records = parse(raw, ingest_time(stream))
                    except ParseError as exc:
                        await dead_letter(source, exc.kind, exc.reason, raw, offset=offset(stream), line=exc.line)
                        continue
                    except (ValueError, TypeError, AttributeError, KeyError) as exc:
                        await dead_letter(source, "bad_json", f"not {what}: {exc}", raw, offset=offset(stream))
                        continue
                    for key, record in records:
                        await publish(out, key, record)

            app.agent(topic(source), name=f"normalize-{source}")(normalize_envelopes)

        make_envelope_agent(t.raw_ipmi, samples_ipmi, ipmi_records, "an IPMI envelope")
        make_envelope_agent(t.raw_slurm, jobs, slurm_records, "a Slurm envelope")

    # -- node windows → predictions -------------------------------------------------
    if "windows" in pipeline.roles and pipeline.predictor is not None:
        window_steps = int(round(w.window_minutes * 60 / w.grid_s))

        @app.agent(app.topic(t.samples_ipmi, t.samples_os, value_serializer="raw"), name="node-windows")
        async def node_windows(stream: faust.StreamT) -> None:
            async for raw in stream:
                metrics.RECORDS_IN.labels("samples").inc()
                sample = await decode(NodeSample, raw, "samples", stream)
                if sample is None:
                    continue
                node = sample.node
                grid = pipeline.grids.get(node)
                if grid is None:
                    grid = NodeGrid(w.grid_s, window_steps, w.lateness_s)
                    state = grid_state.get(node)
                    if state:
                        grid.load_state(state)  # recovered from the changelog after a restart
                    pipeline.grids[node] = grid
                    pipeline.nodes_seen.add(node)
                closed = grid.add(sample.time, sample.values, last_value=sample.source == "ipmi",
                                  source=sample.source)
                if not closed:
                    continue
                grid_state[node] = grid.to_state()  # one changelog write per closed step
                # samples published straight to the canonical topic carry no ingest time: use theirs
                ingested = sample.ingest_time or ingest_time(stream)
                for step_time in closed:
                    if grid.complete(step_time):
                        pipeline.pending.append((node, step_time + w.grid_s, grid.window(step_time), ingested))
                metrics.WINDOW_STATE.labels("node-grids").set(sum(g.size for g in pipeline.grids.values()))

        @app.timer(0.2, name="predict-due-windows")
        async def predict_due_windows() -> None:
            if not pipeline.pending:
                return
            batch, pipeline.pending = pipeline.pending, []
            nodes = [b[0] for b in batch]
            verdicts = pipeline.predictor.predict(nodes, np.stack([b[2] for b in batch]))
            now = time.time()
            for (node, step_end, _, ingested), v in zip(batch, verdicts):
                metrics.PREDICTIONS.labels(pipeline.predictor.name, "warn" if v.warn else "ok").inc()
                await publish(predictions, node, NodePrediction(
                    node=node, time=now, model=pipeline.predictor.name, model_version=pipeline.predictor.version,
                    failure_probability=v.failure_probability, warn=v.warn, lead_minutes=v.lead_minutes,
                    network_probabilities=v.network_probabilities, vote=v.vote, sample_time=step_end,
                    ingest_time=ingested, detail=v.detail))

    # -- IO observation windows, probes and IO-aware actions (CanarIO) ----------------
    canario = pipeline.canario
    if "io" in pipeline.roles:
        from hpcguard.streams.agents_canario import SystemIoWindows

        io_windows_state = SystemIoWindows(window_s=w.io_window_s)

        @app.agent(topic(t.samples_io), name="io-windows")
        async def io_windows(stream: faust.StreamT) -> None:
            async for events in stream.take_events(1000, within=0.2):
                metrics.RECORDS_IN.labels(t.samples_io).inc(len(events))
                closed: list[tuple[float, dict]] = []
                for ev in events:
                    sample = await decode(NodeSample, ev.value, t.samples_io, stream)
                    if sample is None:
                        continue
                    try:
                        closed += io_windows_state.add_sample(sample.node, sample.time,
                                                              sample.values.get("io_read_bytes", 0.0),
                                                              sample.values.get("io_write_bytes", 0.0))
                    except ValueError as exc:
                        await dead_letter(t.samples_io, "bad_value", str(exc), ev.value, offset=ev.message.offset)
                for window_end, features in closed:
                    await on_io_window(window_end, features)
                metrics.WINDOW_STATE.labels("io-seconds").set(len(io_windows_state._seconds))

        async def on_io_window(window_end: float, features: dict) -> None:
            started = time.perf_counter()
            state = canario.on_window(window_end, features)
            metrics.INFERENCE_SECONDS.labels("canario").observe(time.perf_counter() - started)
            await publish(io_degradation, w.system, IoDegradation(
                system=w.system, window_start=float(window_end - w.io_window_s), window_end=float(window_end),
                features=features, degraded=bool(state["degraded"]), probability=float(state["probability"]),
                model=str(state.get("model", "knn"))))
            for a in canario.decide(window_end):
                await emit_action({**a, "source": "canario"}, f"canario@{w.system}@{window_end:.0f}", w.system)

        @app.agent(topic(t.probes), name="probes")
        async def probes(stream: faust.StreamT) -> None:
            async for raw in stream:
                metrics.RECORDS_IN.labels(t.probes).inc()
                probe = await decode(ProbeResult, raw, t.probes, stream)
                if probe is None:
                    continue
                try:
                    canario.on_probe(probe.probe_id, probe.probe_type, probe.start, probe.end)
                except (ValueError, KeyError) as exc:
                    await dead_letter(t.probes, "bad_probe", str(exc), raw, offset=offset(stream))

    # -- jobs: node → job map ---------------------------------------------------------
    if "jobs" in pipeline.roles:
        @app.agent(topic(t.jobs), name="jobs-by-node")
        async def jobs_by_node(stream: faust.StreamT) -> None:
            async for raw in stream:
                metrics.RECORDS_IN.labels(t.jobs).inc()
                event = await decode(JobEvent, raw, t.jobs, stream)
                if event is None:
                    continue
                for node in event.nodes:
                    await node_jobs_topic.send(key=node.encode(), value=event.asdict())
                if "io" in pipeline.roles:
                    track_job_io(event)
                if event.event == "start" and pipeline.plan is not None and event.time_limit_s:
                    try:
                        plan = pipeline.plan(event.asdict(), max(len(pipeline.nodes_seen), len(event.nodes)))
                    except (ValueError, ArithmeticError) as exc:
                        await dead_letter(t.jobs, "plan_error", f"no checkpoint plan: {exc}", raw,
                                          offset=offset(stream))
                        continue
                    await publish(plans, event.job_id, {**plan, "time": event.time, "v": 1})

        @app.agent(node_jobs_topic, name="node-jobs")
        async def node_job_map(stream: faust.StreamT) -> None:
            async for event in stream.events():
                node = event.key.decode() if isinstance(event.key, bytes) else str(event.key)
                job = event.value
                if job["event"] == "start":
                    node_jobs[node] = {**job, "start_time": job.get("start_time") or job["time"]}
                elif job["event"] in ("end", "requeue", "fail"):
                    current = node_jobs.get(node)
                    if current and current.get("job_id") == job["job_id"]:
                        del node_jobs[node]

    def track_job_io(event: JobEvent) -> None:
        """CanarIO needs the queue and the running jobs (with predicted IO sensitivity)."""
        if event.event == "submit" and event.script:
            canario.on_job_submitted(event.job_id, event.script, event.num_nodes or len(event.nodes),
                                     float(event.time_limit_s or 3600.0))
        elif event.event == "start":
            canario.on_job_started(event.job_id, event.nodes, event.start_time or event.time)
        elif event.event in ("end", "requeue", "fail"):
            canario.on_job_completed(event.job_id)

    # -- decide: node warnings → actions ---------------------------------------------
    if "decide" in pipeline.roles:
        if pipeline.policy is None:
            from hpcguard.streams.decisions import policy_for

            pipeline.policy = policy_for(s)
        policy = pipeline.policy
        quiet_s = 60.0 * s.policy.quiet_minutes

        @app.agent(topic(t.predictions), name="decide")
        async def decide(stream: faust.StreamT) -> None:
            async for raw in stream:
                metrics.RECORDS_IN.labels(t.predictions).inc()
                p = await decode(NodePrediction, raw, t.predictions, stream)
                if p is None:
                    continue
                active = node_warnings.get(p.node)
                if not p.warn:
                    if active and p.sample_time - active["last_warn"] > quiet_s:
                        del node_warnings[p.node]  # the warning episode is over
                    continue
                if active:
                    node_warnings[p.node] = {**active, "last_warn": p.sample_time}
                    continue
                node_warnings[p.node] = {"first_warn": p.sample_time, "last_warn": p.sample_time}
                job = node_jobs.get(p.node)
                busy = {n for n, j in node_jobs.items() if j}
                warned = {n for n, v in node_warnings.items() if v}
                spare = len(pipeline.nodes_seen - busy - warned)
                prediction = p.asdict()
                try:
                    decided = policy(prediction, job, spare, pipeline.predictor)
                except (ValueError, TypeError, KeyError) as exc:
                    await dead_letter(t.predictions, "policy_error", f"policy could not decide: {exc}", raw,
                                      offset=offset(stream))
                    continue
                for a in decided:
                    a = {"source": p.model, "deadline": p.sample_time + 60 * p.lead_minutes,
                         **{k: v for k, v in a.items() if v is not None or k == "job_id"}}
                    await emit_action(a, f"{p.model}@{p.node}@{p.sample_time:.0f}", p.node, p.ingest_time)

    # -- scheduler adapter ------------------------------------------------------------
    if "adapter" in pipeline.roles and pipeline.adapter is not None:
        loop_executor = None

        @app.agent(topic(t.actions), name="scheduler-adapter")
        async def scheduler_adapter(stream: faust.StreamT) -> None:
            loop = asyncio.get_running_loop()
            async for raw in stream:
                metrics.RECORDS_IN.labels(t.actions).inc()
                action = await decode(Action, raw, t.actions, stream)
                if action is None:
                    continue
                try:  # adapters run scheduler commands: keep them off the event loop
                    ack = await loop.run_in_executor(loop_executor, pipeline.adapter.apply, action.asdict())
                    ack_record = ActionAck(**{k: v for k, v in ack.as_dict().items()})
                except Exception as exc:  # a worker never dies on one action
                    log.exception("adapter failed on %s", action.action_id)
                    ack_record = ActionAck(action_id=action.action_id, status="failed",
                                           adapter=getattr(pipeline.adapter, "name", "?"), time=time.time(),
                                           kind=action.kind, job_id=action.job_id, nodes=action.nodes,
                                           detail=f"adapter error: {exc}")
                metrics.ACKS.labels(ack_record.kind, ack_record.status).inc()
                await publish(acks, ack_record.action_id, ack_record)

    # -- InfluxDB sink ------------------------------------------------------------------
    if "sink" in pipeline.roles and pipeline.sink is not None:
        from hpcguard.connectors.influx import SINK_TOPICS
        from hpcguard.connectors.lineprotocol import LineProtocolError

        sink = pipeline.sink
        kinds = {getattr(t, attr): kind for attr, kind in SINK_TOPICS.items()}

        @app.agent(app.topic(*kinds, value_serializer="raw"), name="influx-sink")
        async def influx_sink(stream: faust.StreamT) -> None:
            async for raw in stream:
                ev = stream.current_event
                source = ev.message.topic if ev is not None else "sink"
                try:
                    sink.add(kinds[source], json.loads(raw))
                except (LineProtocolError, ValueError, TypeError, KeyError) as exc:
                    await dead_letter(source, "sink_rejected", f"InfluxDB sink cannot write it: {exc}", raw,
                                      offset=offset(stream))

        @app.on_before_shutdown.connect
        async def close_sink(app: faust.App, **kwargs: Any) -> None:
            stats = await asyncio.get_running_loop().run_in_executor(None, sink.close)
            log.info("InfluxDB sink closed: %s", stats)

    app.pipeline = pipeline  # type: ignore[attr-defined]
    return app
