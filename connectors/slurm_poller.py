"""Poll a Slurm controller and turn what changed into job events and node sets.

Each ``poll()`` reads ``squeue`` and ``sinfo`` (``--json`` when the installed Slurm
supports it, Slurm ≥ 21.08; otherwise a fixed ``-o`` format) and compares with the
previous poll.  It returns ``JobEvent``-shaped dicts (``streams.records.JobEvent``):

* ``submit`` — a pending job seen for the first time;
* ``start`` — a job seen running (first time, or again after a requeue), with its nodes,
  start time and time limit;
* ``requeue`` — a job's restart count went up, or it went from running back to pending;
* ``end`` — a job reached a final state or left the queue;

plus two node-set events keyed by the empty job id: ``idle-nodes`` and
``drained-nodes`` (``nodes`` holds the set, ``num_nodes`` its size), from which the
pipeline builds its spare pool.  The first poll reports every running job as ``start``.

Example
-------
>>> poller = SlurmPoller(runner=None, use_json=True)
>>> jobs = [{"job_id": "7", "state": "RUNNING", "nodes": ["n1"], "num_nodes": 1, "user": "u", "partition": "p",
...          "name": "x", "time_limit_s": 600.0, "submit_time": 1.0, "start_time": 2.0, "end_time": None,
...          "restarts": 0, "reason": ""}]
>>> [e["event"] for e in poller.diff(jobs, [], now=3.0)]
['start', 'idle-nodes', 'drained-nodes']
>>> jobs[0]["state"] = "COMPLETED"
>>> [e["event"] for e in poller.diff(jobs, [], now=4.0)][0]
'end'
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping

from hpcguard.connectors.slurm import (SQUEUE_FORMAT, SlurmRunner, parse_sinfo_json, parse_sinfo_text,
                                       parse_squeue_json, parse_squeue_text)

FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                          "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"})
ACTIVE_STATES = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "CONFIGURING"})
START_STATES = frozenset({"RUNNING", "SUSPENDED", "CONFIGURING"})


class SlurmPoller:
    """Turns successive ``squeue``/``sinfo`` snapshots into job events and node sets.

    Parameters
    ----------
    runner : SlurmRunner
        Runs the commands (carries ``SLURM_CONF`` and timeouts).
    use_json : bool, optional
        Force JSON (True) or text (False); None probes ``squeue --json`` once.
    """

    def __init__(self, runner: SlurmRunner | None, use_json: bool | None = None):
        self.runner = runner
        self.use_json = use_json
        self._jobs: dict[str, dict[str, Any]] = {}
        self._seen_running: set[str] = set()
        self._last_sets: dict[str, tuple[str, ...]] = {}

    # -- reading
    def read_jobs(self) -> list[dict[str, Any]]:
        if self.use_json is not False:
            res = self.runner.run("squeue", "--json")
            if res.ok:
                self.use_json = True
                return parse_squeue_json(res.stdout)
            if self.use_json:
                raise RuntimeError(f"squeue --json failed: {res.stderr.strip()}")
            self.use_json = False
        res = self.runner.run("squeue", "-h", "-t", "all", "-o", SQUEUE_FORMAT)
        if not res.ok:
            raise RuntimeError(f"squeue failed: {res.stderr.strip()}")
        return parse_squeue_text(res.stdout)

    def read_nodes(self) -> list[dict[str, Any]]:
        if self.use_json:
            res = self.runner.run("sinfo", "--json")
            if res.ok:
                return parse_sinfo_json(res.stdout)
        res = self.runner.run("sinfo", "-h", "-N", "-o", "%N|%T|%E")
        if not res.ok:
            raise RuntimeError(f"sinfo failed: {res.stderr.strip()}")
        return parse_sinfo_text(res.stdout)

    def poll(self, now: float | None = None) -> list[dict[str, Any]]:
        """Read the controller once; return the events since the previous poll."""
        jobs = self.read_jobs()
        nodes = self.read_nodes()
        return self.diff(jobs, nodes, now=time.time() if now is None else now)

    # -- diffing (pure)
    def diff(self, jobs: list[Mapping[str, Any]], nodes: list[Mapping[str, Any]], now: float,
             always_node_sets: bool = False) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        current = {j["job_id"]: dict(j) for j in jobs}
        for job_id, job in current.items():
            prev = self._jobs.get(job_id)
            state = job["state"]
            requeued = prev is not None and (
                (job["restarts"] >= 0 and prev["restarts"] >= 0 and job["restarts"] > prev["restarts"])
                or (prev["state"] in ACTIVE_STATES and state in ("PENDING", "REQUEUED", "REQUEUE_HOLD")))
            if requeued:
                events.append(_event(job, "requeue", now))
                self._seen_running.discard(job_id)
            if state in FINAL_STATES:
                if prev is None or prev["state"] not in FINAL_STATES:
                    if prev is not None or job_id in self._seen_running:
                        events.append(_event(job, "end", job.get("end_time") or now))
                    self._seen_running.discard(job_id)
                continue
            if state in START_STATES and job_id not in self._seen_running and not requeued:
                self._seen_running.add(job_id)
                events.append(_event(job, "start", job.get("start_time") or now))
            elif state == "PENDING" and prev is None:
                events.append(_event(job, "submit", job.get("submit_time") or now))
        for job_id, prev in self._jobs.items():
            if job_id not in current and prev["state"] not in FINAL_STATES:
                events.append(_event({**prev, "state": "GONE"}, "end", now))
                self._seen_running.discard(job_id)
        self._jobs = current
        idle = tuple(sorted(n["name"] for n in nodes if _is_idle(n)))
        drained = tuple(sorted(n["name"] for n in nodes if "DRAIN" in n["flags"] or "DRAINED" in n["flags"]))
        for name, members in (("idle-nodes", idle), ("drained-nodes", drained)):
            if always_node_sets or self._last_sets.get(name) != members:
                self._last_sets[name] = members
                events.append({"job_id": "", "event": name, "time": now, "nodes": list(members),
                               "num_nodes": len(members), "state": name.split("-")[0].upper()})
        return events

    def run(self, publish: Callable[[str, dict[str, Any]], None], interval_s: float = 10.0,
            stop: threading.Event | None = None) -> None:
        """Poll every ``interval_s`` and ``publish(key, event)`` until ``stop`` is set.

        A failed poll (controller down, timeout) is reported as an ``error`` event and retried.
        """
        stop = stop or threading.Event()
        while not stop.is_set():
            try:
                for event in self.poll():
                    publish(event["job_id"], event)
            except (RuntimeError, ValueError, OSError) as err:
                publish("", {"job_id": "", "event": "error", "time": time.time(), "state": str(err)[:500]})
            stop.wait(interval_s)


def _is_idle(node: Mapping[str, Any]) -> bool:
    flags = node["flags"]
    bad = {"DRAIN", "DRAINED", "DRAINING", "DOWN", "NOT_RESPONDING", "FAIL", "MAINTENANCE", "RESERVED", "POWERED_DOWN"}
    return "IDLE" in flags and not (flags & bad)


def _event(job: Mapping[str, Any], kind: str, when: float) -> dict[str, Any]:
    return {"job_id": job["job_id"], "event": kind, "time": float(when), "nodes": list(job.get("nodes") or []),
            "num_nodes": int(job.get("num_nodes") or len(job.get("nodes") or [])), "user": job.get("user", ""),
            "partition": job.get("partition", ""), "name": job.get("name", ""), "state": job.get("state", ""),
            "time_limit_s": job.get("time_limit_s"), "submit_time": job.get("submit_time"),
            "start_time": job.get("start_time"), "end_time": job.get("end_time") if kind == "end" else None,
            "exit_code": None}
