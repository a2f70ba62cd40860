"""FARS fault-aware rescheduling (seed 001, Li & Lan et al., TPDS 2009).

Dynamic spare pool (§3.2), job failure probability and the rescheduling gains of
SUL-D, JFR-D and FSD-D (Eqs. 2–4), the 0-1 knapsack by dynamic programming (Eqs. 1, 5)
and the residual rule (§4.4). Times are hours.

>>> jobs = [{"id": "a", "nodes": 64, "suspicious_nodes": 2, "hours_since_checkpoint": 3.0, "runtime_h": 10},
...         {"id": "b", "nodes": 8, "suspicious_nodes": 1, "hours_since_checkpoint": 1.0, "runtime_h": 2}]
>>> sel = select_jobs(jobs, spare=2, strategy="sul-d", precision=0.7, interval_h=0.5, overhead_h=0.1)
>>> sel.selected, sel.spare_used
(['a'], 2)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

__all__ = ["STRATEGIES", "Selection", "easy_extra_nodes", "spare_pool", "job_failure_probability", "gains", "knapsack", "select_jobs"]

STRATEGIES = ("sul-d", "jfr-d", "fsd-d")


def easy_extra_nodes(free: int, head_size: int, releases=()) -> int:
    """Nodes the queue head's EASY reservation leaves to others (FCFS/EASY, seed 001 Fig. 2).

    The head needs ``head_size`` nodes; ``free`` are idle now and ``releases`` are
    ``(time, nodes)`` pairs of nodes expected free later (running jobs' estimated ends,
    repairs). At the *shadow time* (the first time enough nodes are free) the head starts;
    the nodes free then beyond its need are the *extra* nodes. A head that never fits
    leaves none.

    >>> easy_extra_nodes(2, 3, [(50.0, 2)])    # 2 free + 2 at t=50 -> head takes 3, 1 extra
    1
    >>> easy_extra_nodes(5, 3), easy_extra_nodes(2, 0), easy_extra_nodes(1, 4, [(9.0, 1)])
    (2, 2, 0)
    """
    free, head_size = int(free), int(head_size)
    if free < 0 or head_size < 0:
        raise ValueError("free and head_size must be >= 0")
    avail = free
    if avail >= head_size:
        return avail - head_size
    for _, n in sorted((float(t), int(n)) for t, n in releases):
        avail += n
        if avail >= head_size:
            return avail - head_size
    return 0


def spare_pool(idle_nodes, suspicious_nodes, head_size: int = 0, releases=()) -> list:
    """FARS's dynamic spare pool (seed 001 §3.2): idle nodes − nodes predicted to fail −
    nodes held for the EASY reservation of the queue head, as a sorted list.

    Idle candidates (sorted) are kept for the reservation first; only the head's
    :func:`easy_extra_nodes` can be lent out as spares. The streaming decision agent (idle
    nodes and queue from the job timeline at the warning's sample time) and the cluster
    simulator both call this.

    >>> spare_pool({"n4", "n5"}, set(), head_size=3, releases=[(50.0, 2)])   # Fig. 2: only n5
    ['n5']
    >>> spare_pool({"n1", "n4", "n5"}, {"n1"})
    ['n4', 'n5']
    """
    candidates = sorted(set(idle_nodes) - set(suspicious_nodes))
    extra = easy_extra_nodes(len(candidates), head_size, releases) if head_size > 0 else len(candidates)
    return candidates[max(len(candidates) - extra, 0):]


def job_failure_probability(precision, n_suspicious):
    """``f_i = 1 - (1 - precision)^{n_i^s}`` (below Eq. 2).

    >>> round(job_failure_probability(0.5, 2), 3)
    0.75
    """
    p = np.asarray(precision, dtype=float)
    if np.any((p < 0) | (p > 1)):
        raise ValueError("precision must be in [0, 1]")
    n = np.asarray(n_suspicious, dtype=float)
    if np.any(n < 0):
        raise ValueError("n_suspicious must be >= 0")
    out = -np.expm1(n * np.log1p(-p)) if np.all(p < 1) else np.where(n > 0, 1.0, 0.0) * np.ones_like(p * n)
    return float(out) if np.ndim(out) == 0 else out


def gains(strategy: str, f, nodes, hours_since_checkpoint, runtime_h, interval_h: float, overhead_h: float,
          requeue_h=0.0, restart_h=0.0) -> np.ndarray:
    """Rescheduling gains ``v_i`` (vectorised over jobs).

    * SUL-D (Eq. 2): ``f n (t + I_F/2 - t_last - O_F)``
    * JFR-D (Eq. 3): ``f``
    * FSD-D (Eq. 4): ``f (t + I_F/2 - t_last + O_q + O_r - O_F) / t_i``

    where ``t - t_last`` is ``hours_since_checkpoint``, ``I_F`` the FARS interval,
    ``O_F`` the rescheduling overhead, ``O_q``/``O_r`` re-queue and restart costs and
    ``t_i`` the failure-free runtime.
    """
    f = np.asarray(f, dtype=float)
    since = np.asarray(hours_since_checkpoint, dtype=float)
    saved = since + interval_h / 2.0 - overhead_h
    if strategy == "sul-d":
        return f * np.asarray(nodes, dtype=float) * saved
    if strategy == "jfr-d":
        return f * np.ones_like(saved)
    if strategy == "fsd-d":
        runtime = np.asarray(runtime_h, dtype=float)
        if np.any(runtime <= 0):
            raise ValueError("runtime_h must be > 0 for fsd-d")
        return f * (saved + np.asarray(requeue_h, dtype=float) + np.asarray(restart_h, dtype=float)) / runtime
    raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")


def knapsack(weights, values, capacity: int) -> tuple[list[int], float]:
    """0-1 knapsack by the tabular dynamic programme of Eq. 5, vectorised over capacity.

    ``G[k, w] = max(G[k-1, w], v_k + G[k-1, w - n_k])``; the chosen set is recovered by
    walking the table back. Items with non-positive value are never chosen.

    >>> knapsack([2, 3, 4], [3.0, 4.0, 5.0], 5)
    ([0, 1], 7.0)
    """
    w = np.asarray(weights, dtype=np.int64)
    v = np.asarray(values, dtype=float)
    if w.shape != v.shape or w.ndim != 1:
        raise ValueError("weights and values must be 1-D of the same length")
    if np.any(w < 0) or capacity < 0:
        raise ValueError("weights and capacity must be >= 0")
    table = np.zeros((w.size + 1, capacity + 1))
    for k in range(1, w.size + 1):
        prev, row = table[k - 1], table[k - 1].copy()
        wk = w[k - 1]
        if v[k - 1] > 0 and wk <= capacity:
            take = prev[: capacity + 1 - wk] + v[k - 1]
            row[wk:] = np.maximum(prev[wk:], take)
        table[k] = row
    chosen, cap = [], capacity
    for k in range(w.size, 0, -1):
        if table[k, cap] != table[k - 1, cap]:
            chosen.append(k - 1)
            cap -= int(w[k - 1])
    return sorted(chosen), float(table[w.size, capacity])


@dataclass(frozen=True)
class Selection:
    """Jobs chosen for rescheduling: ids, total gain, spare nodes used, and the job picked
    by the residual rule (``None`` if none)."""

    selected: list
    gain: float
    spare_used: int
    residual: str | None = None
    gains: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def _field(job: dict, key: str, default=None):
    if key in job and job[key] is not None:
        return job[key]
    if default is None:
        raise ValueError(f"job {job.get('id', '?')!r} lacks {key!r}")
    return default


def select_jobs(jobs: list[dict], spare: int, strategy: str, precision: float, interval_h: float,
                overhead_h: float) -> Selection:
    """Choose suspicious jobs to reschedule onto ``spare`` nodes (§4.1–§4.4).

    Each job dict has ``id``, ``nodes``, ``suspicious_nodes``, ``hours_since_checkpoint``,
    ``runtime_h`` and optionally ``requeue_h`` (O_q), ``restart_h`` (O_r). The weight of a
    job is its number of suspicious nodes. After the knapsack, if ``R > 0`` spare nodes
    remain, the residual rule recomputes the gains of the remaining jobs with
    ``f = 1 - (1 - precision)^{n^s - R}`` and adds the best one (if its gain is positive).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if spare < 0:
        raise ValueError("spare must be >= 0")
    if not jobs:
        return Selection([], 0.0, 0)
    ids = [str(_field(j, "id")) for j in jobs]
    if len(set(ids)) != len(ids):
        raise ValueError("job ids must be unique")
    n_s = np.array([int(_field(j, "suspicious_nodes")) for j in jobs])
    nodes = np.array([int(_field(j, "nodes")) for j in jobs])
    if np.any(n_s < 1) or np.any(nodes < n_s):
        raise ValueError("each job needs 1 <= suspicious_nodes <= nodes")
    since = np.array([float(_field(j, "hours_since_checkpoint")) for j in jobs])
    runtime = np.array([float(_field(j, "runtime_h", 1.0)) for j in jobs])
    requeue = np.array([float(j.get("requeue_h", 0.0) or 0.0) for j in jobs])
    restart = np.array([float(j.get("restart_h", 0.0) or 0.0) for j in jobs])

    def v(f):
        return gains(strategy, f, nodes, since, runtime, interval_h, overhead_h, requeue, restart)

    values = v(job_failure_probability(precision, n_s))
    chosen, total = knapsack(n_s, values, int(spare))
    used = int(n_s[chosen].sum()) if chosen else 0
    residual_id = None
    left = int(spare) - used
    rest = np.setdiff1d(np.arange(len(jobs)), chosen)
    if left > 0 and rest.size:
        f_res = job_failure_probability(precision, np.maximum(n_s[rest] - left, 0))
        v_res = gains(strategy, f_res, nodes[rest], since[rest], runtime[rest], interval_h, overhead_h,
                      requeue[rest], restart[rest])
        best = int(np.argmax(v_res))
        if v_res[best] > 0:
            residual_id = ids[rest[best]]
            chosen = sorted([*chosen, int(rest[best])])
            total += float(v_res[best])
            used = int(spare)
    return Selection([ids[i] for i in chosen], float(total), used, residual_id,
                     {ids[i]: float(values[i]) for i in range(len(jobs))})
