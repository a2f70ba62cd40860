"""Every worker's own copy of the cluster-wide state a decision reads (a broadcast join).

The job timeline (:class:`~hpcguard.models.jobs.JobTimeline`), the nodes' first sample
times and the nodes' warning episodes are needed whole by every worker (FARS's spare pool
is cluster-wide), while Faust gives each worker only its partitions.  So each worker reads
*all* partitions of ``jobs`` and of the small ``internal.cluster`` topic with a plain
consumer (no group) and applies them here; its own agents apply their writes at once too
(every update is idempotent: job runs are sets, first times take the minimum, episodes the
latest).  The job stream's **watermark** is the slowest partition's newest event time among
the partitions this reader has not yet read to the end, minus ``worker.jobs_lateness_s``;
when all are read to the end it is the newest event time seen.  A source's ``progress``
marker counts as an event time (every job event up to it is out) and adds no job.

``internal.cluster`` is an input like any other: anyone who can produce to the cluster's
Kafka can write it.  Its records pass the door (``ClusterUpdate``: node id, times, no other
field; the ``cluster`` agent of the jobs role dead-letters what fails, once, on the
partition's owner), and what they say of a node counts only once the node is known
otherwise: from this worker's own agents, a configured inventory (``door.nodes``) or a job
record naming it.  Until then the update waits in a bounded pending set (``door.max_nodes``;
beyond it the record is refused as ``unknown_node``), so a flood of invented names cannot
grow FARS's spare pool.

Example
-------
>>> v = ClusterView(partitions=2)
>>> v.add_job({"job_id": "7", "event": "start", "time": 100.0, "nodes": ["n1"]}, partition=0)
>>> v.add_job({"job_id": "8", "event": "submit", "time": 50.0}, partition=1)
>>> v.job_watermark(), v.timeline.job_at("n1", 120.0)["job_id"]
(50.0, '7')
>>> v.apply_cluster({"node": "n2", "first": 10.0}); v.apply_cluster({"node": "n2", "first": 5.0})
>>> v.nodes_at(7.0)
['n2']
>>> v.apply_cluster({"node": "n9", "first": 5.0}, shared=True)   # read from the topic: n9 is known from nothing
>>> v.nodes_at(7.0), sorted(v.pending)
(['n2'], ['n9'])
>>> v.add_job({"job_id": "9", "event": "start", "time": 60.0, "nodes": ["n9"]}, partition=0)
>>> v.nodes_at(7.0)
['n2', 'n9']
"""
from __future__ import annotations

import asyncio
import logging
import math
from typing import Any, Mapping

from hpcguard.connectors.validation import ValidationError
from hpcguard.models.jobs import NODE_STATE, JobTimeline

log = logging.getLogger("hpcguard.worker")


class ClusterView:
    """Job timeline, node first-seen times and warning episodes of the whole cluster."""

    def __init__(self, partitions: int = 1, lateness_s: float = 0.0, nodes_configured: bool = False,
                 max_pending: int = 4096) -> None:
        self.partitions = int(partitions)
        self.lateness_s = float(lateness_s)
        self.nodes_configured = bool(nodes_configured)  # the door admits only a configured inventory's nodes
        self.max_pending = int(max_pending)
        self.timeline = JobTimeline()
        self.first_seen: dict[str, float] = {}
        self.episodes: dict[str, dict[str, float]] = {}
        self.claims: dict[str, set[tuple[float, float]]] = {}  # spare node → (from, until) of migrations onto it
        self.pending: dict[str, dict[str, Any]] = {}  # node → its updates from the topic, until the node is known
        self._local: set[str] = set()  # nodes this worker's own agents wrote about
        self._clocks: dict[int, float] = {}  # jobs partition -> newest event time
        self._caught_up: set[int] = set()  # jobs partitions read to their end (broadcast reader)

    # -- updates --------------------------------------------------------------------
    def add_job(self, event: Mapping[str, Any], partition: int) -> None:
        if event["event"] == NODE_STATE:
            return  # names no job, and its source's clock need not be the job stream's
        self.timeline.add(event)
        self._clocks[partition] = max(self._clocks.get(partition, -math.inf), float(event["time"]))
        if self.pending:
            for node in event.get("nodes") or ():
                if node in self.pending and self.timeline.knows(node):
                    self._release(node)

    def apply_cluster(self, record: Mapping[str, Any], shared: bool = False) -> None:
        """A record of ``internal.cluster``: ``{"node", "first"}``, ``{"node", "first_warn", "last_warn"}`` or
        ``{"node", "claimed_from", "claimed_until"}`` (a migration's spare), checked at the door.

        ``shared``: read from the topic rather than written by this worker's own agents; about a node not
        known yet it waits in :attr:`pending` (raises ``ValidationError`` ``unknown_node`` when that is full).
        """
        node = str(record["node"])
        if not shared:
            self._local.add(node)
            if node in self.pending:
                self._release(node)
        elif not self.knows(node):
            held = self.pending.get(node)
            if held is None:
                if len(self.pending) >= self.max_pending:
                    raise ValidationError("node", f"node {node!r} is known from no job record, no configured "
                                          f"inventory and no record of this worker, and {self.max_pending} such "
                                          "nodes wait already", "unknown_node")
                held = self.pending[node] = {"first": None, "episode": None}
            # why merged: one pending entry per node, whatever number of records names it
            if "first" in record:
                held["first"] = min(held["first"] if held["first"] is not None else math.inf, float(record["first"]))
            elif "claimed_from" in record:
                held.setdefault("claims", set()).add((float(record["claimed_from"]), float(record["claimed_until"])))
            else:
                held["episode"] = _later(held["episode"], record)
            return
        if "first" in record:
            self.first_seen[node] = min(self.first_seen.get(node, math.inf), float(record["first"]))
        elif "claimed_from" in record:
            self.claim(node, float(record["claimed_from"]), float(record["claimed_until"]))
        else:
            self.episodes[node] = _later(self.episodes.get(node), record)

    def claim(self, node: str, start: float, until: float) -> None:
        """A spare node taken by a migration from ``start`` to ``until`` (idempotent: intervals are a set)."""
        claims = self.claims.setdefault(node, set())
        claims.add((start, until))
        if len(claims) > 64:  # why bounded: a spare's old claims only matter while their job can still run
            for old in sorted(claims)[:-64]:
                claims.discard(old)

    def knows(self, node: str) -> bool:
        """Whether updates about ``node`` count: a configured inventory, this worker's own agents or a job
        record named it."""
        return self.nodes_configured or node in self._local or self.timeline.knows(node)

    def _release(self, node: str) -> None:
        """Apply what waited in :attr:`pending` for a node now known."""
        held = self.pending.pop(node)
        if held["first"] is not None:
            self.first_seen[node] = min(self.first_seen.get(node, math.inf), held["first"])
        if held["episode"] is not None:
            self.episodes[node] = _later(self.episodes.get(node), held["episode"])
        for start, until in held.get("claims", ()):
            self.claim(node, start, until)

    # -- queries --------------------------------------------------------------------
    def job_watermark(self) -> float:
        """Slowest not-yet-caught-up jobs partition's clock (newest clock when all are caught up)."""
        behind = [self._clocks.get(p, -math.inf) for p in range(self.partitions) if p not in self._caught_up
                  and (p in self._clocks or not self._caught_up)]
        if not self._clocks:
            return -math.inf
        mark = min(behind) if behind else max(self._clocks.values())
        return mark - self.lateness_s

    def nodes_at(self, t: float) -> list[str]:
        """Nodes whose first sample is at or before ``t``."""
        return sorted(n for n, first in self.first_seen.items() if first <= t)

    def warned_at(self, t: float, quiet_s: float) -> set[str]:
        """Nodes inside a warning episode at ``t``."""
        return {n for n, e in self.episodes.items() if e["first_warn"] <= t <= e["last_warn"] + quiet_s}

    def claimed_at(self, t: float) -> set[str]:
        """Spare nodes a migration holds at ``t``."""
        return {n for n, c in self.claims.items() if any(a <= t < b for a, b in c)}

    # -- the broadcast reader -------------------------------------------------------
    def receive(self, raw: bytes, partition: int, check, job: bool = False) -> bool:
        """One record the broadcast reader read, of ``jobs`` (``job``) or of ``internal.cluster``: checked
        with ``check(kind, raw)`` and applied; False when refused (skipped here: see :meth:`follow`)."""
        try:
            if job:
                self.add_job(check("JobEvent", raw), partition)
            else:
                self.apply_cluster(check("cluster", raw), shared=True)
        except (ValueError, TypeError, KeyError) as exc:
            log.debug("cluster view skips a record (%s): %s", "jobs" if job else "internal.cluster", exc)
            return False
        return True

    async def follow(self, kafka_config: dict, jobs_topic: str, cluster_topic: str, check) -> None:
        """Read every partition of both topics for as long as the worker runs.

        ``check(kind, raw)`` is the door's decode-and-check (it raises on a bad record; the
        jobs and cluster agents dead-letter those on the partition's owner, so here they are
        only skipped: one dead letter per record, not one per worker).
        """
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(jobs_topic, cluster_topic, **kafka_config, group_id=None,
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            while True:
                batch = await consumer.getmany(timeout_ms=200, max_records=5000)
                for tp, messages in batch.items():
                    for m in messages:
                        self.receive(m.value, tp.partition, check, job=tp.topic == jobs_topic)
                for tp in consumer.assignment():
                    if tp.topic == jobs_topic:
                        end = consumer.highwater(tp)
                        position = await consumer.position(tp)
                        if end is not None and position >= end:
                            self._caught_up.add(tp.partition)
                        else:
                            self._caught_up.discard(tp.partition)
        except asyncio.CancelledError:
            raise
        finally:
            await consumer.stop()


def _later(old: Mapping[str, Any] | None, record: Mapping[str, Any]) -> dict[str, float]:
    """The later of two warning episodes (by first, then last warning): updates are idempotent."""
    new = (float(record["first_warn"]), float(record["last_warn"]))
    if old is not None and new < (old["first_warn"], old["last_warn"]):
        return dict(old)
    return {"first_warn": new[0], "last_warn": new[1]}
