"""IO-aware scheduling actions from CanarIO predictions (seed 004 Fig. 5.1, §4.6).

(a) While IO degradation is detected, an IO-sensitive job at the head of the queue is
    delayed (the next job then becomes the head and is considered in turn; the
    optional IO-limit check of Fig. 5.1a also delays a job whose predicted IO would
    push the system above its limit).
(b) While IO degradation is detected, running IO-sensitive jobs that have run less
    than half their expected runtime are replaced by waiting IO-resistant jobs —
    greedily, smallest used node-hours first (§4.6), each resistant job used once
    and only where it fits on the freed nodes.
(c) When degradation ends, delayed jobs are released.

Pure: the caller keeps the set of delayed jobs.  Every action is a dict with
``action_id``, ``kind`` (``delay`` | ``reschedule`` | ``release``), ``job_id``,
``nodes``, ``source`` = ``"canario"``, ``time`` and a ``reason`` with the detector's
probability, the window's features in bytes/s (not the variances, in (bytes/s)²) and
the job's predicted sensitivity.

Example
-------
>>> state = {"degraded": True, "probability": 0.8, "window_end": 600.0, "features": {}}
>>> queue = [{"job_id": "7", "num_nodes": 2, "sensitivity": 0.9}]
>>> [a["kind"] for a in io_aware_actions(state, queue, running=[], now=600.0)]
['delay']
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

from hpcguard.models.actions import action_id

SOURCE = "canario"


def _nodes(job: dict) -> list[str]:
    nodes = job.get("nodes") or []
    return [nodes] if isinstance(nodes, str) else list(nodes)


def _num_nodes(job: dict) -> int:
    return int(job.get("num_nodes") or len(_nodes(job)) or 1)


def _action(kind: str, job: dict, now: float, state: dict, branch: str, **extra) -> dict:
    trigger = f"{SOURCE}@{state.get('window_end', now)}"
    # why: the window's variances are in (bytes/s)² (1e15–1e19 on a busy PFS), beyond any sane bound on a
    # reason's numbers (the door refuses them); the std carries the same in bytes/s, the whole window is on
    # io.degradation under the same window_end
    features = {k: v for k, v in (state.get("features") or {}).items() if not k.endswith("_var")}
    reason = {"branch": branch, "window_end": state.get("window_end"),
              "probability": state.get("probability"), "features": features,
              "predicted_sensitivity": job.get("sensitivity"), **extra}
    return {"action_id": action_id(kind, job_id=str(job["job_id"]), nodes=_nodes(job), trigger=trigger),
            "kind": kind, "job_id": str(job["job_id"]), "nodes": _nodes(job), "source": SOURCE,
            "time": float(now), "reason": reason}


def io_aware_actions(state: dict, queue: Sequence[dict], running: Sequence[dict], now: float,
                     delayed: Iterable[str] = (), sensitive_at: float = 0.5, system_io: Optional[float] = None,
                     io_limit: Optional[float] = None, max_replacements: Optional[int] = None) -> list[dict]:
    """Actions for one detector verdict.

    Parameters
    ----------
    state
        ``degraded`` (bool), ``probability``, ``window_end``, ``features`` of the
        latest window.
    queue
        Waiting jobs in priority order: ``job_id``, ``num_nodes``, ``sensitivity``
        (predicted probability of IO sensitivity), optional ``predicted_io`` (bytes/s).
    running
        Running jobs: ``job_id``, ``nodes``, ``num_nodes``, ``start``,
        ``expected_runtime_s``, ``sensitivity``.
    delayed
        Jobs currently held by an earlier ``delay``.
    system_io, io_limit
        Current system IO and the PFS limit for the Fig. 5.1a IO-limit check.
    """
    delayed = {str(j) for j in delayed}
    actions: list[dict] = []
    if not state.get("degraded"):
        for job in queue:
            if str(job["job_id"]) in delayed:
                actions.append(_action("release", job, now, state, "degradation-ended"))
        return actions

    # (a) queue head: delay IO-sensitive jobs (and jobs that would exceed the IO limit)
    resistant_waiting = []
    head_open = True
    for job in queue:
        jid = str(job["job_id"])
        sensitive = float(job.get("sensitivity", 0.0)) >= sensitive_at
        over_limit = (io_limit is not None and system_io is not None
                      and system_io + float(job.get("predicted_io", 0.0)) > io_limit)
        if head_open and (sensitive or over_limit):
            if jid not in delayed:
                actions.append(_action("delay", job, now, state,
                                       "queue-head-io-sensitive" if sensitive else "queue-head-io-limit"))
            continue
        head_open = False
        if not sensitive and jid not in delayed:
            resistant_waiting.append(job)

    # (b) replace young IO-sensitive running jobs by waiting IO-resistant jobs, smallest used node-hours first
    candidates = []
    for job in running:
        elapsed = now - float(job["start"])
        expected = float(job.get("expected_runtime_s") or 0.0)
        if float(job.get("sensitivity", 0.0)) >= sensitive_at and expected > 0 and elapsed < expected / 2:
            candidates.append((_num_nodes(job) * elapsed / 3600.0, str(job["job_id"]), job, elapsed, expected))
    candidates.sort(key=lambda c: (c[0], c[1]))
    used = set()
    for used_nh, _jid, job, elapsed, expected in candidates:
        if max_replacements is not None and len(used) >= max_replacements:
            break
        fit = next((r for r in resistant_waiting
                    if str(r["job_id"]) not in used and _num_nodes(r) <= _num_nodes(job)), None)
        if fit is None:
            continue
        used.add(str(fit["job_id"]))
        actions.append(_action("reschedule", job, now, state, "replace-io-sensitive",
                               used_node_hours=used_nh, elapsed_s=elapsed, expected_runtime_s=expected,
                               replacement_job_id=str(fit["job_id"]),
                               replacement_sensitivity=fit.get("sensitivity")))
    return actions
