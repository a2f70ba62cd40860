"""Metrics of a cluster simulation: FARS's six (§5.3), node-hour accounting, Kiviat K-value.

FARS §5.3: average response time ``Σ(c_i − a_i)/J``; utilization
``Σ(c_i − s_i) n_i / (N T)``; throughput (completed jobs per hour); service-unit loss
(node-hours wasted by failures: lost work and restarts); job failure rate (failed jobs /
jobs submitted); failure slowdown (time delay caused by failures over the failure-free
execution time, averaged over all jobs, execution time floored at 10 s).
Plus makespan and useful / checkpoint / lost node-hours.

Fig. 3: the 6-D Kiviat graph plots Resp, 1 − Util, MTBC = 1/Thru, SUL, JFR and FSD on
six axes, each scaled by the largest value observed across the compared methods; the
K-value is the polygon's area and the relative gain of B over A is
``(K(A) − K(B)) / K(A)``.

Example
-------
>>> kiviat_k([1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]) == kiviat_k([2, 2, 2, 2, 2, 2], [2] * 6)
True
>>> round(kiviat_k([1] * 6, [1] * 6), 4)     # regular hexagon of radius 1
2.5981
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from hpcguard.simulators.cluster import SimResult

KIVIAT_AXES = ("avg_response_time_s", "nonutilization", "mtbc_h", "service_unit_loss_node_h",
               "job_failure_rate", "failure_slowdown")
FSD_FLOOR_S = 10.0


def cluster_metrics(res: SimResult) -> dict:
    """FARS's six metrics and node-hour totals of one run (snake_case keys)."""
    done = np.isfinite(res.completion)
    J = res.submit.size
    t0 = float(res.submit.min())
    t_end = float(np.nanmax(res.completion)) if done.any() else t0
    T = max(t_end - t0, 1e-9)
    resp = float(np.mean(res.completion[done] - res.submit[done])) if done.any() else float("nan")
    util = float(np.sum((res.completion[done] - res.first_start[done]) * res.size[done]) / (res.nodes * T))
    thru = float(done.sum() / (T / 3600.0))
    tot = res.totals
    sul = (tot.get("lost", 0.0) + tot.get("restart", 0.0)) / 3600.0
    fsd = float(np.sum(res.fail_delay / np.maximum(res.runtime, FSD_FLOOR_S)) / J)
    ckpt = (tot.get("checkpoint", 0.0)) / 3600.0
    migr = (tot.get("migration", 0.0) + tot.get("fars_overhead", 0.0)) / 3600.0
    return {
        "avg_response_time_s": resp,
        "utilization": util,
        "throughput_jobs_per_h": thru,
        "service_unit_loss_node_h": sul,
        "job_failure_rate": float((res.failed > 0).sum() / J),
        "failure_slowdown": fsd,
        "makespan_h": T / 3600.0,
        "useful_node_h": tot.get("useful", 0.0) / 3600.0,
        "checkpoint_node_h": ckpt,
        "lost_node_h": tot.get("lost", 0.0) / 3600.0,
        "restart_node_h": tot.get("restart", 0.0) / 3600.0,
        "migration_node_h": migr,
        "fault_tolerance_overhead_node_h": ckpt + sul + migr,
        "io_slowdown_node_h": tot.get("io_slowdown", 0.0) / 3600.0,
        "jobs": int(J),
        "completed_jobs": int(done.sum()),
        "failed_jobs": int((res.failed > 0).sum()),
        "failures": int(tot.get("failures", 0)),
        "failures_on_jobs": int(tot.get("failures_on_jobs", 0)),
    }


def node_hours_saved(metrics: Mapping[str, float], baseline: Mapping[str, float]) -> float:
    """Fault-tolerance node-hours (checkpoint + loss + restart + migration) saved against ``baseline``."""
    return float(baseline["fault_tolerance_overhead_node_h"] - metrics["fault_tolerance_overhead_node_h"])


def kiviat_axes(metrics: Mapping[str, float]) -> list[float]:
    """The six Kiviat axis values of FARS Fig. 3 (1 − Util and MTBC = 1/Thru)."""
    thru = metrics["throughput_jobs_per_h"]
    return [metrics["avg_response_time_s"], 1.0 - metrics["utilization"],
            (1.0 / thru) if thru > 0 else float("inf"), metrics["service_unit_loss_node_h"],
            metrics["job_failure_rate"], metrics["failure_slowdown"]]


def kiviat_k(values: Sequence[float], maxima: Sequence[float]) -> float:
    """Area of the Kiviat polygon with each axis scaled by its maximum (axes at 60° steps)."""
    v = np.asarray(values, float)
    m = np.asarray(maxima, float)
    r = np.divide(v, m, out=np.zeros_like(v), where=m > 0)
    return float(0.5 * math.sin(2 * math.pi / len(r)) * np.sum(r * np.roll(r, -1)))


def relative_gains(results: Mapping[str, Mapping[str, float]], baseline: str) -> dict[str, dict]:
    """K-values and Kiviat relative gains (FARS Fig. 3) of every method against ``baseline``.

    Returns ``{name: {"k_value", "gain_vs_<baseline>", "node_hours_saved"}}``.
    """
    if baseline not in results:
        raise ValueError(f"baseline {baseline!r} is not among the results {sorted(results)}")
    axes = {name: kiviat_axes(m) for name, m in results.items()}
    maxima = np.max(np.asarray(list(axes.values()), float), axis=0)
    ks = {name: kiviat_k(a, maxima) for name, a in axes.items()}
    kb = ks[baseline]
    return {name: {"k_value": ks[name], f"gain_vs_{baseline}": (kb - ks[name]) / kb if kb > 0 else 0.0,
                   "node_hours_saved": node_hours_saved(results[name], results[baseline])}
            for name in results}
