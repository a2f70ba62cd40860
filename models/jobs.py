"""Which job ran where, and when: a temporal join of job events and event times.

:class:`JobTimeline` keeps every job's runs (``[start, end)`` on its nodes) from
``JobEvent``-shaped dicts (``streams.records.JobEvent``) and answers questions *at an
event time*: :meth:`~JobTimeline.job_at` (the job on a node at ``t``),
:meth:`~JobTimeline.running_at` and :meth:`~JobTimeline.queued_at` (CanarIO's running
jobs and queue at ``t``), :meth:`~JobTimeline.idle_nodes_at` (FARS's idle nodes).

Answers depend only on events whose time is ``≤ t`` (a run's start is at or before
``t``; an end after ``t`` does not change whether ``t`` is inside the run), and never
on the order the events arrived in: a run is ``[start, first end after it)``.  So once
the job stream's :attr:`~JobTimeline.watermark` has passed ``t``, the answer is final;
the streaming decision agent waits (bounded) for that, and the offline computation
calls the same code on a whole file.

State round-trips through plain dicts (:meth:`~JobTimeline.to_state`), so a Faust table
can hold one timeline per node.

Example
-------
>>> tl = JobTimeline()
>>> tl.add({"job_id": "7", "event": "end", "time": 200.0, "nodes": ["n1"]})   # arrives first
>>> tl.add({"job_id": "7", "event": "start", "time": 100.0, "nodes": ["n1", "n2"], "time_limit_s": 600})
>>> tl.add({"job_id": "8", "event": "start", "time": 200.0, "nodes": ["n1"]})
>>> [tl.job_at("n1", t)["job_id"] if tl.job_at("n1", t) else None for t in (99.0, 100.0, 199.9, 200.0)]
[None, '7', '7', '8']
>>> tl.job_at("n2", 150.0)["nodes"], tl.job_at("n2", 150.0)["start_time"]
(['n1', 'n2'], 100.0)
>>> JobTimeline.from_state(tl.to_state()).job_at("n2", 250.0) is None
True
>>> tl.add({"event": "progress", "time": 300.0})   # the source: every job event up to 300 is out
>>> tl.watermark, tl.final_at(299.0)
(300.0, True)
"""
from __future__ import annotations

import bisect
import math
from typing import Any, Iterable, Mapping

#: events that end a run of the job (a requeued job may start again later)
END_EVENTS = frozenset({"end", "requeue", "fail", "cancel"})
#: a job source's progress marker (no job): every job event up to its time was published before it
PROGRESS = "progress"
#: a node's Slurm state change (``sacctmgr show event``): on the job topic, naming no job
NODE_STATE = "node-state"
#: job fields a decision may read (the rest of an event is not kept)
INFO_FIELDS = ("num_nodes", "user", "partition", "name", "time_limit_s", "submit_time", "script")


class JobTimeline:
    """Job runs by job and node, queried by event time.

    Parameters
    ----------
    retention_s
        :meth:`evict` forgets jobs whose last run ended more than this long before the
        watermark (bounded state).
    """

    def __init__(self, retention_s: float = 7 * 86400.0) -> None:
        self.retention_s = float(retention_s)
        self._jobs: dict[str, dict[str, Any]] = {}
        self._by_node: dict[str, set[str]] = {}
        self.watermark = -math.inf  # newest event time seen (the job stream's clock)

    # -- ingest ---------------------------------------------------------------------
    def add(self, event: Mapping[str, Any]) -> None:
        """Add one job event (``submit``, ``start``, ``end``, ``requeue``, ``fail``...); a
        ``progress`` marker only moves the watermark."""
        kind, t = str(event["event"]), float(event["time"])
        if not math.isfinite(t):
            raise ValueError(f"job {event.get('job_id')}: event time {t!r} is not finite")
        if kind == PROGRESS:
            self.watermark = max(self.watermark, t)
            return
        if kind == NODE_STATE:
            return  # a node's state names no job (its labels are the jobs agent's)
        job_id = str(event["job_id"])
        job = self._jobs.setdefault(job_id, {"starts": [], "ends": [], "nodes": {}, "info": {}, "submit": None})
        info = job["info"]
        for k in INFO_FIELDS:
            if event.get(k) not in (None, "", 0) and k not in info:
                info[k] = event[k]
        if kind == "submit":
            job["submit"] = t if job["submit"] is None else min(job["submit"], t)
        elif kind == "start":
            start = float(event.get("start_time") or t)
            nodes = [str(n) for n in event.get("nodes") or []]
            if start not in job["starts"]:
                bisect.insort(job["starts"], start)
            job["nodes"][repr(start)] = nodes
            for n in nodes:
                self._by_node.setdefault(n, set()).add(job_id)
        elif kind in END_EVENTS:
            end = float(event.get("end_time") or t)
            if end not in job["ends"]:
                bisect.insort(job["ends"], end)
        self.watermark = max(self.watermark, t)

    def extend(self, events: Iterable[Mapping[str, Any]]) -> "JobTimeline":
        for e in events:
            self.add(e)
        return self

    # -- queries --------------------------------------------------------------------
    def _runs(self, job_id: str) -> list[tuple[float, float, list[str]]]:
        job = self._jobs[job_id]
        ends = job["ends"]
        runs = []
        for s in job["starts"]:
            k = bisect.bisect_right(ends, s)  # the first end after the start closes the run
            runs.append((s, ends[k] if k < len(ends) else math.inf, job["nodes"][repr(s)]))
        return runs

    def _record(self, job_id: str, run: tuple[float, float, list[str]]) -> dict[str, Any]:
        job = self._jobs[job_id]
        start, end, nodes = run
        return {**job["info"], "job_id": job_id, "nodes": list(nodes), "num_nodes": len(nodes) or
                job["info"].get("num_nodes", 0), "start_time": start,
                "end_time": end if math.isfinite(end) else None, "submit_time": job["submit"]}

    def job_at(self, node: str, t: float) -> dict[str, Any] | None:
        """The job whose run on ``node`` contains ``t`` (``[start, end)``), or ``None``.

        Overlapping runs (inconsistent input) resolve to the latest start, then the
        larger job id, so the answer never depends on arrival order.
        """
        best = None
        for job_id in self._by_node.get(node, ()):
            for run in self._runs(job_id):
                if run[0] <= t < run[1] and node in run[2] and (best is None or (run[0], job_id) > best[0]):
                    best = ((run[0], job_id), job_id, run)
        return None if best is None else self._record(best[1], best[2])

    def running_at(self, t: float) -> list[dict[str, Any]]:
        """Jobs running at ``t``, by job id."""
        out = []
        for job_id in sorted(self._jobs):
            out += [self._record(job_id, r) for r in self._runs(job_id) if r[0] <= t < r[1]]
        return out

    def queued_at(self, t: float) -> list[dict[str, Any]]:
        """Jobs submitted at or before ``t`` and neither running nor finished at ``t``,
        in submit order (then job id): the queue head comes first."""
        out = []
        for job_id, job in self._jobs.items():
            if job["submit"] is None or job["submit"] > t:
                continue
            if any(s <= t for s in job["starts"]) or any(e <= t for e in job["ends"]):
                continue  # started (running or done) or cancelled by t
            out.append({**job["info"], "job_id": job_id, "submit_time": job["submit"]})
        return sorted(out, key=lambda j: (j["submit_time"], j["job_id"]))

    def busy_nodes_at(self, t: float) -> set[str]:
        """Nodes with a running job at ``t``."""
        return {n for j in self.running_at(t) for n in j["nodes"]}

    def idle_nodes_at(self, nodes: Iterable[str], t: float) -> set[str]:
        """Those of ``nodes`` with no running job at ``t``."""
        return set(nodes) - self.busy_nodes_at(t)

    def knows(self, node: str) -> bool:
        """Whether a job's start event named ``node`` (a node known from the job records).

        >>> tl = JobTimeline().extend([{"job_id": "7", "event": "start", "time": 0.0, "nodes": ["n1"]}])
        >>> tl.knows("n1"), tl.knows("n2")
        (True, False)
        """
        return node in self._by_node

    def final_at(self, t: float, lateness_s: float = 0.0) -> bool:
        """Whether the job stream's watermark has passed ``t`` plus ``lateness_s``."""
        return self.watermark >= t + lateness_s

    # -- state ----------------------------------------------------------------------
    def job_state(self, job_id: str) -> dict[str, Any]:
        """One job's part of :meth:`to_state` (a table can hold one entry per job)."""
        return self._jobs[str(job_id)]

    def evict(self) -> int:
        """Forget jobs whose every run ended more than ``retention_s`` before the watermark."""
        horizon = self.watermark - self.retention_s
        gone = [j for j in self._jobs if self._runs(j) and all(r[1] < horizon for r in self._runs(j))]
        for j in gone:
            for n in {n for r in self._runs(j) for n in r[2]}:
                self._by_node.get(n, set()).discard(j)
            del self._jobs[j]
        return len(gone)

    def __len__(self) -> int:
        return len(self._jobs)

    def to_state(self) -> dict[str, Any]:
        return {"jobs": self._jobs, "watermark": self.watermark if math.isfinite(self.watermark) else None,
                "retention_s": self.retention_s}

    @classmethod
    def from_jobs(cls, jobs: Mapping[str, Mapping[str, Any]], watermark: float = -math.inf) -> "JobTimeline":
        """A timeline from per-job states (:meth:`job_state`) and the job stream's watermark."""
        return cls.from_state({"jobs": jobs, "watermark": watermark if math.isfinite(watermark) else None})

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None) -> "JobTimeline":
        tl = cls(float((state or {}).get("retention_s", 7 * 86400.0)))
        if not state:
            return tl
        tl._jobs = {str(j): {**v, "starts": [float(s) for s in v["starts"]], "ends": [float(e) for e in v["ends"]]}
                    for j, v in state.get("jobs", {}).items()}
        for job_id, job in tl._jobs.items():
            for nodes in job["nodes"].values():
                for n in nodes:
                    tl._by_node.setdefault(n, set()).add(job_id)
        wm = state.get("watermark")
        tl.watermark = -math.inf if wm is None else float(wm)
        return tl
