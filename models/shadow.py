"""Shadow mode's scoring: what a worker that applies nothing would have done, against the failures
that came.

:func:`shadow_summary` takes the records a shadow worker published (predictions, actions, acks) and
the site's failure labels, and says what an operator decides on before letting hpcguard act:

* **node-days observed**: each node's predicted steps × the grid step (a step the stream never
  judged is not observed);
* **warning episodes** and **false-alarm episodes** per 100 node-days, with an exact 95 % Poisson
  interval, against the site's budget; :func:`~hpcguard.models.warning_eval.score_warnings` resolves
  each episode (true: a failure of its node followed within ``horizon_s``);
* **recall**: failures warned at least ``min_lead_s`` ahead / failures, with a Wilson 95 % interval;
  a failure counts when its node was observed and it came between the node's first judged step and
  its last one + ``horizon_s`` (labels of a longer history outside the shadow run are left out and
  counted);
* the would-be actions by kind and the acks by status (a shadow run's are ``would_apply`` only);
* ``by_day``: the same per day of event time since the run's first step, with the running rate
  (cumulative, with its interval) and the vote thresholds the predictions were judged with
  (``detail.budget.threshold``, the budget controller's): whether the promise held from the first
  day or only once the controller had learnt the site.

Example
-------
>>> preds = [{"node": "n1", "time": 60.0 * k, "warn": 5 <= k <= 7} for k in range(20)]
>>> preds += [{"node": "n2", "time": 60.0 * k, "warn": k == 12} for k in range(20)]
>>> s = shadow_summary(preds, [], [], [{"node": "n1", "time": 600.0}], grid_s=60.0, budget=2.0)
>>> s["warning_episodes"], s["false_alarm_episodes"], s["failures"], s["warned_2min"], s["recall"]
(2, 1, 1, 1, 1.0)
>>> round(s["node_days"], 4), round(s["false_alarms_per_100_node_days"], 1), s["within_budget"]
(0.0278, 3600.0, False)
>>> [(d["day"], d["false_alarm_episodes"], d["failures"], d["warned_2min"]) for d in s["by_day"]]
[(0, 1, 1, 1)]
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping

import numpy as np

from hpcguard.models.metrics import poisson_interval, ratio, wilson_interval
from hpcguard.models.warning_eval import resolved_episodes, score_warnings, warning_episodes

__all__ = ["shadow_summary", "observed_failures", "daily_figures"]
DAY_S = 86400.0


def _when(p: Mapping[str, Any]) -> float:
    """A prediction's event time: its newest input sample's time (the step's end), else ``time``."""
    t = p.get("sample_time")
    return float(p["time"] if t is None else t)


def observed_failures(failures: Iterable[Mapping[str, Any]], spans: Mapping[str, tuple[float, float]],
                      horizon_s: float) -> tuple[list[dict], list[dict]]:
    """``failures`` split into those the run observed (node judged, time within its first step and its
    last + ``horizon_s``) and the others.

    >>> observed_failures([{"node": "n1", "time": 50.0}, {"node": "n9", "time": 50.0}], {"n1": (0.0, 40.0)}, 60.0)
    ([{'node': 'n1', 'time': 50.0}], [{'node': 'n9', 'time': 50.0}])
    """
    inside, outside = [], []
    for f in failures:
        span = spans.get(str(f["node"]))
        ok = span is not None and span[0] <= float(f["time"]) <= span[1] + horizon_s
        (inside if ok else outside).append(dict(f))
    return inside, outside


def shadow_summary(predictions: Iterable[Mapping[str, Any]], actions: Iterable[Mapping[str, Any]],
                   acks: Iterable[Mapping[str, Any]], failures: Iterable[Mapping[str, Any]], *,
                   grid_s: float = 15.0, budget: float = 2.0, horizon_s: float = 900.0, gap_s: float = 600.0,
                   min_lead_s: float = 120.0, hourly: bool = False) -> dict[str, Any]:
    """The shadow run's figures (see the module docstring).

    ``predictions``: ``node``, ``time`` (or ``sample_time``), ``warn``; ``failures``: ``node``,
    ``time``; ``budget``: false-alarm episodes per 100 node-days.  ``within_budget`` compares the
    measured rate; ``budget_verdict`` says ``within``/``over`` when the 95 % interval lies wholly on
    one side of the budget, else ``undecided`` (too few node-days to tell).  ``hourly`` adds
    ``by_hour``, :func:`daily_figures` per hour (for a plot).
    """
    steps: dict[str, set[float]] = {}
    warn_nodes, warn_times, thresholds = [], [], []
    for p in predictions:
        node, t = str(p["node"]), _when(p)
        steps.setdefault(node, set()).add(t)
        if p.get("warn"):
            warn_nodes.append(node)
            warn_times.append(t)
        budget_detail = (p.get("detail") or {}).get("budget") if isinstance(p.get("detail"), Mapping) else None
        if isinstance(budget_detail, Mapping) and isinstance(budget_detail.get("threshold"), (int, float)):
            thresholds.append((t, float(budget_detail["threshold"])))
    spans = {n: (min(ts), max(ts)) for n, ts in steps.items()}
    node_days = sum(len(ts) for ts in steps.values()) * float(grid_s) / 86400.0
    inside, outside = observed_failures(failures, spans, horizon_s)
    wn, wt = np.array(warn_nodes, dtype=str), np.array(warn_times, float)
    scores = score_warnings(wn, wt, np.array([str(f["node"]) for f in inside], dtype=str),
                            np.array([float(f["time"]) for f in inside], float), horizon_s, gap_s, per_failure=True)
    lead = np.asarray(scores["per_failure_lead_minutes"], float)
    early = int((lead >= min_lead_s / 60.0).sum())           # NaN (not warned) compares False
    rate = ratio(100.0 * scores["false_alarms"], node_days)
    low, high = poisson_interval(scores["false_alarms"], node_days / 100.0)
    verdict = "undecided" if not node_days else "within" if high <= budget else "over" if low > budget else "undecided"
    episodes = resolved_episodes(wn, wt, [str(f["node"]) for f in inside], [float(f["time"]) for f in inside],
                                 horizon_s, gap_s)
    periods = {"by_day": DAY_S, **({"by_hour": 3600.0} if hourly else {})}
    by_period = {name: daily_figures(steps, [e[1] for e in episodes if e[3]], [float(f["time"]) for f in inside],
                                     lead, thresholds, grid_s=grid_s, min_lead_s=min_lead_s, period_s=period_s)
                 for name, period_s in periods.items()}
    actions = list(actions)
    acks = list(acks)
    statuses = Counter(str(a.get("status")) for a in acks)
    kinds = Counter(str(a.get("kind")) for a in actions)
    return {
        "nodes": len(steps), "predictions": int(sum(len(ts) for ts in steps.values())), "node_days": node_days,
        "start": min((s[0] for s in spans.values()), default=None),
        "end": max((s[1] for s in spans.values()), default=None),
        "warnings": len(warn_nodes), "warning_episodes": len(warning_episodes(wn, wt, gap_s)),
        "false_alarm_episodes": int(scores["false_alarms"]), "false_alarms_per_100_node_days": rate,
        "false_alarms_per_100_node_days_ci95": [low, high], "budget": float(budget),
        "within_budget": bool(node_days) and rate <= budget, "budget_verdict": verdict,
        "failures": len(inside), "failures_outside_run": len(outside), "warned": int(scores["warned"]),
        "warned_2min": early, "recall": ratio(early, len(inside)),
        "recall_ci95": list(wilson_interval(early, len(inside))),
        "lead_minutes": sorted(float(x) for x in lead[~np.isnan(lead)]),
        # each observed failure with its lead (None: not warned), as labelled
        "failure_rows": [{**f, "lead_minutes": None if np.isnan(x) else float(x)} for f, x in zip(inside, lead)],
        **by_period,
        "actions": {"total": len(actions), "by_kind": dict(sorted(kinds.items()))},
        "acks": dict(sorted(statuses.items())), "applied": int(statuses.get("applied", 0)),
        "params": {"grid_s": float(grid_s), "horizon_s": float(horizon_s), "gap_s": float(gap_s),
                   "min_lead_s": float(min_lead_s)},
    }


def daily_figures(steps: Mapping[str, Iterable[float]], false_alarm_starts: Iterable[float],
                  failure_times: Iterable[float], lead_minutes: Iterable[float],
                  thresholds: Iterable[tuple[float, float]] = (), *, grid_s: float = 15.0,
                  min_lead_s: float = 120.0, period_s: float = DAY_S) -> list[dict[str, Any]]:
    """Per day (``period_s``) of event time since the first judged step: node-days, false-alarm episodes (by their first
    warning), their rate and the running rate to that day's end (exact 95 % Poisson interval), failures and
    those warned ``min_lead_s`` ahead (``lead_minutes`` aligned with ``failure_times``, NaN: not warned),
    and the ``(time, threshold)`` pairs' min / median / max (None without any).

    >>> days = daily_figures({"n1": [0.0, 86400.0, 90000.0]}, [100.0], [90000.0], [5.0], grid_s=43200.0)
    >>> [(d["day"], d["node_days"], d["false_alarm_episodes"], d["warned_2min"]) for d in days]
    [(0, 0.5, 1, 0), (1, 1.0, 0, 1)]
    >>> days[1]["cumulative_false_alarms_per_100_node_days"]
    66.66666666666667
    """
    times = np.concatenate([np.fromiter(ts, float) for ts in steps.values()]) if steps else np.zeros(0)
    if not times.size:
        return []
    start = float(times.min())
    false_starts = np.asarray(list(false_alarm_starts), float)
    ftimes, lead = np.asarray(list(failure_times), float), np.asarray(list(lead_minutes), float)
    thr = np.asarray(list(thresholds), float).reshape(-1, 2)

    def day_of(t: np.ndarray) -> np.ndarray:
        return np.floor((t - start) / period_s).astype(int)

    n_days = int(day_of(times).max()) + 1

    def per_day(t: np.ndarray) -> np.ndarray:  # events before the first step or after the last count at the ends
        return np.bincount(np.clip(day_of(t), 0, n_days - 1), minlength=n_days)

    node_days = per_day(times) * float(grid_s) / DAY_S
    false, failures = per_day(false_starts), per_day(ftimes)
    early = per_day(ftimes[lead >= min_lead_s / 60.0])  # NaN (not warned) compares False
    thr_day = day_of(thr[:, 0])
    out = []
    for k in range(n_days):
        cum_false, cum_days = int(false[:k + 1].sum()), float(node_days[:k + 1].sum())
        low, high = poisson_interval(cum_false, cum_days / 100.0)
        own = thr[thr_day == k, 1]
        out.append({"day": k, "start": start + k * period_s, "node_days": float(node_days[k]),
                    "false_alarm_episodes": int(false[k]),
                    "false_alarms_per_100_node_days": ratio(100.0 * false[k], node_days[k]),
                    "cumulative_false_alarms_per_100_node_days": ratio(100.0 * cum_false, cum_days),
                    "cumulative_ci95": [low, high], "failures": int(failures[k]), "warned_2min": int(early[k]),
                    "threshold": None if not own.size else {"min": float(own.min()), "median": float(np.median(own)),
                                                             "max": float(own.max())}})
    return out
