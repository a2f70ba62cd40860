"""windows: node samples → per-node 15 s grids (event time) → batched predictions.

Each batch of IPMI/OS samples (``NodeSample`` records, or ``NodeSamples`` batches) goes
into the nodes' :class:`~hpcguard.models.grid.NodeGrid`
(watermark = slowest live source); the steps it closes whose history is complete are
predicted in one ``predictor.predict(nodes, windows)`` call, windows
``(n, history_steps, 10)``.  A prediction's ``time`` and ``sample_time`` are the closed
step's end (event time); ``ingest_time`` (wall clock) is for latency only.  A sample
behind its node's watermark is dead-lettered as ``late``.

IPMI polls (last-value samples) take their step when it closes, by
:func:`~hpcguard.models.grid.poll_steps` (``worker.poll_tolerance_s``), as the offline loader
places them; ``hpcguard_grid_polls{source,kind}`` counts the polls moved and merged.

Idleness runs on a :class:`~hpcguard.streams.liveness.StreamClock`: a source is idle when
it is quiet while the stream moves; while nothing arrives at all (broker down or frozen),
no source goes idle.

Exactly once across a kill -9 (``streams/output_log.py``): a batch's predictions are
delivered before the touched grids (with the input offsets they hold) and the partition's
mark go to the ``node-grids`` changelog; after a restart, redelivered samples a grid holds
already are skipped, and the steps published after the mark are read back and not
published again.  A grid goes to the changelog as what the batch changed
(:class:`~hpcguard.streams.delta_log.DeltaLog`: a delta per node and batch, a snapshot
now and then), with the input offsets it holds.
"""
from __future__ import annotations

import asyncio
import math

import faust
import numpy as np

from hpcguard.models.features import CANONICAL_SENSORS, memory_in_use
from hpcguard.models.grid import NodeGrid
from hpcguard.streams import metrics
from hpcguard.streams.delta_log import DeltaLog
from hpcguard.streams.liveness import backlogged
from hpcguard.streams.output_log import OutputLog, deliver
from hpcguard.streams.topics import out

BATCH, WITHIN_S = 2000, 0.2  # per-batch work (grid changelog writes, backlog check) is amortised over more samples


def register(app: faust.App) -> None:
    hpc = app.hpc
    pipe, door, w = hpc.pipeline, hpc.plumbing, hpc.settings.worker
    predictor = pipe.predictor
    if predictor is None:
        return
    window_steps = int(round(w.window_minutes * 60 / w.grid_s))
    history = int(getattr(predictor, "history_steps", window_steps) or window_steps)
    grids: dict[str, NodeGrid] = {}
    applied: dict[str, dict[str, int]] = {}  # node → input topic → newest offset its grid holds
    partition_of: dict[str, int] = {}  # node → input partition (= its changelog partition)
    emitted: dict[str, float] = {}  # node → newest prediction time published
    changelog = DeltaLog(hpc.tables.grids)  # per node and batch: what changed, with the input offsets
    predictions, cluster_topic = out(app, "predictions"), out(app, "cluster")
    outputs = OutputLog(app, hpc.tables.grids, hpc.names.predictions)
    sources = tuple(w.grid_sources)
    clock = hpc.stream_clock
    lock = asyncio.Lock()  # the batch agent and the idle timer: publish-then-persist never interleaves

    inputs = (hpc.names.samples_ipmi, hpc.names.samples_os)

    def held() -> set[str]:
        """Sources whose input topic still has unread records (a backlog, not a silent source): never idle."""
        backlog = backlogged(app, inputs)
        return {s for s in sources if (inputs[0] if s == "ipmi" else inputs[1]) in backlog}

    def grid_of(node: str) -> NodeGrid:
        g = grids.get(node)
        if g is None:
            g = grids[node] = NodeGrid(w.grid_s, window_steps, w.lateness_s, idle_s=w.idle_s, keep_steps=history,
                                       sources=sources, poll_tolerance_s=w.poll_tolerance_s)
            state, deltas = changelog.load(node)  # recovered from the changelog after a restart
            if state:
                g.load_state(state)
            for delta in deltas:
                g.apply_delta(delta)
            applied[node] = dict(([state, *deltas][-1] or {}).get("applied", {}))
        return g

    async def resume(partitions: set[int]) -> None:
        """Learn the steps published after each partition's mark (first batch of a partition only)."""
        for partition in partitions:
            for rec in await outputs.resume(partition):
                node, t = rec.get("node"), rec.get("time")
                if rec.get("model") == predictor.name and isinstance(node, str) and isinstance(t, (int, float)):
                    emitted[node] = max(emitted.get(node, -math.inf), float(t))

    def ready(node: str, closed: list[float], ingested: float | None) -> list[tuple]:
        """The closed steps with enough history and not yet published, with their windows (taken now)."""
        g, done = grids[node], emitted.get(node, -math.inf)
        return [(node, st, ingested, g.window(st, steps=history)) for st in closed
                if st + w.grid_s > done and g.complete(st)]  # judged on its window, as offline (cli/online.py)

    async def publish(due: list[tuple]) -> None:
        """One batched prediction for the closed steps (event-time order), delivered before anything is persisted."""
        if not due:
            return
        due.sort(key=lambda d: (d[1], d[0]))
        windows = np.stack([d[3] for d in due])
        verdicts = predictor.predict([d[0] for d in due], windows)
        memory = memory_in_use(windows)
        items = []
        for (node, step_time, ingested, _), v, mem in zip(due, verdicts, memory):
            step_end = step_time + w.grid_s
            emitted[node] = max(emitted.get(node, -math.inf), step_end)
            metrics.PREDICTIONS.labels(predictor.name, "warn" if v.warn else "ok").inc()
            items.append((node, {
                "node": node, "time": step_end, "model": predictor.name, "model_version": predictor.version,
                "failure_probability": v.failure_probability, "warn": v.warn, "lead_minutes": v.lead_minutes,
                "network_probabilities": v.network_probabilities, "vote": v.vote, "sample_time": step_end,
                "ingest_time": ingested, "detail": v.detail, "mem_usage_percent": mem, "v": 1}))
        outputs.sent(await deliver(app, predictions, items))

    def grid_record(node: str, whole: bool) -> dict:
        """What the node's grid changed since its last record (or all of it), with the input offsets it holds."""
        g = grids[node]
        delta = g.take_delta()  # a snapshot holds the changes too: they start again from it
        return {**(g.to_state() if whole else delta), "applied": dict(applied[node])}  # a copy: table.data keeps it

    def persist(nodes) -> None:
        """The nodes' grid changes (with their input offsets), then their partitions' marks, to the changelog."""
        for node in nodes:
            changelog.write(partition_of[node], node, lambda whole, node=node: grid_record(node, whole))
        for partition in {partition_of[node] for node in nodes}:
            outputs.mark(partition)

    @app.on_partitions_revoked.connect
    async def forget(sender, revoked, **kwargs) -> None:
        """A rebalance: partitions may come back with state another worker wrote; restore them anew."""
        async with lock:
            grids.clear()
            applied.clear()
            partition_of.clear()
            emitted.clear()
            changelog.forget()
            outputs.forget()

    @app.agent(hpc.raw(hpc.names.samples_ipmi, hpc.names.samples_os), name="node-windows")
    async def node_windows(stream: faust.StreamT) -> None:
        async for events in stream.take_events(BATCH, within=WITHIN_S):
            metrics.RECORDS_IN.labels("samples").inc(len(events))
            await resume({ev.message.partition for ev in events})
            async with lock:
                clock.heard()
                now = clock()
                hold = held()
                due: list[tuple] = []
                touched: set[str] = set()
                for ev in events:
                    source, offset = ev.message.topic, ev.message.offset
                    before: dict[str, int] = {}  # node → its offset on this topic before this record
                    samples: list[dict] = []
                    with door.guard(source, ev.value, offset):
                        samples = door.samples(ev.value, source, offset)
                    for sample in samples:
                        with door.guard(source, sample, offset):  # one late sample is one dead letter
                            due += take_sample(sample, ev, before, now, hold, touched)
                await publish(due)
                persist(touched)

    def take_sample(sample: dict, ev, before: dict[str, int], now: float, hold: set[str], touched: set[str]) -> list:
        """Add one sample of record ``ev`` to its node's grid; the closed steps ready to predict."""
        source, offset, node = ev.message.topic, ev.message.offset, sample["node"]
        grid = grid_of(node)
        partition_of[node] = ev.message.partition
        if offset <= before.setdefault(node, applied[node].get(source, -1)):
            return []  # redelivered after a restart: the recovered grid holds it already
        applied[node][source] = offset
        touched.add(node)
        if sample["time"] < hpc.cluster.first_seen.get(node, float("inf")):
            # the node joins the cluster (FARS's spare pool) as of its first sample
            first = {"node": node, "first": sample["time"], "v": 1}
            hpc.cluster.apply_cluster(first)
            door.publish(cluster_topic, node, first)
        copies = grid.duplicate_samples
        closed = grid.add(sample["time"], sample["values"], last_value=sample["source"] == "ipmi",
                          source=sample["source"], now=now, hold=hold)
        if grid.duplicate_samples > copies:  # the broker stored it twice (a retried produce): counted once
            metrics.DUPLICATE_SAMPLES.labels(source).inc()
        return ready(node, closed, sample.get("ingest_time") or ev.message.timestamp)

    @app.timer(1.0, name="idle-sources")
    async def idle_sources() -> None:
        """Close the steps that sources gone quiet (while the stream moves) no longer hold back."""
        async with lock:
            now = clock()
            hold = held()
            due, touched = [], []
            for node, g in grids.items():
                closed = g.advance(now, hold)
                if closed:
                    touched.append(node)
                    due += ready(node, closed, None)
            await publish(due)
            persist(touched)
            # after the publish: 0 here means every step the sources' clocks allow is out
            metrics.LIVE_SOURCES.labels("node-grids").set(sum(len(g.live_sources(now, hold)) for g in grids.values()))
        metrics.WINDOW_STATE.labels("node-grids").set(sum(g.size for g in grids.values()))
        steps = sum(g.steps_closed for g in grids.values())
        if steps:
            present = np.sum([g.present for g in grids.values()], axis=0) / steps
            for name, share in zip(CANONICAL_SENSORS, present.tolist()):
                metrics.SENSOR_COVERAGE.labels(name).set(share)
        polls: dict[str, np.ndarray] = {}  # jittered polls moved or merged on the grid: reported, never silent
        for g in grids.values():
            for source, counts in g.poll_counts.items():
                polls[source] = polls.get(source, 0) + np.asarray(counts)
        for source, (placed, moved, merged) in polls.items():
            for kind, n in (("placed", placed), ("moved", moved), ("merged", merged)):
                metrics.GRID_POLLS.labels(source, kind).set(int(n))
