"""The decision agent's logic as a pure function of event times (the offline side of parity).

Given every prediction (node, sample time, verdict), the job events and the decision
policy, :func:`decide_trace` returns the actions the streaming decision agent must
publish, with their deterministic ids (:func:`hpcguard.models.actions.action_id`):

* a node's **warning episode** starts at a warning when no episode is active; an episode
  ends at a non-warning prediction more than ``quiet_s`` after its last warning
  (:func:`episode_starts`); only an episode's first warning is decided on;
* the job on the node is the one whose run contains the warning's sample time, and the
  spare pool is FARS's (idle − warned − the queue head's EASY reservation) at that time,
  both from a :class:`hpcguard.models.jobs.JobTimeline` (the temporal join);
* the action id hashes the action with its trigger ``"<model>@<node>@<sample time>"``.

Example
-------
>>> starts = episode_starts([0.0, 15.0, 30.0, 45.0, 700.0, 715.0], [True, True, False, False, False, True],
...                         quiet_s=600.0)
>>> starts.tolist()          # 700 is > 600 s after the last warning at 15: a new episode at 715
[0, 5]
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from hpcguard.models.actions import action_id
from hpcguard.models.jobs import JobTimeline
from hpcguard.models.policy import migration_claim, spare_pool_at

__all__ = ["episode_starts", "decide_trace", "trigger"]


def trigger(model: str, node: str, sample_time: float) -> str:
    """What a failure-prediction action's id hashes besides the action itself."""
    return f"{model}@{node}@{sample_time:.0f}"


def episode_starts(times: Sequence[float], warn: Sequence[bool], quiet_s: float) -> np.ndarray:
    """Indices (into one node's predictions sorted by time) of warnings that open an episode."""
    t = np.asarray(times, float)
    w = np.asarray(warn, bool)
    if t.size and np.any(np.diff(t) < 0):
        raise ValueError("times must be sorted")
    starts, active, last = [], False, -np.inf
    for i in range(t.size):  # every prediction, in time order
        if w[i]:
            if not active:
                starts.append(i)
            active, last = True, t[i]
        elif active and t[i] - last > quiet_s:
            active = False
    return np.array(starts, np.int64)


def decide_trace(predictions: Iterable[Mapping[str, Any]], job_events: Iterable[Mapping[str, Any]],
                 nodes: Iterable[str], policy: Callable[[dict, dict | None, list, Any], list[dict]],
                 predictor: Any = None, quiet_s: float = 600.0, hot_spares: Iterable[str] = ()) -> list[dict]:
    """Actions (with ``action_id``) for a whole recorded run, in sample-time order.

    ``predictions`` are ``NodePrediction``-shaped dicts (``node``, ``sample_time``,
    ``warn``, ``lead_minutes``, ``failure_probability``, ``model``); ``policy`` is the
    agent's ``policy(prediction, job, spare, predictor)`` (``streams.decisions.policy_for``).
    Nodes warned at a decision are those with an active episode at its sample time;
    ``hot_spares`` as in :func:`~hpcguard.models.policy.spare_pool_at`.
    """
    timeline = JobTimeline().extend(job_events)
    all_nodes = sorted({str(n) for n in nodes})
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for p in predictions:
        by_node.setdefault(str(p["node"]), []).append(p)
    episodes = []       # (sample time, node, prediction, episode end)
    for node, ps in by_node.items():
        ps = sorted(ps, key=lambda p: float(p["sample_time"]))
        t = np.array([float(p["sample_time"]) for p in ps])
        w = np.array([bool(p["warn"]) for p in ps])
        starts = episode_starts(t, w, quiet_s)
        for k, i in enumerate(starts.tolist()):
            nxt = starts[k + 1] if k + 1 < starts.size else t.size
            warned = np.flatnonzero(w[i:nxt])
            episodes.append((t[i], node, ps[i], t[i + warned[-1]] + quiet_s))
    episodes.sort(key=lambda e: (e[0], e[1]))
    actions = []
    claims: list[dict] = []  # spares taken by the migrations decided so far
    for t, node, p, _ in episodes:
        warned = {n for (s, n, _, end) in episodes if s <= t <= end}
        warned |= {c["node"] for c in claims if c["claimed_from"] <= t < c["claimed_until"]}
        spare = spare_pool_at(timeline, all_nodes + [node], warned, t, hot_spares)
        job = timeline.job_at(node, t)
        decided = policy(dict(p), job, spare, predictor)
        for a in decided:
            claim = migration_claim(a, spare, job, t)
            if claim is not None:
                claims.append(claim)
            a = {"source": p["model"], "deadline": t + 60.0 * float(p["lead_minutes"]),
                 **{k: v for k, v in a.items() if v is not None or k == "job_id"}}
            a["action_id"] = action_id(a["kind"], a.get("job_id"), a.get("nodes", []), trigger(p["model"], node, t))
            a["trigger"] = trigger(p["model"], node, t)
            actions.append(a)
    return actions
