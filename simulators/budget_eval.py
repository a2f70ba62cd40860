"""The false-alarm budget controller offline (issue 56, item 2): the model's fixed vote
threshold, the controller (:class:`~hpcguard.models.budget.BudgetController` run in event
time by :func:`~hpcguard.models.budget.replay`) and the hindsight-best fixed threshold
that meets the same budget, scored alike on a test history after a burn-in day.

The votes are the worker's online vote on every node and step
(:func:`~hpcguard.models.failure.evaluation.online_vote_scan` over
``FailureEnsemble.series_votes``, equal to ``FailureEnsemble.online_vote`` on each history,
``persistence`` included), as ``hpcguard evaluate failure`` scans them.

Example
-------
>>> import numpy as np
>>> votes = np.full((4, 400), 0.01)
>>> votes[1, 300:304] = 0.99                  # node 1 warns, then fails
>>> votes[2, 100:102] = 0.96                  # a false alarm
>>> rows = budget_rows(votes, 60.0 * np.arange(1, 401), [1], [60.0 * 306], t0=0.0, fixed_threshold=0.95,
...                    budget=2.0, burn_in_s=0.0, step_s=60.0)
>>> [(r["name"], r["warned_2min"], r["false_alarm_episodes"]) for r in rows]
[('fixed', 1, 1), ('controller', 1, 1), ('hindsight-best', 1, 0)]
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from hpcguard.models.budget import BudgetController, replay
from hpcguard.models.metrics import ratio
from hpcguard.models.warning_eval import score_warnings

BURN_IN_S = 86400.0


def score(warn: np.ndarray, window_end_time: np.ndarray, failure_nodes, failure_times, t0: float,
          burn_in_s: float = BURN_IN_S, horizon_s: float = 900.0, gap_s: float = 600.0,
          min_lead_s: float = 120.0) -> dict[str, Any]:
    """Failures after the burn-in warned ``min_lead_s`` ahead (any warning counts) and false-alarm
    episodes starting after it (:func:`~hpcguard.models.warning_eval.score_warnings`'s rules), per
    100 node-days of the nodes × time after it."""
    times = np.asarray(window_end_time, float)
    fn, ft = np.asarray(failure_nodes, int), np.asarray(failure_times, float)
    start = t0 + burn_in_s
    node_idx, k = np.nonzero(warn)
    wt = times[k]
    late = ft >= start
    lead = np.asarray(score_warnings(node_idx, wt, fn[late], ft[late], horizon_s, gap_s,
                                     per_failure=True)["per_failure_lead_minutes"], float)
    after = wt >= start
    false = score_warnings(node_idx[after], wt[after], fn, ft, horizon_s, gap_s)["false_alarms"]
    span = max(float(times[-1]) - max(start, t0), 0.0) if times.size else 0.0
    node_days = warn.shape[0] * span / 86400.0
    early = int((lead >= min_lead_s / 60.0).sum())
    return {"failures": int(late.sum()), "warned_2min": early, "warned_2min_share": ratio(early, int(late.sum())),
            "false_alarm_episodes": int(false), "node_days": node_days,
            "false_alarms_per_100_node_days": ratio(100.0 * false, node_days)}


def budget_rows(votes: np.ndarray, window_end_time: np.ndarray, failure_nodes, failure_times, t0: float,
                fixed_threshold: float, budget: float = 2.0, burn_in_s: float = BURN_IN_S, step_s: float = 15.0,
                horizon_s: float = 900.0, gap_s: float = 600.0, candidates: int = 48,
                controller: Optional[BudgetController] = None) -> list[dict[str, Any]]:
    """The three rows on one vote scan ``votes (nodes, steps)`` (NaN: not evaluated): ``fixed``,
    ``controller`` (its thresholds' range and final value included) and ``hindsight-best`` (the
    fixed threshold, among the model's and ``candidates`` set on the votes after the burn-in,
    with the most failures warned within the budget; the highest such on ties)."""
    from hpcguard.models.failure.evaluation import curve_thresholds

    v = np.asarray(votes, float)
    times = np.asarray(window_end_time, float)
    kw = dict(t0=t0, burn_in_s=burn_in_s, horizon_s=horizon_s, gap_s=gap_s)

    def at(thr: float) -> dict[str, Any]:
        with np.errstate(invalid="ignore"):
            return score(v >= thr, times, failure_nodes, failure_times, **kw)

    fixed = {"name": "fixed", "threshold": float(fixed_threshold), **at(fixed_threshold)}
    c = controller or BudgetController(budget, step_s=step_s, initial=fixed_threshold)
    run = replay(v, times, failure_nodes, failure_times, c, horizon_s=horizon_s, gap_s=gap_s)
    thr = run["threshold"][times >= t0 + burn_in_s]
    ctrl = {"name": "controller", "threshold": float(run["threshold"][-1]) if times.size else float("nan"),
            "threshold_range": [float(thr.min()), float(thr.max())] if thr.size else None,
            **score(run["warn"], times, failure_nodes, failure_times, **kw)}
    later = v[:, times >= t0 + burn_in_s]
    later = later[~np.isnan(later)]
    grid = curve_thresholds(later, max_fpr=1e-2, points=candidates) if later.size else np.zeros(0)
    best = None
    for t in sorted(set(grid.tolist()) | {float(fixed_threshold)}, reverse=True):
        s = at(t)
        if s["false_alarms_per_100_node_days"] <= budget and (best is None or s["warned_2min"] > best["warned_2min"]):
            best = {"name": "hindsight-best", "threshold": t, **s}
    rows = [fixed, ctrl]
    if best is not None:
        rows.append(best)
    return rows


def evaluate_budget(model: str, data: str, budget: float = 2.0, sensor_map: Optional[str] = None,
                    settings=None, stride: int = 1, burn_in_s: float = BURN_IN_S, votes=None,
                    progress: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    """The three rows of ``model`` on the history ``data`` (``votes``: an
    :func:`~hpcguard.models.failure.evaluation.online_vote_scan` of it already made)."""
    import torch

    from hpcguard.connectors.model_store import load_model
    from hpcguard.models.failure.evaluation import online_vote_scan
    from hpcguard.models.failure.site_training import TrainingError
    from hpcguard.settings import Settings
    from hpcguard.simulators import failure_training as ft

    torch.set_num_threads(1)
    note = progress or (lambda m: None)
    settings = settings or Settings.load()
    ensemble, _ = load_model(model)
    if ensemble.vote != "lstm":
        raise TrainingError("the budget controller sets the LSTM vote's threshold; this model votes unanimously")
    rec = ft.load_recorded(data, ensemble.grid_s, ft.load_mapping(sensor_map, settings), settings)
    if votes is None:
        note("online vote scan")
        votes = online_vote_scan(ensemble.series_votes, rec.values, rec.t0, ensemble.grid_s, ensemble.history_steps,
                                 stride=stride)
    note("budget controller")
    rows = budget_rows(votes["vote"], votes["window_end_time"], rec.failure_nodes, rec.failure_times, rec.t0,
                       ensemble.threshold, budget=budget, burn_in_s=burn_in_s, step_s=ensemble.grid_s * stride)
    return {"model": str(model), "data": str(data), "budget_per_100_node_days": budget,
            "burn_in_hours": burn_in_s / 3600.0, "rows": rows}


def budget_lines(result: dict[str, Any]) -> list[str]:
    """The rows as a markdown table."""
    lines = [f"false-alarm budget {result['budget_per_100_node_days']:g} per 100 node-days, after a "
             f"{result['burn_in_hours']:g} h burn-in:", "",
             "| threshold | value | failures warned >= 2 min | false-alarm episodes / 100 node-days |",
             "|---|---|---|---|"]
    for r in result["rows"]:
        value = f"{r['threshold']:.4g}" + (f" (range {r['threshold_range'][0]:.3g}-{r['threshold_range'][1]:.3g})"
                                          if r.get("threshold_range") else "")
        lines.append(f"| {r['name']} | {value} | {r['warned_2min']}/{r['failures']} "
                     f"({r['warned_2min_share']:.0%}) | {r['false_alarm_episodes']} in {r['node_days']:.1f} = "
                     f"{r['false_alarms_per_100_node_days']:.2f} |")
    return lines



def budget_reports(model: str, data_dirs: Sequence[str], budget: float = 2.0, sensor_map: Optional[str] = None,
                   settings=None, stride: int = 1, result: Optional[dict] = None,
                   progress: Optional[Callable[[str], None]] = None) -> list[dict[str, Any]]:
    """:func:`evaluate_budget` on each history of ``hpcguard evaluate failure``; the vote scans its
    ``result`` kept (several histories) are reused, the others made again."""
    kept = [h.get("online_scan") for h in (result or {}).get("histories", [])]
    out = []
    for i, d in enumerate(data_dirs):
        scan = kept[i] if i < len(kept) and kept[i] is not None else None
        out.append(evaluate_budget(model, d, budget, sensor_map=sensor_map, settings=settings, stride=stride,
                                   votes=scan[1] if scan is not None else None, progress=progress))
    return out
