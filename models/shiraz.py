"""Shiraz and Shiraz+ (seed 002, Garg, Patel, Cooperman, Tiwari): switch between a light-
and a heavy-checkpointing application between two failures.

Failures between two instants follow the Weibull hazard (Eq. 2); the total count is
Eq. 3. Baseline (switch at every failure, each application gets ``T_total/2``): useful
work, checkpoint I/O and lost work of Eqs. 4–9. Shiraz runs the light application for its
first ``k`` checkpoint segments after each failure and the heavy one afterwards
(Eqs. 10–15). The fair switch point ``k`` equalises both applications' gains in useful
work subject to neither losing (Eq. 16); the *region* is every ``k`` where neither loses.
Shiraz+ stretches the heavy application's interval by integer factors.

Modelling choices (where the printed equations leave room):

* OCI is Eq. 1 as printed, ``sqrt(2 M delta) - delta``; segments are ``OCI + delta``.
* The light application's sums (Eqs. 10, 12) include the segments completed by the
  periods that survive past ``k`` segments (``k * OCI * Fail(k s, inf)``): when no
  failure comes before the switch the light application has done ``k`` segments.
* The heavy application's segments start ``k (OCI_LW + delta_LW)`` after the failure;
  a failure in its ``j``-th segment leaves ``j - 1`` completed.

With these, Tab. 2's exascale switch points (6, 13, 26, 81) are reproduced exactly.

>>> r = shiraz(mtbf_h=5.0, heavy_cost_h=0.5, light_cost_h=0.005)  # Tab. 2, exascale, 100x
>>> r.k, r.region
(26, (25, 27))
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.special import gamma as gamma_fn

__all__ = ["ShirazResult", "shiraz", "oci", "failure_count"]


def oci(mtbf_h: float, cost_h: float) -> float:
    """Optimal checkpoint interval of Eq. 1: ``sqrt(2 M delta) - delta``."""
    return float(np.sqrt(2.0 * mtbf_h * cost_h) - cost_h)


def failure_count(t_start, t_end, mtbf_h: float, shape: float, total_h: float):
    """Expected number of failure intervals ending in ``[t_start, t_end)`` after a failure
    during ``total_h`` hours (Eq. 2; ``t_end = inf`` allowed; Eq. 3 is ``(0, total_h)``)."""
    lam = mtbf_h / gamma_fn(1.0 + 1.0 / shape)
    surv = lambda t: np.exp(-np.power(np.asarray(t, dtype=float) / lam, shape))  # noqa: E731
    return total_h / mtbf_h * (surv(t_start) - surv(t_end))


@dataclass(frozen=True)
class ShirazResult:
    """Fair switch point ``k`` (``None`` when no ``k`` lets both applications gain: the
    paper's ``k = inf``), the region ``(k_min, k_max)`` of Eq. 16, gains in useful work
    (hours) of both applications at ``k``, ``k_balanced`` (closest to equal gains without
    the no-loss constraint), baseline and Shiraz components, and Shiraz+ for each stretch
    factor of the heavy application's interval."""

    k: int | None
    region: tuple | None
    gain_light_h: float
    gain_heavy_h: float
    k_balanced: int
    switch_after_h: float | None
    oci_light_h: float
    oci_heavy_h: float
    baseline: dict
    shiraz: dict
    shiraz_plus: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _segment_sums(offset, seg, interval, cost, counts_kw):
    """Useful work and I/O of an application whose segments of length ``seg`` start at
    ``offset`` (broadcast over offsets) and run until the next failure:
    ``sum_j j Fail(o + j s, o + (j+1) s) = (T/M) sum_{j>=1} S(o + j s)`` (by parts)."""
    j = np.arange(1, counts_kw["n_seg"] + 1)
    ends = np.asarray(offset, dtype=float)[..., None] + j * seg
    done = failure_count(ends, np.inf, counts_kw["mtbf_h"], counts_kw["shape"], counts_kw["total_h"]).sum(axis=-1)
    return interval * done, cost * done


def shiraz(mtbf_h: float, heavy_cost_h: float, light_cost_h: float, shape: float = 0.6, total_h: float = 1000.0,
           lost_fraction: float = 0.45, stretch_factors=(2, 3, 4), max_k: int | None = None) -> ShirazResult:
    """Shiraz model of seed 002 §3 for one light/heavy pair (hours throughout).

    Raises
    ------
    ValueError
        Non-positive inputs, a light cost not below the heavy cost, or an OCI <= 0
        (checkpoint cost too large for the MTBF).
    """
    for name, v in (("mtbf_h", mtbf_h), ("heavy_cost_h", heavy_cost_h), ("light_cost_h", light_cost_h),
                    ("shape", shape), ("total_h", total_h)):
        if not (np.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be finite and > 0, got {v!r}")
    if not light_cost_h < heavy_cost_h:
        raise ValueError("light_cost_h must be smaller than heavy_cost_h")
    if not 0 <= lost_fraction <= 1:
        raise ValueError("lost_fraction must be in [0, 1]")
    o_l, o_h = oci(mtbf_h, light_cost_h), oci(mtbf_h, heavy_cost_h)
    if o_l <= 0 or o_h <= 0:
        raise ValueError("checkpoint cost too large for this MTBF (OCI <= 0)")
    s_l, s_h = o_l + light_cost_h, o_h + heavy_cost_h
    lam = mtbf_h / gamma_fn(1.0 + 1.0 / shape)
    horizon = lam * (30.0 ** (1.0 / shape))  # survival exp(-30): negligible
    n_l, n_h = int(np.ceil(horizon / s_l)) + 1, int(np.ceil(horizon / s_h)) + 1
    kw = {"mtbf_h": mtbf_h, "shape": shape}
    half = {**kw, "total_h": total_h / 2.0, "n_seg": max(n_l, n_h)}
    full = {**kw, "total_h": total_h}

    # Baseline (Eqs. 4–9): each application gets T_total/2, switched at every failure
    base_l_useful, base_l_io = _segment_sums(0.0, s_l, o_l, light_cost_h, {**half, "n_seg": n_l})
    base_h_useful, base_h_io = _segment_sums(0.0, s_h, o_h, heavy_cost_h, {**half, "n_seg": n_h})
    fail_half = failure_count(0.0, total_h, mtbf_h, shape, total_h / 2.0)
    baseline = {"useful_light_h": float(base_l_useful), "useful_heavy_h": float(base_h_useful),
                "io_light_h": float(base_l_io), "io_heavy_h": float(base_h_io),
                "lost_light_h": lost_fraction * s_l * float(fail_half),
                "lost_heavy_h": lost_fraction * s_h * float(fail_half)}

    # Shiraz (Eqs. 10–15) for every k at once
    # switch points later than 10 MTBF cannot balance the gains (the heavy application
    # would hardly run); ``max_k`` overrides
    k_max = int(max_k) if max_k else min(n_l, int(np.ceil(10.0 * mtbf_h / s_l)))
    ks = np.arange(1, k_max + 1)
    i = np.arange(1, k_max + 1)
    per_seg = failure_count(i * s_l, (i + 1) * s_l, mtbf_h, shape, total_h)
    done_before = np.concatenate([[0.0], np.cumsum(i * per_seg)])[ks - 1]  # sum_{i<k} i Fail_{i,i+1}
    survive = failure_count(ks * s_l, np.inf, mtbf_h, shape, total_h)
    done_l = done_before + ks * survive
    useful_l, io_l = o_l * done_l, light_cost_h * done_l

    def heavy(stretch: float, offsets):
        seg = stretch * o_h + heavy_cost_h
        n_seg = int(np.ceil(horizon / seg)) + 1
        return _segment_sums(offsets, seg, stretch * o_h, heavy_cost_h, {**full, "n_seg": n_seg})

    useful_h, io_h = heavy(1.0, ks * s_l)
    gain_l, gain_h = useful_l - base_l_useful, useful_h - base_h_useful
    ok = (gain_l >= 0) & (gain_h >= 0)
    balance = np.abs(gain_l - gain_h)
    k_bal = int(ks[np.argmin(balance)])
    if ok.any():
        idx = np.flatnonzero(ok)
        best = int(idx[np.argmin(balance[idx])])
        k, region = int(ks[best]), (int(ks[idx].min()), int(ks[idx].max()))
    else:
        best, k, region = k_bal - 1, None, None
    fail_l = failure_count(0.0, ks[best] * s_l, mtbf_h, shape, total_h)
    fail_h = failure_count(ks[best] * s_l, np.inf, mtbf_h, shape, total_h)
    shz = {"useful_light_h": float(useful_l[best]), "useful_heavy_h": float(useful_h[best]),
           "io_light_h": float(io_l[best]), "io_heavy_h": float(io_h[best]),
           "lost_light_h": lost_fraction * s_l * float(fail_l), "lost_heavy_h": lost_fraction * s_h * float(fail_h)}
    plus = []
    for factor in stretch_factors:
        if factor < 1:
            raise ValueError("stretch factors must be >= 1")
        u, io = heavy(float(factor), np.array([ks[best] * s_l]))
        plus.append({"stretch": float(factor), "useful_heavy_h": float(u[0]), "io_heavy_h": float(io[0]),
                     "gain_heavy_h": float(u[0] - base_h_useful),
                     "io_reduction": float(1.0 - (io[0] + io_l[best]) / (base_l_io + base_h_io))})
    return ShirazResult(k, region, float(gain_l[best]), float(gain_h[best]), k_bal,
                        None if k is None else float(k * s_l), o_l, o_h, baseline, shz, plus)
