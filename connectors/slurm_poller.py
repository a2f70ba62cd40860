"""Poll a Slurm controller and turn what changed into job events and node sets.

Each ``poll()`` reads ``squeue`` and ``sinfo`` (``--json`` when the installed Slurm
supports it, Slurm ≥ 21.08; otherwise a fixed ``-o`` format) and compares with the
previous poll.  It returns ``JobEvent``-shaped dicts (``streams.records.JobEvent``):

* ``submit`` — a pending job seen for the first time;
* ``start`` — a job seen running (first time, or again after a requeue), with its nodes,
  start time and time limit;
* ``requeue`` — a job's restart count went up, or it went from running back to pending;
* ``end`` — a job reached a final state or left the queue;

plus, keyed by the empty job id:

* ``node-state`` — a node entered a state Slurm uses for trouble (down, not responding,
  fail, failing, drain, error), or changed state or reason within it; once it is back, the
  same event again with ``end_time`` (``models.labels.node_state_labels`` reads both: the
  worker's labels from Slurm's word, as from ``sacctmgr show event``);
* ``idle-nodes`` and ``drained-nodes`` — the node sets (``nodes``, ``num_nodes``), for a
  caller that keeps a spare pool.

The first poll reports every running job as ``start`` and every node in trouble.
:meth:`SlurmPoller.run` publishes what the worker reads (job events, node states and a
progress marker per poll: every job event up to the poll's time is out); ``hpcguard
poll-slurm`` runs it against a site's controller.

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
>>> down = [{"name": "n1", "state": "DOWN+NOT_RESPONDING", "flags": {"DOWN", "NOT_RESPONDING"}, "reason": "Not responding"}]
>>> [(e["event"], e["state"], e["time"], e["end_time"]) for e in poller.diff([], down, now=5.0)[:1]]
[('node-state', 'DOWN+NOT_RESPONDING', 5.0, None)]
>>> up = [{"name": "n1", "state": "IDLE", "flags": {"IDLE"}, "reason": ""}]
>>> [(e["event"], e["time"], e["end_time"]) for e in poller.diff([], up, now=65.0)[:1]]
[('node-state', 5.0, 65.0)]
"""
from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, Mapping

from hpcguard.connectors.slurm import (SQUEUE_FORMAT, SlurmRunner, parse_sinfo_json, parse_sinfo_text,
                                       parse_squeue_json, parse_squeue_text)
from hpcguard.models.jobs import NODE_STATE, PROGRESS

FINAL_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                          "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT", "REVOKED"})
ACTIVE_STATES = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "CONFIGURING"})
START_STATES = frozenset({"RUNNING", "SUSPENDED", "CONFIGURING"})
#: node states (flags) Slurm uses for trouble: a node in one of them gets ``node-state`` events
TROUBLE_FLAGS = frozenset({"DOWN", "NOT_RESPONDING", "FAIL", "FAILING", "DRAIN", "DRAINED", "DRAINING", "ERROR"})
#: the job events the worker's door takes (``JobEvent``); the node sets are for other callers
PUBLISHED_EVENTS = frozenset({"submit", "start", "end", "requeue", "hold", "release", NODE_STATE})


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
        self._trouble: dict[str, dict[str, Any]] = {}  # node → its open node-state event

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
        events += self._node_states(nodes, now)
        idle = tuple(sorted(n["name"] for n in nodes if _is_idle(n)))
        drained = tuple(sorted(n["name"] for n in nodes if "DRAIN" in n["flags"] or "DRAINED" in n["flags"]))
        for name, members in (("idle-nodes", idle), ("drained-nodes", drained)):
            if always_node_sets or self._last_sets.get(name) != members:
                self._last_sets[name] = members
                events.append({"job_id": "", "event": name, "time": now, "nodes": list(members),
                               "num_nodes": len(members), "state": name.split("-")[0].upper()})
        return events

    def _node_states(self, nodes: list[Mapping[str, Any]], now: float) -> list[dict[str, Any]]:
        """``node-state`` events: a node into trouble (or a new state or reason within it), and out of it."""
        events: list[dict[str, Any]] = []
        for node in nodes:
            name, state, reason = node["name"], node.get("state", ""), node.get("reason", "") or ""
            open_event = self._trouble.get(name)
            in_trouble = bool(node["flags"] & TROUBLE_FLAGS)
            if open_event is not None and (not in_trouble or (open_event["state"], open_event["reason"]) != (state, reason)):
                events.append({**open_event, "end_time": float(now)})  # closed: the label's until
                del self._trouble[name]
                open_event = None
            if in_trouble and open_event is None:
                self._trouble[name] = {"job_id": "", "event": NODE_STATE, "time": float(now), "nodes": [name],
                                       "num_nodes": 1, "state": state, "reason": reason, "end_time": None}
                events.append(dict(self._trouble[name]))
        return events

    def run(self, publish: Callable[[str, dict[str, Any]], None], interval_s: float = 10.0,
            stop: threading.Event | None = None, polls: int | None = None,
            on_error: Callable[[str], None] = lambda message: None) -> int:
        """Poll every ``interval_s`` and ``publish(key, event)`` what the worker reads, until ``stop``
        is set (or after ``polls`` polls); returns the number of polls that failed.

        Job events go out keyed by job, node states by node, then a ``progress`` marker at the poll's
        time (every job event up to it is out). A failed poll (controller down, timeout) goes to
        ``on_error`` and is retried at the next interval; it publishes nothing.
        """
        stop = stop or threading.Event()
        done = failed = 0
        while not stop.is_set():
            now = time.time()
            try:
                events = self.poll(now)
            except (RuntimeError, ValueError, OSError) as err:
                failed += 1
                on_error(str(err)[:500])
            else:
                for event in events:
                    if event["event"] in PUBLISHED_EVENTS:
                        publish(event["nodes"][0] if event["event"] == NODE_STATE else event["job_id"], event)
                publish("", {"event": PROGRESS, "time": float(now)})
            done += 1
            if polls is not None and done >= polls:
                break
            stop.wait(interval_s)
        return failed


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


def publish_polls(poller: SlurmPoller, kafka, topics, interval_s: float = 10.0, polls: int | None = None,
                  stop: threading.Event | None = None, on_error: Callable[[str], None] = lambda message: None,
                  on_poll: Callable[[dict[str, int]], None] = lambda counts: None) -> dict[str, Any]:
    """Run ``poller`` and publish to the worker's ``jobs`` topic (``topics.name("jobs")``, created if
    missing) until ``stop`` is set or after ``polls`` polls; returns the counts per event kind, the
    failed polls and the records the broker refused."""
    from kafka import KafkaProducer

    from hpcguard.connectors.kafka import ensure_topics, kafka_python_config

    topic = topics.name("jobs")
    ensure_topics(kafka, [topic], topics.partitions, topics.replication)
    # one request in flight with retries: a transient broker error neither loses nor reorders job events
    producer = KafkaProducer(**kafka_python_config(kafka), acks="all", retries=10, linger_ms=5,
                             max_in_flight_requests_per_connection=1)
    counts: dict[str, int] = {}
    undelivered: list[str] = []

    def publish(key: str, event: dict[str, Any]) -> None:
        producer.send(topic, key=key.encode(), value=json.dumps({**event, "v": 1}).encode()).add_errback(
            lambda exc: undelivered.append(f"{type(exc).__name__}: {exc}"))
        counts[event["event"]] = counts.get(event["event"], 0) + 1
        if event["event"] == PROGRESS:  # the end of one poll: its records are out before the next poll
            producer.flush()
            on_poll(dict(counts))

    try:
        failed = poller.run(publish, interval_s=interval_s, stop=stop, polls=polls, on_error=on_error)
        producer.flush()
    finally:
        producer.close()
    return {"topic": topic, "published": counts, "failed_polls": failed, "undelivered": len(undelivered),
            "last_delivery_error": undelivered[-1] if undelivered else ""}
