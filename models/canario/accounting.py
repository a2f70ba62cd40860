"""Node-hour accounting of IO-aware replacement (seed 004 §4.6, Fig. 4.15).

Replacing a running job ``j`` by a waiting job ``r`` during detected degradation:

1. **gain** — ``j`` truly IO-sensitive: the node-hours it would have wasted from the
   replacement on (slowdown loss ``nodes × ∫ (1 − 1/((1−f) + f·s(t))) dt``) are
   recovered because the IO-resistant ``r`` uses those nodes productively;
2. **false-positive cost** — ``j`` truly IO-resistant: its used node-hours are lost
   (removed prematurely);
3. **false-negative cost** — ``r`` truly IO-sensitive: the node-hours ``r`` wastes
   while running into the degradation.

Recovered node-hours = #1 − (#2 + #3).  The probes' cost is their node-hours.

Example
-------
>>> import numpy as np
>>> w = SlowdownWaste(np.full(7200, 2.0))       # PFS twice as slow for 2 h
>>> round(float(w.node_hours(np.array([0]), np.array([3600]), np.array([1.0]), np.array([4]))[0]), 2)
2.0
"""
from __future__ import annotations

import numpy as np


class SlowdownWaste:
    """Node-hours lost to the slowdown ``s`` (1 s grid) by a job with IO fraction ``f``."""

    def __init__(self, slowdown: np.ndarray) -> None:
        self.slowdown = np.asarray(slowdown, float)
        self._cum: dict[float, np.ndarray] = {}

    def _cumulative(self, f: float) -> np.ndarray:
        if f not in self._cum:
            lost = 1.0 - 1.0 / ((1.0 - f) + f * self.slowdown)
            self._cum[f] = np.concatenate([[0.0], np.cumsum(lost)])
        return self._cum[f]

    def node_hours(self, t0: np.ndarray, t1: np.ndarray, io_fraction: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """Waste between offsets ``t0`` and ``t1`` (seconds from the grid start), per job."""
        n = self.slowdown.size
        a = np.clip(np.asarray(t0, float), 0, n).astype(int)
        b = np.clip(np.asarray(t1, float), 0, n).astype(int)
        f = np.round(np.asarray(io_fraction, float), 3)
        out = np.zeros(a.shape)
        for level in np.unique(f):
            m = f == level
            c = self._cumulative(float(level))
            out[m] = c[np.maximum(b[m], a[m])] - c[a[m]]
        return out * np.asarray(nodes, float) / 3600.0


def replacement_node_hours(waste: SlowdownWaste, t: np.ndarray, job_start: np.ndarray, job_end: np.ndarray,
                           job_f: np.ndarray, job_nodes: np.ndarray, job_sensitive: np.ndarray,
                           repl_runtime: np.ndarray, repl_f: np.ndarray, repl_nodes: np.ndarray,
                           repl_sensitive: np.ndarray) -> dict[str, np.ndarray]:
    """Per replacement: ``gain`` (#1), ``false_positive`` (#2), ``false_negative`` (#3), ``recovered``.

    Times are offsets on the waste grid; ``*_sensitive`` is the ground truth.
    """
    job_sensitive = np.asarray(job_sensitive, bool)
    repl_sensitive = np.asarray(repl_sensitive, bool)
    t = np.asarray(t, float)
    gain = np.where(job_sensitive, waste.node_hours(t, job_end, job_f, job_nodes), 0.0)
    fp = np.where(~job_sensitive, np.asarray(job_nodes, float) * (t - np.asarray(job_start, float)) / 3600.0, 0.0)
    fn = np.where(repl_sensitive, waste.node_hours(t, t + np.asarray(repl_runtime, float), repl_f, repl_nodes), 0.0)
    return {"gain": gain, "false_positive": fp, "false_negative": fn, "recovered": gain - (fp + fn)}


def cumulative_probe_cost(times: np.ndarray, probe_end: np.ndarray, probe_runtime_s: np.ndarray,
                          probe_nodes: np.ndarray | int = 1) -> np.ndarray:
    """Cumulative probe node-hours at each of ``times`` (completed probes), for Fig. 4.15."""
    order = np.argsort(probe_end)
    cost = np.cumsum((np.asarray(probe_runtime_s, float) * np.broadcast_to(np.asarray(probe_nodes, float),
                                                                             np.shape(probe_runtime_s)))[order]) / 3600
    idx = np.searchsorted(np.asarray(probe_end, float)[order], times, side="right")
    return np.where(idx > 0, cost[np.maximum(idx - 1, 0)], 0.0)
