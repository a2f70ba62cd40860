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
"""
from __future__ import annotations

import asyncio
import logging
import math
from typing import Any, Mapping

from hpcguard.models.jobs import JobTimeline

log = logging.getLogger("hpcguard.worker")


class ClusterView:
    """Job timeline, node first-seen times and warning episodes of the whole cluster."""

    def __init__(self, partitions: int = 1, lateness_s: float = 0.0) -> None:
        self.partitions = int(partitions)
        self.lateness_s = float(lateness_s)
        self.timeline = JobTimeline()
        self.first_seen: dict[str, float] = {}
        self.episodes: dict[str, dict[str, float]] = {}
        self._clocks: dict[int, float] = {}  # jobs partition -> newest event time
        self._caught_up: set[int] = set()  # jobs partitions read to their end (broadcast reader)

    # -- updates --------------------------------------------------------------------
    def add_job(self, event: Mapping[str, Any], partition: int) -> None:
        self.timeline.add(event)
        self._clocks[partition] = max(self._clocks.get(partition, -math.inf), float(event["time"]))

    def apply_cluster(self, record: Mapping[str, Any]) -> None:
        """A record of ``internal.cluster``: ``{"node", "first"}`` or ``{"node", "first_warn", "last_warn"}``."""
        node = str(record["node"])
        if "first" in record:
            self.first_seen[node] = min(self.first_seen.get(node, math.inf), float(record["first"]))
        else:
            old = self.episodes.get(node)
            if old is None or (record["first_warn"], record["last_warn"]) >= (old["first_warn"], old["last_warn"]):
                self.episodes[node] = {"first_warn": float(record["first_warn"]),
                                       "last_warn": float(record["last_warn"])}

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

    # -- the broadcast reader -------------------------------------------------------
    async def follow(self, kafka_config: dict, jobs_topic: str, cluster_topic: str, check) -> None:
        """Read every partition of both topics for as long as the worker runs.

        ``check(kind, raw)`` is the door's decode-and-check (it raises on a bad record;
        the jobs agent dead-letters those, so here they are only skipped).
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
                        try:
                            if tp.topic == jobs_topic:
                                self.add_job(check("JobEvent", m.value), tp.partition)
                            else:
                                self.apply_cluster(check("cluster", m.value))
                        except (ValueError, TypeError, KeyError) as exc:
                            log.debug("cluster view skips a record of %s: %s", tp.topic, exc)
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
