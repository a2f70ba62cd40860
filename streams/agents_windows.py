"""windows: node samples → per-node 15 s grids (event time) → batched predictions.

Each batch of IPMI/OS samples goes into the nodes' :class:`~hpcguard.models.grid.NodeGrid`
(watermark = slowest live source; idle by processing time); the steps it closes whose
history is complete are predicted in one ``predictor.predict(nodes, windows)`` call,
windows ``(n, history_steps, 10)``.  A prediction's ``time`` and ``sample_time`` are the
closed step's end (event time); ``ingest_time`` (wall clock) is for latency only.  A
sample behind its node's watermark is dead-lettered as ``late``.  The grids touched by a
batch are written to the ``node-grids`` changelog, which Faust flushes before it
commits offsets, so a killed worker resumes where its committed input left off.
"""
from __future__ import annotations

import faust
import numpy as np

from hpcguard.models.features import CANONICAL_SENSORS
from hpcguard.models.grid import NodeGrid
from hpcguard.streams import metrics
from hpcguard.streams.app import out

BATCH, WITHIN_S = 2000, 0.2  # per-batch work (grid changelog writes, backlog check) is amortised over more samples


def store(table, partition: int, key: str, value) -> None:
    """Write a table entry to the changelog partition of its source record (batches mix partitions)."""
    table.data[key] = value
    table.send_changelog(partition, key, value)


def register(app: faust.App) -> None:
    hpc = app.hpc
    pipe, door, w = hpc.pipeline, hpc.plumbing, hpc.settings.worker
    predictor = pipe.predictor
    if predictor is None:
        return
    window_steps = int(round(w.window_minutes * 60 / w.grid_s))
    history = int(getattr(predictor, "history_steps", window_steps) or window_steps)
    grids: dict[str, NodeGrid] = {}
    predictions, cluster_topic = out(app, "predictions"), out(app, "cluster")
    sources = tuple(w.grid_sources)

    inputs = (hpc.names.samples_ipmi, hpc.names.samples_os)

    def held() -> set[str]:
        """Sources whose input topic still has unread records (a backlog, not a silent source): never idle."""
        try:
            backlog = {tp.topic for tp in app.consumer.assignment() if tp.topic in inputs
                       and (app.consumer.highwater(tp) or 0) > app.consumer._read_offset.get(tp, -1) + 1}
        except Exception:  # noqa: BLE001 — no consumer yet (start-up, test context): nothing held
            return set()
        return {s for s in sources if (inputs[0] if s == "ipmi" else inputs[1]) in backlog}

    def grid_of(node: str) -> NodeGrid:
        g = grids.get(node)
        if g is None:
            g = grids[node] = NodeGrid(w.grid_s, window_steps, w.lateness_s, idle_s=w.idle_s, keep_steps=history,
                                       sources=sources)
            state = hpc.tables.grids.get(node)
            if state:
                g.load_state(state)  # recovered from the changelog after a restart
        return g

    def ready(node: str, closed: list[float], ingested: float | None) -> list[tuple]:
        """The closed steps with enough history, with their windows (taken now: a batch may trim them)."""
        g = grids[node]
        return [(node, st, ingested, g.window(st, steps=history)) for st in closed if g.complete(st, steps=history)]

    def predict(due: list[tuple]) -> None:
        """One batched prediction for the steps closed in a batch (event-time order)."""
        if not due:
            return
        due.sort(key=lambda d: (d[1], d[0]))
        verdicts = predictor.predict([d[0] for d in due], np.stack([d[3] for d in due]))
        for (node, step_time, ingested, _), v in zip(due, verdicts):
            step_end = step_time + w.grid_s
            metrics.PREDICTIONS.labels(predictor.name, "warn" if v.warn else "ok").inc()
            door.publish(predictions, node, {
                "node": node, "time": step_end, "model": predictor.name, "model_version": predictor.version,
                "failure_probability": v.failure_probability, "warn": v.warn, "lead_minutes": v.lead_minutes,
                "network_probabilities": v.network_probabilities, "vote": v.vote, "sample_time": step_end,
                "ingest_time": ingested, "detail": v.detail, "v": 1})

    @app.agent(hpc.raw(hpc.names.samples_ipmi, hpc.names.samples_os), name="node-windows")
    async def node_windows(stream: faust.StreamT) -> None:
        async for events in stream.take_events(BATCH, within=WITHIN_S):
            metrics.RECORDS_IN.labels("samples").inc(len(events))
            now = pipe.clock()
            hold = held()
            due: list[tuple] = []
            touched: dict[str, int] = {}
            for ev in events:
                source, offset = ev.message.topic, ev.message.offset
                with door.guard(source, ev.value, offset):
                    sample = door.decode("NodeSample", ev.value, source, offset)
                    if sample is None:
                        continue
                    node = sample["node"]
                    touched[node] = ev.message.partition
                    if sample["time"] < hpc.cluster.first_seen.get(node, float("inf")):
                        # the node joins the cluster (FARS's spare pool) as of its first sample
                        first = {"node": node, "first": sample["time"], "v": 1}
                        hpc.cluster.apply_cluster(first)
                        door.publish(cluster_topic, node, first)
                    grid = grid_of(node)
                    closed = grid.add(sample["time"], sample["values"], last_value=sample["source"] == "ipmi",
                                      source=sample["source"], now=now, hold=hold)
                    ingested = sample.get("ingest_time") or ev.message.timestamp
                    due += ready(node, closed, ingested)
            for node, partition in touched.items():
                store(hpc.tables.grids, partition, node, grids[node].to_state())
            predict(due)

    @app.timer(1.0, name="idle-sources")
    async def idle_sources() -> None:
        """Close the steps that sources gone quiet (processing time) no longer hold back."""
        now = pipe.clock()
        hold = held()
        predict([d for node, g in grids.items() for d in ready(node, g.advance(now, hold), None)])
        metrics.WINDOW_STATE.labels("node-grids").set(sum(g.size for g in grids.values()))
        steps = sum(g.steps_closed for g in grids.values())
        if steps:
            present = np.sum([g.present for g in grids.values()], axis=0) / steps
            for name, share in zip(CANONICAL_SENSORS, present.tolist()):
                metrics.SENSOR_COVERAGE.labels(name).set(share)
