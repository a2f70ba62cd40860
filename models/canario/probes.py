"""Canary probe jobs and their runtime statistics (seed 004 §4.2, Tab. 4.1).

Five single-node MACSio probes model common IO patterns.  A probe type's expected
runtime is the median runtime of its first ``n_baseline`` (100) completed runs; a run
is performance degraded when its runtime exceeds ``threshold`` (105 %) of that
expectation, and its severity is ``runtime / expected``.

Example
-------
>>> t = ProbeTracker(n_baseline=3)
>>> for r in (100.0, 102.0, 98.0):
...     _ = t.observe("probe-1", r)
>>> t.observe("probe-1", 130.0)["degraded"]
True
>>> t.expected("probe-1")
100.0
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ProbeType:
    """One row of seed 004 Tab. 4.1."""

    name: str
    total_write_gb: float
    files_per_process: int
    expected_runtime_s: float
    description: str
    nodes: int = 1
    processes: int = 36


# Seed 004, Tab. 4.1 (Quartz, LLNL): single node, 36-process MACSio executions.
PROBE_TYPES: tuple[ProbeType, ...] = (
    ProbeType("probe-1", 100.0, 10, 1396.0, "Few, large outputs"),
    ProbeType("probe-2", 100.0, 100, 1023.0, "Many, small outputs"),
    ProbeType("probe-3", 2.0, 100, 519.0, "Many, tiny outputs"),
    ProbeType("probe-4", 100.0, 10, 521.0, "1, w/ Max LSF striping"),
    ProbeType("probe-5", 100.0, 100, 1408.0, "2, w/ Max LSF striping"),
)
PROBE_BY_NAME: dict[str, ProbeType] = {p.name: p for p in PROBE_TYPES}

DEFAULT_THRESHOLD = 1.05  # runtime > 105 % of expected → degraded (§4.2.2)
DEFAULT_BASELINE_RUNS = 100  # expected = median of the first 100 runs (§4.2.2)


class ProbeTracker:
    """Expected runtime per probe type and the degradation ratio of each new run.

    Parameters
    ----------
    n_baseline
        Number of first completed runs whose median defines the expected runtime.
        Until a type has that many runs the median of the runs so far is used and
        ``baseline_complete`` is False.
    threshold
        A run is degraded when ``runtime / expected > threshold``.
    expected
        Optional known expected runtimes (e.g. from a previous deployment); a type
        listed here skips the baseline phase.
    """

    def __init__(self, n_baseline: int = DEFAULT_BASELINE_RUNS, threshold: float = DEFAULT_THRESHOLD,
                 expected: dict[str, float] | None = None) -> None:
        if n_baseline < 1:
            raise ValueError("n_baseline must be >= 1")
        if threshold <= 0:
            raise ValueError("threshold must be > 0")
        self.n_baseline = n_baseline
        self.threshold = threshold
        self._baseline: dict[str, list[float]] = {}
        self._fixed: dict[str, float] = {k: float(v) for k, v in (expected or {}).items()}

    def expected(self, probe_type: str) -> float:
        """Current expected runtime of ``probe_type`` (NaN before its first run)."""
        if probe_type in self._fixed:
            return self._fixed[probe_type]
        runs = self._baseline.get(probe_type)
        return float(np.median(runs)) if runs else float("nan")

    def baseline_complete(self, probe_type: str) -> bool:
        return probe_type in self._fixed or len(self._baseline.get(probe_type, ())) >= self.n_baseline

    def observe(self, probe_type: str, runtime_s: float) -> dict:
        """Record a completed run; return ``expected_s``, ``ratio``, ``degraded``, ``baseline_complete``."""
        runtime_s = float(runtime_s)
        if not np.isfinite(runtime_s) or runtime_s <= 0:
            raise ValueError(f"probe runtime must be a positive number, got {runtime_s!r}")
        if not self.baseline_complete(probe_type):
            self._baseline.setdefault(probe_type, []).append(runtime_s)
            if len(self._baseline[probe_type]) == self.n_baseline:
                self._fixed[probe_type] = float(np.median(self._baseline.pop(probe_type)))
        expected = self.expected(probe_type)
        ratio = runtime_s / expected
        return {"expected_s": expected, "ratio": ratio, "degraded": bool(ratio > self.threshold),
                "baseline_complete": self.baseline_complete(probe_type)}

    def to_state(self) -> dict:
        """JSON-safe state: the baseline runs so far and the fixed expected runtimes."""
        return {"baseline": {k: list(v) for k, v in self._baseline.items()}, "fixed": dict(self._fixed)}

    def load_state(self, state: dict) -> "ProbeTracker":
        self._baseline = {str(k): [float(x) for x in v] for k, v in state["baseline"].items()}
        self._fixed = {str(k): float(v) for k, v in state["fixed"].items()}
        return self


def probe_ratios(probe_type: np.ndarray, runtime_s: np.ndarray, order: np.ndarray,
                 n_baseline: int = DEFAULT_BASELINE_RUNS) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :class:`ProbeTracker` over a completed-run table.

    Parameters
    ----------
    probe_type, runtime_s
        One entry per run.
    order
        Completion order key (e.g. end times); the first ``n_baseline`` runs of each
        type in this order define its expected runtime.

    Returns
    -------
    ``(expected_s, ratio)`` per run, with the final expected runtime of each type
    (the median of its first ``n_baseline`` runs, or of all runs if fewer).
    """
    probe_type = np.asarray(probe_type)
    runtime_s = np.asarray(runtime_s, float)
    rank = np.argsort(np.asarray(order), kind="stable")
    expected = np.full(runtime_s.shape, np.nan)
    for name in np.unique(probe_type):
        idx = rank[probe_type[rank] == name]
        expected[probe_type == name] = np.median(runtime_s[idx[:n_baseline]])
    return expected, runtime_s / expected


def probe_node_hours(runtime_s: np.ndarray, nodes: np.ndarray | int = 1) -> float:
    """Node-hours spent on probe jobs (§4.2.1 overhead, §4.6 cumulative cost)."""
    return float(np.sum(np.asarray(runtime_s, float) * np.asarray(nodes, float)) / 3600.0)
