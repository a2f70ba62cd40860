"""Score node warnings against ground-truth failures.

A failure counts as *warned* when its node had a warning whose sample time lies in
``[failure − horizon, failure)``; its lead time is the failure time minus the first
such warning.  Warning episodes (consecutive warnings of a node less than ``gap_s``
apart) that precede no failure within ``horizon`` are *false alarms*.

Example
-------
>>> import numpy as np
>>> r = score_warnings(np.array(["n1", "n1", "n2"]), np.array([100., 115., 500.]),
...                    np.array(["n1"]), np.array([400.]), horizon_s=900)
>>> (r["warned"], r["missed"], r["false_alarms"], r["lead_minutes"])
(1, 0, 1, [5.0])
"""
from __future__ import annotations

import numpy as np


def warning_episodes(nodes: np.ndarray, times: np.ndarray, gap_s: float = 600.0) -> list[tuple[str, float, float]]:
    """(node, first, last) of each run of warnings no more than ``gap_s`` apart."""
    order = np.lexsort((times, nodes))
    nodes, times = np.asarray(nodes)[order], np.asarray(times, float)[order]
    if len(nodes) == 0:
        return []
    new = np.ones(len(nodes), bool)
    new[1:] = (nodes[1:] != nodes[:-1]) | (np.diff(times) > gap_s)
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(nodes)) - 1
    return [(str(nodes[s]), float(times[s]), float(times[e])) for s, e in zip(starts, ends)]


def resolved_episodes(warn_nodes: np.ndarray, warn_times: np.ndarray, failure_nodes: np.ndarray,
                      failure_times: np.ndarray, horizon_s: float = 900.0,
                      gap_s: float = 600.0) -> list[tuple[str, float, float, bool]]:
    """(node, first, last, false) of each warning episode: ``false`` when no failure of its node
    came after its first warning and within ``horizon_s`` of its last.

    >>> resolved_episodes(np.array(["n1", "n2"]), np.array([100., 500.]), np.array(["n1"]), np.array([400.]))
    [('n1', 100.0, 100.0, False), ('n2', 500.0, 500.0, True)]
    """
    failure_nodes = np.asarray(failure_nodes).astype(str)
    failure_times = np.asarray(failure_times, float)
    out = []
    for node, first, last in warning_episodes(np.asarray(warn_nodes).astype(str), warn_times, gap_s):
        followed = (failure_nodes == node) & (failure_times > first) & (failure_times <= last + horizon_s)
        out.append((node, first, last, not followed.any()))
    return out


def score_warnings(warn_nodes: np.ndarray, warn_times: np.ndarray, failure_nodes: np.ndarray,
                   failure_times: np.ndarray, horizon_s: float = 900.0, gap_s: float = 600.0,
                   per_failure: bool = False) -> dict:
    """Warned/missed failures, false-alarm episodes and lead times (minutes).

    ``per_failure=True`` adds ``per_failure_lead_minutes`` aligned with the failures
    (NaN where a failure was not warned)."""
    warn_nodes = np.asarray(warn_nodes).astype(str)
    warn_times = np.asarray(warn_times, float)
    failure_nodes = np.asarray(failure_nodes).astype(str)
    failure_times = np.asarray(failure_times, float)
    leads: list[float] = []
    each: list[float] = []
    for node, t in zip(failure_nodes, failure_times):
        hit = warn_times[(warn_nodes == node) & (warn_times >= t - horizon_s) & (warn_times < t)]
        each.append(round(float(t - hit.min()) / 60.0, 2) if hit.size else float("nan"))
        if hit.size:
            leads.append(each[-1])
    false_alarms = sum(1 for *_, false in resolved_episodes(warn_nodes, warn_times, failure_nodes, failure_times,
                                                            horizon_s, gap_s) if false)
    out = {"injected": int(len(failure_times)), "warned": len(leads), "missed": int(len(failure_times) - len(leads)),
           "false_alarms": false_alarms, "lead_minutes": leads}
    if per_failure:
        out["per_failure_lead_minutes"] = each
    return out
