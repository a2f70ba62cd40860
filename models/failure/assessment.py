"""Assessing a trained failure ensemble on a loaded history: the Table-4.1 rows (unanimous
1/2/4/6, LSTM vote, single network, baseline, random forest), the online scan and its
operating curve, the failure families caught and the look-alikes mistaken, the prediction
targets checked; several histories pooled (pure: no files; the report that writes them is
``simulators.failure_report``).

A result is a dict: ``rows``, ``online``, ``at_fpr``, ``by_family``, ``targets`` ... and,
for plots and pooling (never JSON), ``scores`` and, with ``keep_scan``, ``online_scan``
(:func:`without_scans` drops them).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from hpcguard.models.failure.site_training import Recorded, families_seen

GRID_S = 15.0


def baseline_row(train_recs: Sequence[Recorded], rec: Recorded, events, seed: int) -> tuple[dict, Any]:
    """The baseline threshold detector learned on the training data's healthy windows: (row, decisions)."""
    import numpy as np

    from hpcguard.models.baseline import BaselineDetector
    from hpcguard.models.failure.dataset import build_events, event_windows
    from hpcguard.models.failure.evaluation import report_row

    wins = []
    for k, tr in enumerate(train_recs):
        ev = build_events(tr.values, tr.t0, GRID_S, tr.failure_nodes, tr.failure_times, max_ok=4000, seed=seed + k)
        healthy = ev.subset(np.flatnonzero(ev.labels == 0))
        wins.append(event_windows(tr.values, healthy.nodes, healthy.times, tr.t0, GRID_S, lead_minutes=2))
    det = BaselineDetector().learn_many(np.concatenate(wins))
    # the detector's own rule on the history ending 2 min before the event: the window then, preceded by the
    # first persistence − 1 steps of the window that ends persistence − 1 steps earlier
    back = det.persistence - 1
    now = event_windows(rec.values, events.nodes, events.times, rec.t0, GRID_S, lead_minutes=2)
    earlier = event_windows(rec.values, events.nodes, events.times - GRID_S * back, rec.t0, GRID_S, lead_minutes=2)
    warn = det.predict_many(np.concatenate([earlier[:, :back], now], axis=1))
    return report_row(f"baseline-threshold@2min(persistence={det.persistence})", events.labels, warn), warn


def forest_row(train_recs: Sequence[Recorded], rec: Recorded, events, seed: int) -> tuple[dict, Any]:
    """Random forest on the paper's window statistics (window ending 2 min ahead): (row, decisions)."""
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier

    from hpcguard.models.failure.dataset import build_events, event_features, impute, learn_imputation
    from hpcguard.models.failure.evaluation import report_row

    feats, ys = [], []
    for k, tr in enumerate(train_recs):
        ev = build_events(tr.values, tr.t0, GRID_S, tr.failure_nodes, tr.failure_times, leads=(2,), seed=seed + k)
        feats.append(ev.features[:, 0])
        ys.append(ev.labels)
    x, y = np.concatenate(feats), np.concatenate(ys)
    med = learn_imputation(x)
    rf = RandomForestClassifier(n_estimators=200, random_state=seed, n_jobs=1).fit(impute(x, med), y)
    steps = np.round((events.times - rec.t0) / GRID_S).astype(int)
    test = event_features(rec.values, events.nodes, steps, GRID_S, leads=(2,))[:, 0]
    warn = rf.predict_proba(impute(test, med))[:, 1] > 0.5
    return report_row("random-forest@2min", events.labels, warn), warn


def precursor_tpr(rows: list[dict], decisions: dict[str, Any], events, failure_precursor) -> None:
    """Add ``tp_precursor`` (failures with a precursor it caught), ``precursor_failures`` and their
    share ``tpr_precursor`` to each row that has decisions (NaN share for a row without)."""
    import numpy as np

    from hpcguard.models.metrics import ratio

    pos = np.flatnonzero(events.labels == 1)
    pre = failure_precursor
    for r in rows:
        d = decisions.get(r["name"])
        r["tp_precursor"] = int(d[pos][pre].sum()) if d is not None else 0
        r["precursor_failures"] = int(pre.sum())
        r["tpr_precursor"] = ratio(r["tp_precursor"], r["precursor_failures"]) if d is not None else float("nan")


class _Warned:
    """A verdict of :func:`_ensemble_predict`: what ``online_scan`` reads of the worker's."""

    __slots__ = ("warn",)

    def __init__(self, warn: bool):
        self.warn = warn


def _ensemble_predict(ensemble) -> Callable[[list[str], Any], list[_Warned]]:
    """The worker predictor's decision (``ensemble.predict_windows``), for a scan not given the predictor."""
    return lambda nodes, windows: [_Warned(bool(w)) for w in ensemble.predict_windows(windows).warn]


def evaluate_history(ensemble, manifest: dict, rec: Recorded, train_recs: Sequence[Recorded], seed: int = 0,
                     max_ok: int = 50000, online: bool = True, stride: int = 1, forest: bool = True, note=None,
                     at_fpr: Optional[float] = None, keep_scan: bool = False, predict=None,
                     false_alarms: Optional[float] = None) -> dict:
    """Event rows (unanimous, LSTM, single network, baseline, random forest), the online scan, the
    vote and the 2-minute network with their threshold put at ``at_fpr`` of this data's healthy events,
    and the prediction targets checked.  ``scores`` (for plots and pooling; not for JSON) holds the
    events' labels, scores and precursor flags; with ``keep_scan``, ``online_scan`` holds the online
    vote scan as :func:`operating_curve` takes it (to pool several histories' curves).  ``predict``:
    the worker's predictor call (``streams.predictors``) for the online scan of a vote without a
    threshold; default: the ensemble's own decision, which it wraps.  ``false_alarms`` (episodes per
    100 node-days; default the target's, 0: none): ``budget`` holds :func:`budget_report`, the budget
    controller run over the same vote scan in event time beside the fixed and hindsight-best thresholds."""
    import numpy as np

    from hpcguard.models.budget import primed_by
    from hpcguard.models.failure.dataset import build_events, healthy_mask
    from hpcguard.models.failure.evaluation import (PREDICTION_TARGETS, caught_by_family, check_targets,
                                                    false_positive_runs, look_alike_at, online_scan, online_summary,
                                                    online_vote_scan, report_row, warnings_at)

    note = note or (lambda m: None)
    at_fpr = PREDICTION_TARGETS["vote_fpr"] if at_fpr is None else at_fpr
    fs = ensemble.feature_set
    events = build_events(rec.values, rec.t0, ensemble.grid_s, rec.failure_nodes, rec.failure_times, features=fs,
                          max_ok=max_ok, seed=seed + 7)
    if events.labels.sum() == 0 or (events.labels == 0).sum() == 0:
        raise ValueError("need both failures and healthy operation to evaluate")
    # which failures made it into the events (enough history), in order
    pos = np.flatnonzero(events.labels == 1)
    f_step = np.floor((rec.failure_times - rec.t0) / ensemble.grid_s).astype(int)
    lookup = {(int(n), int(k)): i for i, (n, k) in enumerate(zip(rec.failure_nodes, f_step))}
    e_step = np.round((events.times[pos] - rec.t0) / ensemble.grid_s).astype(int)
    which = np.array([lookup[(int(n), int(k))] for n, k in zip(events.nodes[pos], e_step)], int)
    pre_all = rec.precursor if rec.precursor is not None else np.ones(len(rec.failure_times), bool)
    failure_precursor = pre_all[which] if which.size else np.zeros(0, bool)
    note("ensemble rows")
    out = ensemble.predict_batch(events.features)
    decisions = {f"unanimous@{n}": ensemble.unanimous(out.network_probabilities, n) for n in (1, 2, 4, 6)}
    decisions["lstm-vote"] = out.vote_probability >= ensemble.threshold
    i2 = list(ensemble.leads).index(2)
    decisions["single-network@2min"] = out.network_probabilities[:, i2] > ensemble.net_threshold
    rows = [report_row(name, events.labels, d) for name, d in decisions.items()]
    if train_recs:
        note("baseline")
        extra = [baseline_row(train_recs, rec, events, seed)]
        if forest:
            note("random forest")
            extra.append(forest_row(train_recs, rec, events, seed))
        for row, warn in extra:
            rows.append(row)
            decisions[row["name"]] = warn
    precursor_tpr(rows, decisions, events, failure_precursor)
    result = {"version": ensemble.version, "features": fs.name, "failures": int(events.labels.sum()),
              "precursor_failures": int(failure_precursor.sum()), "ok_events": int((events.labels == 0).sum()),
              "precursor_known": rec.precursor is not None,
              "rows": rows, "scores": {"labels": events.labels, "network_probabilities": out.network_probabilities,
                                       "vote_probability": out.vote_probability}}
    # what each score could reach at the bound, with hindsight: the threshold set on this data
    counted = np.zeros(events.labels.size, bool)
    counted[pos] = failure_precursor
    result["scores"]["precursor"] = counted
    result["at_fpr"] = at_fpr_of(ensemble, result["scores"], at_fpr)
    # what is caught and what is mistaken, by kind: the failure families each predictor catches,
    # and the benign look-alike episodes its false positives lie in
    family_all = list(rec.family) if rec.family is not None else [""] * len(rec.failure_times)
    event_family = [family_all[i] for i in which]
    shown = ("lstm-vote", "single-network@2min")
    by_family = {name: caught_by_family(event_family, decisions[name][pos]) for name in shown}
    result["by_family"] = {f: {"failures": c["failures"], **{name: by_family[name][f]["caught"] for name in shown}}
                           for f, c in by_family[shown[0]].items()}
    result["families_seen"] = families_seen(manifest.get("metadata", {}).get("families"), result["by_family"])
    ok = np.flatnonzero(events.labels == 0)
    # false positives come in runs (one look-alike, one node's odd stretch): how many independent ones
    false_positives = {name: ok[decisions[name][ok]] for name in shown}
    result["false_positive_runs"] = {name: false_positive_runs(events.nodes[i], events.times[i])
                                     for name, i in false_positives.items()}
    if rec.look_alikes is not None and rec.look_alike_kinds is not None:
        inside = look_alike_at(events.nodes[ok], events.times[ok], rec.look_alikes, rec.look_alike_kinds)
        result["false_positives_by_look_alike"] = {}
        for name in shown:
            kinds, counts = np.unique(np.where(inside == "", "none", inside)[decisions[name][ok]], return_counts=True)
            result["false_positives_by_look_alike"][name] = {str(k): int(c) for k, c in
                                                             sorted(zip(kinds, counts), key=lambda kc: -kc[1])}
    if online:
        note("online scan (every node, every step)" if stride == 1 else f"online scan (every {stride} steps)")
        votes = None
        if ensemble.vote == "lstm":
            # the online vote in one pass (each window's features once); at the model's threshold its
            # warnings are the worker's predictor's (tests/test_failure_training.py), at others the curve
            votes = online_vote_scan(ensemble.series_votes, rec.values, rec.t0, ensemble.grid_s,
                                     ensemble.history_steps, stride=stride)
            scan = warnings_at(votes, ensemble.threshold)
        else:
            scan = online_scan(predict or _ensemble_predict(ensemble), rec.values, rec.t0, ensemble.grid_s,
                               ensemble.history_steps, stride=stride, nodes=rec.nodes)
        healthy = healthy_mask(rec.values.shape[0], rec.values.shape[1], rec.t0, ensemble.grid_s,
                               rec.failure_nodes, rec.failure_times)
        result["online"] = online_summary(scan, rec.failure_nodes, rec.failure_times, healthy, rec.t0,
                                          ensemble.grid_s, precursor=pre_all, family=family_all)
        result["online"]["stride_steps"] = stride
        if votes is not None:
            note("online operating curve")
            result.update(online_curve_at_target(ensemble, [(rec, votes, healthy, pre_all)]))
            budget = PREDICTION_TARGETS["online_false_alarms_per_100_node_days"] if false_alarms is None \
                else false_alarms
            if budget > 0:
                note("budget controller")
                # the worker's controller: primed with the calibration history when 'train threshold' stored one
                controller = primed_by(manifest, budget=budget, initial=float(ensemble.threshold),
                                       step_s=ensemble.grid_s * stride)
                result["budget"] = budget_report(votes, rec, pre_all, ensemble.threshold, budget,
                                                 step_s=ensemble.grid_s * stride, controller=controller)
            if keep_scan:
                result["online_scan"] = (rec, votes, healthy, pre_all)
    result["targets"] = check_targets(next(r for r in rows if r["name"] == "lstm-vote"), result.get("online"))
    return result


def operating_curve(ensemble, scans: list, points: int) -> list[dict]:
    """The online operating curve of one or more histories, each given as ``(rec, vote scan, healthy,
    precursor)``: thresholds from all their healthy evaluations' votes (up to fpr 1e-2 on a grid of
    ``points``) and the model's own, each history's curve at them, pooled when there are several."""
    import numpy as np

    from hpcguard.models.failure.evaluation import curve_thresholds, healthy_votes, online_curve, pool_curves

    ok = np.concatenate([healthy_votes(v, h, r.t0, ensemble.grid_s) for r, v, h, _ in scans])
    thresholds = np.unique(np.append(curve_thresholds(ok, max_fpr=1e-2, points=points), ensemble.threshold))
    curves = [online_curve(v, thresholds, r.failure_nodes, r.failure_times, h, r.t0, ensemble.grid_s, precursor=pre)
              for r, v, h, pre in scans]
    return curves[0] if len(curves) == 1 else pool_curves(curves)


def at_fpr_of(ensemble, scores: dict, fpr: float) -> dict:
    """What the vote and the 2-minute network reach with their threshold put at ``fpr`` of the
    events' healthy ones, with hindsight: tpr of all failures and of those with a precursor."""
    from hpcguard.models.failure.evaluation import tpr_at_fpr

    i2 = list(ensemble.leads).index(2)
    return {name: {"all": tpr_at_fpr(scores["labels"], score, fpr),
                   "precursor": tpr_at_fpr(scores["labels"], score, fpr, scores["precursor"])}
            for name, score in (("lstm-vote", scores["vote_probability"]),
                                ("single-network@2min", scores["network_probabilities"][:, i2]))}


def online_curve_at_target(ensemble, scans: list) -> dict:
    """The online operating curve on one or more histories' vote scans (``(rec, votes, healthy,
    precursor)``; the vote threshold swept over their healthy evaluations' votes, the model's own
    threshold among them) and its point at the false-alarm target, set with hindsight."""
    from hpcguard.models.failure.evaluation import PREDICTION_TARGETS, threshold_for_false_alarms

    curve = operating_curve(ensemble, scans, points=24)
    budget = PREDICTION_TARGETS["online_false_alarms_per_100_node_days"]
    return {"online_curve": curve, "online_at_false_alarm_target": threshold_for_false_alarms(curve, budget)}


def pool_results(ensemble, results: list[dict], at_fpr: float) -> dict:
    """Several test histories' results (:func:`evaluate_history`'s) as one, with the keys one history's
    result has: rows, online counts, failure families and look-alike false positives added; the
    hindsight ``at_fpr`` and the online operating curve recomputed on all the histories' events and
    scans together (one threshold for the pool); the targets checked on the pool.  The median lead is
    left out (NaN): a median does not add."""
    import numpy as np

    from hpcguard.models.failure.evaluation import check_targets, pool_rows, pool_summaries

    out: dict[str, Any] = {"version": results[0]["version"], "features": results[0]["features"],
                           **{k: sum(r[k] for r in results) for k in ("failures", "precursor_failures", "ok_events")},
                           "precursor_known": all(r["precursor_known"] for r in results),
                           "rows": pool_rows([r["rows"] for r in results])}
    if all("online" in r for r in results):
        out["online"] = {"threshold": ensemble.threshold, **pool_summaries([r["online"] for r in results]),
                         "median_lead_minutes": float("nan"), "stride_steps": results[0]["online"]["stride_steps"],
                         "warned_lead_minutes": sorted(x for r in results
                                                       for x in r["online"].get("warned_lead_minutes", [])),
                         "by_family": add_counts([r["online"]["by_family"] for r in results])}
    out["scores"] = {k: np.concatenate([r["scores"][k] for r in results]) for k in results[0]["scores"]}
    out["at_fpr"] = at_fpr_of(ensemble, out["scores"], at_fpr)
    out["by_family"] = add_counts([r["by_family"] for r in results])
    seen = results[0].get("families_seen")
    out["families_seen"] = families_seen(None if seen is None else seen["trained"], out["by_family"])
    out["false_positive_runs"] = {name: sum(r["false_positive_runs"][name] for r in results)
                                  for name in results[0]["false_positive_runs"]}
    if all("false_positives_by_look_alike" in r for r in results):
        per_name = add_counts([{name: kinds} for r in results
                               for name, kinds in r["false_positives_by_look_alike"].items()])
        out["false_positives_by_look_alike"] = {name: dict(sorted(kinds.items(), key=lambda kc: -kc[1]))
                                                for name, kinds in per_name.items()}
    if all("online_scan" in r for r in results):
        out.update(online_curve_at_target(ensemble, [r["online_scan"] for r in results]))
    if all("budget" in r for r in results):
        out["budget"] = pool_budget([r["budget"] for r in results])
    out["targets"] = check_targets(next(r for r in out["rows"] if r["name"] == "lstm-vote"), out.get("online"))
    return out


BURN_IN_S = 86400.0     # the controller's first streamed day is not scored (it learns the site then)
BUDGET_COUNTS = ("failures", "warned_2min", "precursor_failures", "precursor_warned_2min", "false_alarm_episodes",
                 "node_days")


def scored_after(warn, window_end_time, failure_nodes, failure_times, precursor, n_nodes: int, t_end: float,
                 start: float, horizon_s: float = 900.0, gap_s: float = 600.0, min_lead_s: float = 120.0) -> dict:
    """An online scan's warnings ``warn (nodes, steps)`` scored from ``start`` on: the failures at or
    after it warned ``>= min_lead_s`` ahead (all, and those with a precursor), the false-alarm episodes
    that start at or after it (:func:`~hpcguard.models.warning_eval.score_warnings`' rules), per 100
    node-days of ``n_nodes × [start, t_end)``.

    >>> import numpy as np
    >>> w = np.zeros((2, 4), bool); w[0, 1] = w[1, 3] = True       # node 0 warns at 200 s, node 1 at 400 s
    >>> s = scored_after(w, [100., 200., 300., 400.], [0], [500.], [True], 2, 86400.0, 150.0)
    >>> s["warned_2min"], s["false_alarm_episodes"], round(s["false_alarms_per_100_node_days"], 2)
    (1, 1, 50.09)
    """
    import numpy as np

    from hpcguard.models.metrics import ratio
    from hpcguard.models.warning_eval import score_warnings, warning_episodes

    times = np.asarray(window_end_time, float)
    fn, ft = np.asarray(failure_nodes, int), np.asarray(failure_times, float)
    pre = np.ones(ft.size, bool) if precursor is None else np.asarray(precursor, bool)
    node_idx, k = np.nonzero(np.asarray(warn, bool))
    wt = times[k]
    late = ft >= start
    lead = np.asarray(score_warnings(node_idx, wt, fn[late], ft[late], horizon_s, gap_s,
                                     per_failure=True)["per_failure_lead_minutes"], float)
    early = lead >= min_lead_s / 60.0
    false = 0
    for node, first, last in warning_episodes(node_idx, wt, gap_s):
        if first >= start and not ((fn == int(node)) & (ft > first) & (ft <= last + horizon_s)).any():
            false += 1
    node_days = n_nodes * max(t_end - start, 0.0) / 86400.0
    p = pre[late]
    return {"failures": int(late.sum()), "warned_2min": int(early.sum()), "warned_2min_share": ratio(int(early.sum()), int(late.sum())),
            "precursor_failures": int(p.sum()), "precursor_warned_2min": int(early[p].sum()),
            "precursor_warned_2min_share": ratio(int(early[p].sum()), int(p.sum())),
            "false_alarm_episodes": false, "node_days": node_days,
            "false_alarms_per_100_node_days": ratio(100.0 * false, node_days)}


def hindsight_best(votes, window_end_time, failure_nodes, failure_times, precursor, n_nodes: int, t_end: float,
                   start: float, budget: float, stop_after: int = 6, max_candidates: int = 3000) -> Optional[dict]:
    """The fixed threshold with the most failures warned >= 2 min among those whose false-alarm episodes
    from ``start`` on stay within ``budget`` per 100 node-days, with hindsight: the votes from ``start``
    on, highest first (all of the top 1000 distinct, then spaced, ``max_candidates`` in all), scored
    until the count is ``stop_after`` over the allowed one; the lowest within wins (a lower threshold
    warns a superset; false-alarm counts are not monotone).  ``None``: none is within."""
    import numpy as np

    times = np.asarray(window_end_time, float)
    v = np.asarray(votes, float)
    later = v[:, times >= start]
    x = np.unique(later[~np.isnan(later)])[::-1]
    if x.size > max_candidates:
        x = x[np.unique(np.concatenate([np.arange(1000), np.geomspace(1000, x.size - 1, max_candidates - 1000)
                                        .astype(int)]))]
    allowed = budget * n_nodes * max(t_end - start, 0.0) / 86400.0 / 100.0
    best = None
    for thr in x.tolist():
        with np.errstate(invalid="ignore"):
            s = scored_after(v >= thr, times, failure_nodes, failure_times, precursor, n_nodes, t_end, start)
        if s["false_alarm_episodes"] <= allowed:
            best = {"threshold": float(thr), **s}
        elif s["false_alarm_episodes"] > allowed + stop_after:
            break
    return best


def budget_report(vote_scan: dict, rec: Recorded, precursor, fixed_threshold: float, budget: float,
                  step_s: float = GRID_S, burn_in_s: float = BURN_IN_S, controller=None) -> dict:
    """The false-alarm budget controller (:class:`~hpcguard.models.budget.BudgetController`) run over an
    :func:`~hpcguard.models.failure.evaluation.online_vote_scan` in event time, labels from the
    history's failures (each node-step and warning episode learnt once its horizon has passed), beside
    the model's fixed threshold and the hindsight-best fixed threshold within the same budget; all
    three scored after the burn-in (:func:`scored_after`; the first day, or the first half of a
    history shorter than two days); ``primed_node_days``: what ``controller`` had learnt before (a prior).  ``rows``: ``fixed``, ``controller`` (its
    thresholds after the burn-in: ``threshold`` the median, ``threshold_range``), ``hindsight-best``
    (absent when no threshold keeps within)."""
    import numpy as np

    from hpcguard.models.budget import BudgetController, replay

    v, times = vote_scan["vote"], np.asarray(vote_scan["window_end_time"], float)
    n = v.shape[0]
    t_end = rec.t0 + rec.values.shape[1] * GRID_S
    burn_in_s = min(burn_in_s, 0.5 * (t_end - rec.t0))       # a history under two days: its first half
    start = rec.t0 + burn_in_s
    args = (times, rec.failure_nodes, rec.failure_times, precursor, n, t_end, start)
    with np.errstate(invalid="ignore"):
        fixed = {"name": "fixed", "threshold": float(fixed_threshold), **scored_after(v >= fixed_threshold, *args)}
    c = controller or BudgetController(budget, initial=float(fixed_threshold), step_s=step_s)
    primed_node_days = c.node_days  # what the controller knew before this history (a model's prior)
    run = replay(v, times, rec.failure_nodes, rec.failure_times, c, nodes=rec.nodes)
    after = run["threshold"][times >= start]
    ctrl = {"name": "controller", "threshold": float(np.median(after)) if after.size else float("nan"),
            "threshold_range": [float(after.min()), float(after.max())] if after.size else None,
            **scored_after(run["warn"], *args)}
    rows = [fixed, ctrl]
    best = hindsight_best(v, *args, budget=budget)
    if best is not None:
        rows.append({"name": "hindsight-best", **best})
    return {"budget": float(budget), "burn_in_hours": burn_in_s / 3600.0, "histories": 1,
            "primed_node_days": primed_node_days,
            "controller": {k: getattr(c, k) for k in ("aim_share", "span", "max_recall_loss", "gain")},
            "rows": rows}


def pool_budget(reports: list[dict]) -> dict:
    """Several histories' :func:`budget_report` as one: each row's counts added (each history its own
    controller, its own hindsight-best), shares and rates recomputed.

    >>> r = {"budget": 2.0, "burn_in_hours": 24.0, "histories": 1, "controller": {}, "rows": [{"name": "fixed",
    ...      "threshold": 0.9, "failures": 4, "warned_2min": 2, "precursor_failures": 2, "precursor_warned_2min": 1,
    ...      "false_alarm_episodes": 1, "node_days": 50.0}]}
    >>> p = pool_budget([r, r])["rows"][0]
    >>> p["false_alarms_per_100_node_days"], p["precursor_warned_2min_share"], p["histories"]
    (2.0, 0.5, 2)
    """
    from hpcguard.models.metrics import ratio

    names = [row["name"] for row in reports[0]["rows"]]
    rows = []
    for name in names:
        parts = [row for rep in reports for row in rep["rows"] if row["name"] == name]
        c = {k: sum(p[k] for p in parts) for k in BUDGET_COUNTS}
        rows.append({"name": name, "histories": len(parts), **c,
                     "warned_2min_share": ratio(c["warned_2min"], c["failures"]),
                     "precursor_warned_2min_share": ratio(c["precursor_warned_2min"], c["precursor_failures"]),
                     "false_alarms_per_100_node_days": ratio(100.0 * c["false_alarm_episodes"], c["node_days"])})
    return {**{k: reports[0][k] for k in ("budget", "burn_in_hours", "controller")}, "histories": len(reports),
            "rows": rows}


def add_counts(parts: list[dict]) -> dict:
    """Nested count dicts (``{key: {name: count}}``) added key by key; keys ordered by their largest count.

    >>> add_counts([{"fan": {"vote": 1}}, {"fan": {"vote": 2}, "psu": {"vote": 5}}])
    {'psu': {'vote': 5}, 'fan': {'vote': 3}}
    """
    total: dict[str, dict[str, int]] = {}
    for part in parts:
        for key, counts in part.items():
            acc = total.setdefault(key, {})
            for name, n in counts.items():
                acc[name] = acc.get(name, 0) + n
    return dict(sorted(total.items(), key=lambda kv: -max(kv[1].values(), default=0)))


def history_summary(result: dict, seed: int) -> dict:
    """One test history's counts, vote and online figures, as a pooled cross-profile pair lists them."""
    vote = next(row for row in result["rows"] if row["name"] == "lstm-vote")
    h = {"test_seed": seed, "failures": result["failures"], "precursor_failures": result["precursor_failures"],
         "ok_events": result["ok_events"], "lstm_vote_tpr_precursor": vote["tpr_precursor"],
         "lstm_vote_fpr": vote["fpr"],
         "lstm_vote_tpr_precursor_at_fpr": result["at_fpr"]["lstm-vote"]["precursor"]["tpr"]}
    if "online" in result:
        h.update({k: result["online"][k] for k in ("precursor_warned_2min_share", "false_alarms_per_100_node_days")})
    return h


def without_scans(obj):
    """``obj`` without the per-event scores and online scans kept for plots and pooling, at any depth.

    >>> without_scans({"rows": [], "scores": {}, "histories": [{"online_scan": (), "rows": [1]}]})
    {'rows': [], 'histories': [{'rows': [1]}]}
    """
    if isinstance(obj, dict):
        return {k: without_scans(v) for k, v in obj.items() if k not in ("scores", "online_scan")}
    if isinstance(obj, list):
        return [without_scans(v) for v in obj]
    return obj
