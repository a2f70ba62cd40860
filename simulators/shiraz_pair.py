"""Discrete-event simulation of a light/heavy application pair between failures (seed 002).

Two applications share a machine for ``total_h`` hours; each checkpoints at its optimal
interval (OCI = Young's ``sqrt(2 M δ)``) and restarts from its last checkpoint after a
failure.  Failures form a renewal process with Weibull inter-arrival times (shape β, mean
``mtbf_h``; seed 002 §4 uses β = 0.6).

* Baseline (Fig. 4): the applications are switched at every failure (alternate gaps).
* Shiraz (Fig. 6): after every failure the light application runs first and yields to the
  heavy one after its ``k``-th checkpoint, i.e. ``k (OCI_L + δ_L)`` after the failure.

:func:`simulate_pair` returns useful work, checkpoint time and lost work per application
averaged over ``replicas`` independent runs; :func:`fair_switch_point` scans ``k`` and
returns the region where neither application loses useful work against the baseline and
the fair ``k`` (equal gains, seed 002 Eq. 16–17), i.e. the "Sim Optimal Switch Point" of
seed 002 Tab. 2.

Example
-------
>>> r = fair_switch_point(mtbf_h=5.0, heavy_cost_h=0.5, light_cost_h=0.5 / 25, shape=0.6, replicas=64, seed=0)
>>> r["region"][0] <= r["k"] <= r["region"][1]
True
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np


def _gaps(rng: np.random.Generator, mtbf_h: float, shape: float, total_h: float, replicas: int) -> np.ndarray:
    """Inter-failure gaps (replicas × G) truncated so each row sums to ``total_h``."""
    scale = mtbf_h / math.gamma(1 + 1 / shape)
    g = int(total_h / mtbf_h * 2 + 50)
    gaps = scale * rng.weibull(shape, size=(replicas, g))
    ends = np.cumsum(gaps, axis=1)
    starts = ends - gaps
    return np.clip(np.minimum(ends, total_h) - starts, 0.0, None)


def _run(gaps: np.ndarray, oci: float, delta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Useful, checkpoint and lost time of an application running for ``gaps`` after a failure."""
    seg = oci + delta
    n = np.floor(gaps / seg)
    return n * oci, n * delta, gaps - n * seg


def simulate_pair(mtbf_h: float, heavy_cost_h: float, light_cost_h: float, shape: float = 0.6,
                  total_h: float = 1000.0, k: Optional[int] = None, replicas: int = 200,
                  seed: int = 0, gaps: Optional[np.ndarray] = None) -> dict:
    """Useful/checkpoint/lost hours per application, baseline (``k=None``) or Shiraz switch point ``k``."""
    if min(mtbf_h, heavy_cost_h, light_cost_h, shape, total_h) <= 0:
        raise ValueError("mtbf, costs, shape and total time must be positive")
    if gaps is None:
        gaps = _gaps(np.random.default_rng(seed), mtbf_h, shape, total_h, replicas)
    oci_l, oci_h = math.sqrt(2 * mtbf_h * light_cost_h), math.sqrt(2 * mtbf_h * heavy_cost_h)
    if k is None:
        light_gap = np.where(np.arange(gaps.shape[1]) % 2 == 0, gaps, 0.0)
        heavy_gap = gaps - light_gap
    else:
        if k < 0:
            raise ValueError("k must be >= 0")
        light_gap = np.minimum(gaps, k * (oci_l + light_cost_h))
        heavy_gap = gaps - light_gap
    ul, cl, ll = _run(light_gap, oci_l, light_cost_h)
    uh, ch, lh = _run(heavy_gap, oci_h, heavy_cost_h)
    mean = lambda a: float(a.sum(axis=1).mean())  # noqa: E731
    return {"light": {"useful_h": mean(ul), "checkpoint_h": mean(cl), "lost_h": mean(ll)},
            "heavy": {"useful_h": mean(uh), "checkpoint_h": mean(ch), "lost_h": mean(lh)},
            "oci_light_h": oci_l, "oci_heavy_h": oci_h}


def fair_switch_point(mtbf_h: float, heavy_cost_h: float, light_cost_h: float, shape: float = 0.6,
                      total_h: float = 1000.0, replicas: int = 200, seed: int = 0,
                      k_max: Optional[int] = None) -> dict:
    """Scan ``k``: the region where both applications gain vs the baseline and the fair ``k``.

    Returns ``k`` (None when no ``k`` helps both), ``region`` ``[k_min, k_max]``, and the
    gains in useful hours of each application and of the system at ``k``.
    """
    gaps = _gaps(np.random.default_rng(seed), mtbf_h, shape, total_h, replicas)
    base = simulate_pair(mtbf_h, heavy_cost_h, light_cost_h, shape, total_h, None, gaps=gaps)
    oci_l = math.sqrt(2 * mtbf_h * light_cost_h)
    k_max = k_max or int(10 * mtbf_h / (oci_l + light_cost_h)) + 1
    ks = np.arange(1, k_max + 1)
    gl, gh = np.empty(ks.size), np.empty(ks.size)
    for i, k in enumerate(ks):
        r = simulate_pair(mtbf_h, heavy_cost_h, light_cost_h, shape, total_h, int(k), gaps=gaps)
        gl[i] = r["light"]["useful_h"] - base["light"]["useful_h"]
        gh[i] = r["heavy"]["useful_h"] - base["heavy"]["useful_h"]
    ok = (gl >= 0) & (gh >= 0)
    if not ok.any():
        return {"k": None, "region": None, "gain_light_h": 0.0, "gain_heavy_h": 0.0, "gain_total_h": 0.0}
    idx = np.flatnonzero(ok)
    best = idx[np.argmin(np.abs(gl[idx] - gh[idx]))]
    return {"k": int(ks[best]), "region": [int(ks[idx.min()]), int(ks[idx.max()])],
            "gain_light_h": float(gl[best]), "gain_heavy_h": float(gh[best]),
            "gain_total_h": float(gl[best] + gh[best])}


def model_switch_point_gains(mtbf_h: float, heavy_cost_h: float, light_cost_h: float, shape: float = 0.6,
                             total_h: float = 1000.0, lost_fraction: float = 0.45, replicas: int = 200,
                             seed: int = 0) -> dict:
    """Simulate the switch point ``k`` chosen by :func:`hpcguard.models.shiraz.shiraz` (the policy's
    implementation) and report the simulated gains of each application against the baseline."""
    from hpcguard.models.shiraz import shiraz

    k = shiraz(mtbf_h, heavy_cost_h, light_cost_h, shape, total_h, lost_fraction).k
    if k is None or not math.isfinite(k):
        return {"k": None, "gain_light_h": 0.0, "gain_heavy_h": 0.0}
    gaps = _gaps(np.random.default_rng(seed), mtbf_h, shape, total_h, replicas)
    base = simulate_pair(mtbf_h, heavy_cost_h, light_cost_h, shape, total_h, None, gaps=gaps)
    r = simulate_pair(mtbf_h, heavy_cost_h, light_cost_h, shape, total_h, int(k), gaps=gaps)
    return {"k": int(k), "gain_light_h": r["light"]["useful_h"] - base["light"]["useful_h"],
            "gain_heavy_h": r["heavy"]["useful_h"] - base["heavy"]["useful_h"]}
