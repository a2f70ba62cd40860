"""Checkpoint intervals: Young, Daly (2006), the failure-probability aware interval and more.

The aware interval is seed 000 ch. 3 (A. Frank): the expected cost of checkpointing a
job of runtime ``t`` (Eq. 3.8) under Weibull (any shape ``w``) or Poisson failures with
MTBF ``M`` (Eqs. 3.9–3.13), minimised over ``t_u = tau + t_c`` on a one-minute grid
(Algorithm 1), with the option of not checkpointing at all (Fig. 3.5). The Monte-Carlo
cost of Eq. 3.1 validates any interval. MTBF is scaled to the job's node count by
Eq. 3.14. The burst-buffer multilevel interval is seed 003 Eq. 5.10.

All times are hours. ``interval`` always means the compute time ``tau`` between two
checkpoints (not counting the checkpoint itself).

Notes on the equations as printed
---------------------------------
* Eq. 3.3b prints ``t_f - floor(t_f/t_u) * t_u``; Eqs. 3.1 and 3.6b (and the text: "the
  cost of performing checkpoints plus the wasted computations") give
  ``t_f - floor(t_f/t_u) * tau``. We use the latter, which Eq. 3.8 is derived from.
* Eq. 3.7 sums ``i * [P((i+1) t_u) - P(i t_u)]`` up to ``i = t/t_u``; the last term then
  counts failures after ``t``, which the truncated moment ``mu^t`` excludes. We clip the
  upper limit at ``t``: ``n_f = sum_{i=1}^{floor(t/t_u)} (P(t) - P(i t_u))`` (the same sum
  by parts), which equals the printed one whenever ``t`` is a multiple of ``t_u`` and
  makes Eq. 3.8 agree with the Monte-Carlo cost of Eq. 3.1.
* Eq. 3.12 (Poisson) prints ``M(1-(t/M+1)) exp(-t/M)``; the truncated mean of the
  exponential is ``M (1 - (t/M + 1) exp(-t/M))``.

>>> r = aware_interval(runtime_h=18.99, ckpt_cost_h=0.5, mtbf_h=24.0, shape=0.8)
>>> round(r.failure_probability, 2)
0.6
>>> round(young_interval(24.0, 0.5), 3), round(daly_interval(24.0, 0.5), 3)
(4.899, 4.571)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import gamma as gamma_fn
from scipy.special import gammainc

__all__ = [
    "AwareResult", "young_interval", "daly_interval", "scale_mtbf", "failure_cdf",
    "truncated_mean", "expected_cost", "aware_interval", "aware_intervals_batch",
    "simulate_cost", "multilevel_interval", "weibull_scale",
]

MINUTE_H = 1.0 / 60.0


def _positive(name: str, value) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return arr


def young_interval(mtbf_h: float, ckpt_cost_h: float) -> float:
    """Young's first-order interval ``sqrt(2 M t_c)`` (compute time between checkpoints).

    >>> young_interval(24.0, 0.5)
    4.898979485566356
    """
    m, c = _positive("mtbf_h", mtbf_h), _positive("ckpt_cost_h", ckpt_cost_h)
    return float(np.sqrt(2.0 * m * c))


def daly_interval(mtbf_h: float, ckpt_cost_h: float) -> float:
    """Daly's (2006) higher-order estimate of the optimal compute time between checkpoints.

    ``sqrt(2 d M) [1 + (1/3) sqrt(d/(2M)) + (1/9) d/(2M)] - d`` for ``d < 2M``, else ``M``.

    >>> round(daly_interval(24.0, 0.5), 4)
    4.5713
    """
    m, d = float(_positive("mtbf_h", mtbf_h)), float(_positive("ckpt_cost_h", ckpt_cost_h))
    if d >= 2.0 * m:
        return m
    x = d / (2.0 * m)
    return float(np.sqrt(2.0 * d * m) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - d)


def scale_mtbf(mtbf_h, nodes, system_nodes):
    """MTBF of a job on ``nodes`` of a machine with ``system_nodes`` (Eq. 3.14).

    ``MTBF_job = MTBF_machine * N_machine / N_job``.

    >>> scale_mtbf(24.0, 100, 1000)
    240.0
    """
    m = _positive("mtbf_h", mtbf_h)
    n, big_n = _positive("nodes", nodes), _positive("system_nodes", system_nodes)
    out = m * big_n / n
    return float(out) if np.ndim(out) == 0 else out


def weibull_scale(mtbf_h, shape):
    """Weibull scale ``lambda_w = M / Gamma(1 + 1/w)`` (Eq. 3.10)."""
    return np.asarray(mtbf_h, dtype=float) / gamma_fn(1.0 + 1.0 / np.asarray(shape, dtype=float))


def failure_cdf(x, mtbf_h, shape=1.0):
    """Probability of a failure before ``x`` hours (Eq. 3.13); ``shape=1`` is Poisson."""
    x = np.maximum(np.asarray(x, dtype=float), 0.0)
    shape = np.asarray(shape, dtype=float)
    return -np.expm1(-np.power(x / weibull_scale(mtbf_h, shape), shape))


def truncated_mean(t, mtbf_h, shape=1.0):
    """First right-truncated moment ``mu^t = int_0^t x p(x) dx`` (Eqs. 3.11–3.12).

    Weibull: ``M * P(1 + 1/w, (t/lambda_w)^w)`` with the regularised lower incomplete gamma
    ``P``; for ``w = 1`` this is the Poisson ``M (1 - (t/M + 1) exp(-t/M))``.
    """
    t = np.maximum(np.asarray(t, dtype=float), 0.0)
    shape = np.asarray(shape, dtype=float)
    z = np.power(t / weibull_scale(mtbf_h, shape), shape)
    return np.asarray(mtbf_h, dtype=float) * gammainc(1.0 + 1.0 / shape, z)


def expected_cost(t_u, runtime_h: float, ckpt_cost_h: float, mtbf_h: float, shape: float = 1.0):
    """Expected checkpoint cost E_C of Eq. 3.8, vectorised over ``t_u = tau + t_c``.

    ``E_C = mu^t - tau * n_f + floor(t/t_u) t_c (1 - P(t))`` with
    ``n_f = sum_{i=1}^{floor(t/t_u)} (P(t) - P(i t_u))`` (Eq. 3.7 clipped at ``t``).
    A ``t_u`` of ``inf`` means no checkpoint (cost ``mu^t``).

    >>> c = expected_cost([1.0, 2.0, np.inf], 10.0, 0.25, 24.0, shape=0.8)
    >>> bool(c[-1] == truncated_mean(10.0, 24.0, 0.8))
    True
    """
    t_u = np.atleast_1d(np.asarray(t_u, dtype=float))
    if np.any(t_u <= ckpt_cost_h):
        raise ValueError("t_u must exceed the checkpoint cost (tau > 0)")
    return _expected_cost_flat(t_u, np.full(t_u.shape, float(runtime_h)), np.full(t_u.shape, float(ckpt_cost_h)),
                               np.full(t_u.shape, float(mtbf_h)), np.full(t_u.shape, float(shape)))


def _expected_cost_flat(t_u, t, t_c, mtbf, shape):
    """Eq. 3.8 for flat arrays of candidates (each with its own job parameters)."""
    finite = np.isfinite(t_u)
    counts = np.where(finite, np.floor(t / np.where(finite, t_u, 1.0)), 0.0).astype(np.int64)
    owner = np.repeat(np.arange(t_u.size), counts)
    # i = 1..count inside each candidate
    starts = np.cumsum(counts) - counts
    i = np.arange(owner.size) - np.repeat(starts, counts) + 1
    p_t = failure_cdf(t, mtbf, shape)
    p_i = failure_cdf(i * t_u[owner], mtbf[owner], shape[owner])
    n_f = np.bincount(owner, weights=p_t[owner] - p_i, minlength=t_u.size)
    tau = np.where(finite, t_u - t_c, 0.0)
    return truncated_mean(t, mtbf, shape) - tau * n_f + counts * t_c * (1.0 - p_t)


def _expected_cost_grid(steps, job, t, t_c, mtbf, shape, resolution_h):
    """Eq. 3.8 for candidates ``t_u = steps * resolution_h`` of many jobs.

    Every failure instant ``i * t_u`` in Eq. 3.7 lies on the job's grid of
    ``resolution_h``, so the CDF is tabulated once per job (one transcendental per grid
    point instead of one per (candidate, i) pair) and the sums are gathers from it.
    """
    n_grid = np.floor(t / resolution_h + 1e-9).astype(np.int64) + 1  # grid points 0..floor(t/res)
    offsets = np.cumsum(n_grid) - n_grid
    gjob = np.repeat(np.arange(t.size), n_grid)
    gx = (np.arange(gjob.size) - offsets[gjob]) * resolution_h
    table = failure_cdf(gx, mtbf[gjob], shape[gjob])
    counts = np.floor(t[job] / (steps * resolution_h) + 1e-12).astype(np.int64)
    # index of P(i t_u) in the table: offset + i * steps, built as a running sum of steps
    # inside each candidate's run (first element offset + steps, then + steps each)
    total = int(counts.sum())
    starts = np.cumsum(counts) - counts
    nonzero = counts > 0
    incr = np.repeat(steps, counts)
    first = starts[nonzero]
    incr[first] = offsets[job[nonzero]] + steps[nonzero] - np.concatenate(
        [[0], (offsets[job] + counts * steps)[nonzero][:-1]])
    idx = np.cumsum(incr)
    sums = np.add.reduceat(table[idx], first) if total else np.zeros(0)
    p_sum = np.zeros(steps.size)
    p_sum[nonzero] = sums
    p_t = failure_cdf(t, mtbf, shape)[job]
    n_f = counts * p_t - p_sum
    tau = steps * resolution_h - t_c[job]
    return truncated_mean(t, mtbf, shape)[job] - tau * n_f + counts * t_c[job] * (1.0 - p_t)


@dataclass(frozen=True)
class AwareResult:
    """Outcome of Algorithm 1 for one job.

    ``interval_h`` is ``tau`` (``nan`` when not checkpointing is cheapest),
    ``expected_cost_h`` the Eq. 3.8 cost at that choice, ``no_checkpoint_cost_h`` the cost
    of never checkpointing (``mu^t``), ``mtbf_h`` the job MTBF after Eq. 3.14 scaling.
    """

    interval_h: float
    expected_cost_h: float
    no_checkpoint: bool
    no_checkpoint_cost_h: float
    failure_probability: float
    mtbf_h: float
    shape: float
    runtime_h: float
    ckpt_cost_h: float
    checkpoints: int

    def to_dict(self) -> dict:
        return asdict(self)


def _job_arrays(runtime_h, ckpt_cost_h, mtbf_h, shape, poisson, nodes, system_nodes):
    t = _positive("runtime_h", runtime_h)
    t_c = _positive("ckpt_cost_h", ckpt_cost_h)
    m = scale_mtbf(mtbf_h, nodes, system_nodes)
    w = 1.0 if poisson or shape is None else shape
    w = _positive("shape", w)
    t, t_c, m, w = np.broadcast_arrays(*(np.atleast_1d(np.asarray(a, dtype=float)) for a in (t, t_c, m, w)))
    return t, t_c, m, w


def aware_intervals_batch(runtime_h, ckpt_cost_h, mtbf_h, shape: float | None = None, poisson: bool = False,
                          nodes=1, system_nodes=1, resolution_h: float = MINUTE_H) -> list[AwareResult]:
    """Algorithm 1 for many jobs at once, all candidate ``t_u`` of all jobs in one numpy pass.

    Candidates are ``t_u in {1, 2, ...} * resolution_h`` with ``t_c < t_u <= t - t_c``,
    plus "no checkpoint". ``shape=None`` (or ``poisson=True``) means Poisson failures.

    >>> rs = aware_intervals_batch([18.99, 1.0], 0.5, 24.0, shape=0.8)
    >>> [r.no_checkpoint for r in rs]
    [False, True]
    """
    t, t_c, m, w = _job_arrays(runtime_h, ckpt_cost_h, mtbf_h, shape, poisson, nodes, system_nodes)
    lo = np.floor(t_c / resolution_h).astype(np.int64) + 1
    hi = np.floor((t - t_c) / resolution_h + 1e-9).astype(np.int64)
    n_cand = np.maximum(hi - lo + 1, 0)
    job = np.repeat(np.arange(t.size), n_cand)
    starts = np.cumsum(n_cand) - n_cand
    steps = np.arange(job.size) - np.repeat(starts, n_cand) + np.repeat(lo, n_cand)
    t_u = steps * resolution_h
    costs = _expected_cost_grid(steps, job, t, t_c, m, w, resolution_h)
    none_cost = truncated_mean(t, m, w)
    results = []
    for j in range(t.size):
        seg = slice(starts[j], starts[j] + n_cand[j])
        best_cost, best_tu = none_cost[j], np.inf
        if n_cand[j] > 0:
            k = int(np.argmin(costs[seg]))
            if costs[seg][k] < none_cost[j]:
                best_cost, best_tu = float(costs[seg][k]), float(t_u[seg][k])
        no_ckpt = not np.isfinite(best_tu)
        results.append(AwareResult(
            interval_h=float("nan") if no_ckpt else best_tu - float(t_c[j]),
            expected_cost_h=float(best_cost), no_checkpoint=no_ckpt,
            no_checkpoint_cost_h=float(none_cost[j]),
            failure_probability=float(failure_cdf(t[j], m[j], w[j])), mtbf_h=float(m[j]), shape=float(w[j]),
            runtime_h=float(t[j]), ckpt_cost_h=float(t_c[j]),
            checkpoints=0 if no_ckpt else int(np.floor(t[j] / best_tu))))
    return results


def aware_interval(runtime_h: float, ckpt_cost_h: float, mtbf_h: float, shape: float | None = None,
                   poisson: bool = False, nodes: int = 1, system_nodes: int = 1,
                   resolution_h: float = MINUTE_H) -> AwareResult:
    """Failure-probability aware interval of one job (seed 000 Algorithm 1 over Eq. 3.8).

    >>> r = aware_interval(18.99, 0.5, 24.0, shape=0.8)  # Fig. 3.4: 60 % failure probability
    >>> round(r.interval_h, 2), r.no_checkpoint
    (4.25, False)
    """
    if np.ndim(runtime_h) or np.ndim(ckpt_cost_h):
        raise ValueError("aware_interval takes one job; use aware_intervals_batch for many")
    return aware_intervals_batch(runtime_h, ckpt_cost_h, mtbf_h, shape, poisson, nodes, system_nodes,
                                 resolution_h)[0]


def simulate_cost(interval_h: float, runtime_h: float, ckpt_cost_h: float, mtbf_h: float,
                  shape: float | None = None, n_runs: int = 10_000, seed: int | None = 0) -> dict:
    """Monte-Carlo average checkpoint cost S-hat of Eq. 3.1 and its standard error.

    ``S = mean_f [ t_c floor(min(t, t_f)/(tau + t_c)) + (t_f mod (tau + t_c) if t_f < t) ]``
    with ``t_f`` drawn from the Weibull (``shape``; ``None`` = Poisson) of MTBF ``mtbf_h``.
    ``interval_h`` of ``nan``/``inf`` means no checkpoints.

    >>> s = simulate_cost(4.0, 18.99, 0.5, 24.0, shape=0.8, n_runs=2000, seed=1)
    >>> sorted(s)
    ['cost_h', 'failure_fraction', 'n_runs', 'stderr_h']
    """
    t, t_c, m = (float(_positive(n, v)) for n, v in (("runtime_h", runtime_h), ("ckpt_cost_h", ckpt_cost_h),
                                                      ("mtbf_h", mtbf_h)))
    w = 1.0 if shape is None else float(_positive("shape", shape))
    if n_runs < 2:
        raise ValueError("n_runs must be >= 2")
    rng = np.random.default_rng(seed)
    t_f = float(weibull_scale(m, w)) * rng.weibull(w, size=n_runs)
    failed = t_f < t
    if interval_h is None or not np.isfinite(interval_h):
        cost = np.where(failed, t_f, 0.0)
    else:
        if interval_h <= 0:
            raise ValueError("interval_h must be > 0")
        t_u = float(interval_h) + t_c
        cost = t_c * np.floor(np.minimum(t, t_f) / t_u) + np.where(failed, np.mod(t_f, t_u), 0.0)
    return {"cost_h": float(cost.mean()), "stderr_h": float(cost.std(ddof=1) / np.sqrt(n_runs)),
            "failure_fraction": float(failed.mean()), "n_runs": int(n_runs)}


def multilevel_interval(mtbf_h: float, bb_cost_h: float, pfs_cost_h: float, sigma: float = 0.0) -> float:
    """Burst-buffer two-level optimal interval of seed 003 Eq. 5.10.

    ``t_opt = sqrt(2 t_bb / (lambda c (1 - sigma)) + 2 t_pfs t_bb)`` where ``lambda c`` is
    the job's failure rate (``1 / mtbf_h`` for the job's MTBF, Eq. 3.14 scaled) and
    ``sigma`` the fraction of failures avoided by live migration (seed 003: about 0.44).

    >>> round(multilevel_interval(24.0, 0.5, 0.0), 4) == round(young_interval(24.0, 0.5), 4)
    True
    """
    m = float(_positive("mtbf_h", mtbf_h))
    bb = float(_positive("bb_cost_h", bb_cost_h))
    pfs = float(pfs_cost_h)
    if not np.isfinite(pfs) or pfs < 0:
        raise ValueError("pfs_cost_h must be finite and >= 0")
    if not 0.0 <= sigma < 1.0:
        raise ValueError("sigma must be in [0, 1)")
    return float(np.sqrt(2.0 * bb * m / (1.0 - sigma) + 2.0 * pfs * bb))
