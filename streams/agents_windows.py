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

The false-alarm budget (``worker.false_alarms``, issue 56): each input partition's
:class:`~hpcguard.models.budget_epochs.EpochBudget` judges its nodes' LSTM votes in event time
(one controller per partition, so any number of workers judges alike); the threshold and the
score go into the prediction's ``detail.budget``.  Its state goes to the same changelog as the
batch's judged votes (a delta per partition and batch, a snapshot now and then); after a kill,
the predictions read back past the mark are judged again (judging a vote twice changes nothing).

Exactly once across a kill -9 (``streams/output_log.py``): a batch's predictions are
delivered before the touched grids (with the input offsets they hold) and the partition's
mark go to the ``node-grids`` changelog; after a restart, redelivered samples a grid holds
already are skipped, and the steps published after the mark are read back and not
published again.  A grid goes to the changelog as what the batch changed
(:class:`~hpcguard.streams.delta_log.PartitionDeltaLog`: one record of the touched nodes'
deltas per partition and batch, a snapshot per node now and then), with the input offsets it holds.
"""
from __future__ import annotations

import asyncio
import math

import faust
import numpy as np

from hpcguard.models.budget_epochs import EpochBudget, judge
from hpcguard.models.features import CANONICAL_SENSORS, memory_in_use
from hpcguard.models.grid import NodeGrid
from hpcguard.streams import metrics
from hpcguard.streams.decisions import budget_for
from hpcguard.streams.delta_log import DeltaLog, PartitionDeltaLog
from hpcguard.streams.liveness import backlogged
from hpcguard.streams.output_log import OutputLog, deliver
from hpcguard.streams.topics import out

BATCH, WITHIN_S = 2000, 0.2  # per-batch work (grid changelog writes, backlog check) is amortised over more samples
# a budget's state holds every node's recent votes: snapshot it when an epoch starts (so that replaying its deltas
# never starts one: what an epoch start finds depends on the grids then), else rarely
BUDGET_SNAPSHOT_EVERY = 4096
GRIDS_PREFIX = "~grids~"  # the node grids' per-partition deltas in the table (node names cannot start with ~)


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
    # per partition and batch: what the batch changed in each node's grid, with the input offsets it holds
    changelog = PartitionDeltaLog(hpc.tables.grids, GRIDS_PREFIX)
    predictions, cluster_topic, labels_topic = out(app, "predictions"), out(app, "cluster"), out(app, "labels")
    outputs = OutputLog(app, hpc.tables.grids, hpc.names.predictions)
    sources = tuple(w.grid_sources)
    clock = hpc.stream_clock
    lock = asyncio.Lock()  # the batch agent and the idle timer: publish-then-persist never interleaves
    make_budget = budget_for(hpc.settings, predictor)  # None: the model's fixed threshold
    budgets: dict[int, EpochBudget] = {}  # input partition → its false-alarm budget
    judged: dict[int, list[list]] = {}  # input partition → [node, time, score] judged since its last changelog record
    new_epoch: set[int] = set()  # input partitions whose budget entered a new epoch since their last changelog record
    # node → {step end: latest vote} of its last persistence − 1 steps: the budget's score reads them (a cache: the
    # same values inferred again after a restart)
    recent: dict[str, dict[float, float]] = {}
    persistence = int(getattr(predictor, "persistence", 1))
    budget_log = DeltaLog(hpc.tables.grids, every=BUDGET_SNAPSHOT_EVERY)

    inputs = (hpc.names.samples_ipmi, hpc.names.samples_os)

    def held() -> set[str]:
        """Sources whose input topic still has unread records (a backlog, not a silent source): never idle."""
        backlog = backlogged(app, inputs)
        return {s for s in sources if (inputs[0] if s == "ipmi" else inputs[1]) in backlog}

    def grid_of(node: str, partition: int) -> NodeGrid:
        g = grids.get(node)
        if g is None:
            g = grids[node] = NodeGrid(w.grid_s, window_steps, w.lateness_s, idle_s=w.idle_s, keep_steps=history,
                                       sources=sources, poll_tolerance_s=w.poll_tolerance_s)
            partition_of[node] = partition
            state, deltas = changelog.load(partition, node)  # recovered from the changelog after a restart
            if state:
                g.load_state(state)
            for delta in deltas:
                g.apply_delta(delta)
            applied[node] = dict(([state, *deltas][-1] or {}).get("applied", {}))
        return g

    def budget_of(partition: int) -> EpochBudget:
        """The partition's budget: as its changelog left it (snapshot, then each batch's judged votes), or new."""
        budget = budgets.get(partition)
        if budget is None:
            snapshot, deltas = budget_log.load(f"~budget~{partition}")
            budget = EpochBudget.from_state(snapshot["state"]) if snapshot else make_budget()
            for delta in deltas:
                for node, t, score in delta["judged"]:
                    budget.observe(node, t, math.nan if score is None else score)
            budget.take_labels()  # published before their votes reached the changelog
            budget.held_until = held_until(partition)
            budgets[partition] = budget
        return budget

    def held_until(partition: int):
        # after a restart: as the changelog left the node's grid
        return lambda node: grid_of(node, partition).held_until()

    def judge_vote(partition: int, node: str, t: float, score: float | None) -> tuple[bool, dict]:
        """Warn or not under the partition's budget; the ``detail.budget`` the prediction carries."""
        score = None if score is None or score != score else float(score)
        budget = budget_of(partition)
        epoch = budget.epoch
        warn, threshold = judge(budget, node, t, score)
        if budget.epoch != epoch:
            new_epoch.add(partition)
        judged.setdefault(partition, []).append([node, t, score])
        return warn, {"partition": partition, "threshold": threshold, "score": score}

    def label_records(partition: int, labels: list[dict]) -> list[dict]:
        """``hpcguard.labels`` records of a budget's new labels (a label found again after a kill -9 has the
        same ``label_id``)."""
        for label in labels:
            metrics.LABELS.labels(label["kind"], label.get("outcome", label.get("source", ""))).inc()
        return [{**label, "partition": partition, "model": predictor.name, "model_version": predictor.version,
                 "v": 1} for label in labels]

    async def resume(partitions: set[int]) -> None:
        """Learn the steps published after each partition's mark (first batch of a partition only)."""
        for partition in partitions:
            again = []
            for rec in await outputs.resume(partition):
                node, t = rec.get("node"), rec.get("time")
                if rec.get("model") == predictor.name and isinstance(node, str) and isinstance(t, (int, float)):
                    emitted[node] = max(emitted.get(node, -math.inf), float(t))
                    b = (rec.get("detail") or {}).get("budget")
                    if make_budget and isinstance(b, dict) and b.get("partition") == partition:
                        again.append((float(t), node, b.get("score")))
            for t, node, score in sorted(again):  # published, maybe not yet in the changelog: judged again
                judge_vote(partition, node, t, score)

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
        if make_budget and persistence > 1:  # each node's previous votes: kept, or in this batch
            row = {(node, t): i for i, (node, t, _, _) in enumerate(due)}
            back = [[(node, t - w.grid_s * b) for b in range(1, persistence)] for node, t, _, _ in due]
            earlier = np.array([[recent.get(n, {}).get(s + w.grid_s, np.nan) for n, s in keys] for keys in back])
            rows = np.array([[row.get(k, -1) for k in keys] for keys in back], int)
            verdicts = predictor.predict([d[0] for d in due], windows, earlier, rows)
            for (node, t, _, _), v in zip(due, verdicts):
                votes = recent.setdefault(node, {})
                votes[t + w.grid_s] = v.failure_probability
                for old in [s for s in votes if s <= t + w.grid_s * (1 - persistence)]:
                    del votes[old]
        else:
            verdicts = predictor.predict([d[0] for d in due], windows)
        memory = memory_in_use(windows)
        items = []
        for (node, step_time, ingested, _), v, mem in zip(due, verdicts, memory):
            step_end = step_time + w.grid_s
            emitted[node] = max(emitted.get(node, -math.inf), step_end)
            warn, detail = v.warn, v.detail
            if make_budget:
                warn, budget = judge_vote(partition_of[node], node, step_end, v.score)
                detail = {**detail, "budget": budget}
            metrics.PREDICTIONS.labels(predictor.name, "warn" if warn else "ok").inc()
            items.append((node, {
                "node": node, "time": step_end, "model": predictor.name, "model_version": predictor.version,
                "failure_probability": v.failure_probability, "warn": warn, "lead_minutes": v.lead_minutes,
                "network_probabilities": v.network_probabilities, "vote": v.vote, "sample_time": step_end,
                "ingest_time": ingested, "detail": detail, "mem_usage_percent": mem, "v": 1}))
        outputs.sent(await deliver(app, predictions, items))
        if make_budget:  # delivered before the judged votes that found them are persisted
            await deliver(app, labels_topic, [(label["node"], label) for p in sorted(budgets)
                                              for label in label_records(p, budgets[p].take_labels())])

    def grid_record(partition: int, node: str, whole: bool) -> dict:
        """What the node's grid changed since its last record (or all of it), with the input offsets it holds."""
        g = grid_of(node, partition)  # a snapshot may be due for a node not read since a restart
        delta = g.take_delta()  # a snapshot holds the changes too: they start again from it
        return {**(g.to_state() if whole else delta), "applied": dict(applied[node])}  # a copy: table.data keeps it

    def persist(nodes) -> None:
        """The nodes' grid changes (with their input offsets) and the budgets' judged votes, then their
        partitions' marks, to the changelog."""
        by_partition: dict[int, list[str]] = {}
        for node in nodes:
            by_partition.setdefault(partition_of[node], []).append(node)
        for partition, members in sorted(by_partition.items()):
            changelog.write(partition, sorted(members),
                            lambda node, whole, p=partition: grid_record(p, node, whole))
        for partition, votes in judged.items():
            budget_log.write(partition, f"~budget~{partition}", lambda whole, p=partition, votes=votes:
                             {"state": budgets[p].to_state()} if whole else {"judged": votes},
                             whole=partition in new_epoch)
            metrics.VOTE_THRESHOLD.labels(str(partition)).set(budgets[partition].threshold)
            metrics.BUDGET_NODE_DAYS.labels(str(partition)).set(budgets[partition].controller.node_days)
        for partition in {partition_of[node] for node in nodes} | set(judged):
            outputs.mark(partition)
        judged.clear()
        new_epoch.clear()

    @app.on_partitions_revoked.connect
    async def forget(sender, revoked, **kwargs) -> None:
        """A rebalance: partitions may come back with state another worker wrote; restore them anew."""
        async with lock:
            grids.clear()
            applied.clear()
            partition_of.clear()
            emitted.clear()
            changelog.forget()
            budgets.clear()
            judged.clear()
            new_epoch.clear()
            recent.clear()
            budget_log.forget()
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
        grid = grid_of(node, ev.message.partition)
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
