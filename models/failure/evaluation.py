"""Table-4.1-style evaluation of failure predictors (seed 000 §4.3).

``report_row`` turns one predictor's decisions on labelled events into the columns
of Tab. 4.1 (tpr, ppv, fpr, UC(1024)) plus the node counts where UC crosses 5 %,
30 % and 50 % (Fig. 4.12); ``pool_rows`` adds several test histories' rows into one.
``ensemble_rows`` produces the ensemble's rows: unanimous voting over 1, 2, 4 and 6
networks, the LSTM vote and a single network.
``online_scan`` runs a predictor the way the node agent does — every node, every
15 s step (or every ``stride`` steps), through the predictor's own ``predict`` on the
node's history — and ``online_summary`` scores its warnings as an operator sees them.
``online_vote_scan`` records the online vote itself (``FailureEnsemble.series_votes``, equal
to ``online_vote``) on the same histories, so ``online_curve`` gives the warnings of every vote threshold from
one pass (the operating curve: failures warned against false-alarm episodes per 100
node-days; ``pool_curves`` and ``pool_summaries`` add several histories') and
``threshold_for_false_alarms`` picks the threshold for a budget.
``tpr_at_fpr`` gives what a score reaches with its threshold put at one false-positive
rate of the data at hand, ``false_positive_runs`` how many independent runs its false
positives form, and ``check_targets`` compares a report with the prediction
targets (``PREDICTION_TARGETS``).

Example
-------
>>> import numpy as np
>>> row = report_row("x", np.array([1, 1, 0, 0, 0]), np.array([1, 0, 0, 0, 1]))
>>> (row["tpr"], row["fpr"], row["nodes_uc_50"])
(0.5, 0.3333333333333333, 2)
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from hpcguard.models.features import WINDOW_STEPS
from hpcguard.models.metrics import poisson_interval, ratio, uc_crossing, uc_probability, wilson_interval
from hpcguard.models.warning_eval import score_warnings, warning_episodes

UC_LEVELS: tuple[float, ...] = (0.05, 0.30, 0.50)
# what the failure prediction has to reach on a site it was not tuned to: the LSTM vote's tpr
# (all failures, failures with a precursor) at fpr <= ``vote_fpr``; online, the share of
# precursor failures warned >= 2 min ahead and the false-alarm episodes per 100 node-days; across
# simulator profiles, every (train, test) pair's vote tpr of precursor failures at fpr <= ``vote_fpr``
PREDICTION_TARGETS: dict[str, float] = {"vote_fpr": 2e-4, "vote_tpr": 0.50, "vote_tpr_precursor": 0.70,
                                        "online_precursor_warned_2min_share": 0.70,
                                        "online_false_alarms_per_100_node_days": 2.0,
                                        "cross_profile_tpr_precursor": 0.50}
# one node's false positives no farther apart than this are one run: a benign look-alike (a cooling blip, a
# fan dip, a job filling RAM) lasts minutes, and its lead windows trail it by up to 7 more
FALSE_POSITIVE_RUN_GAP_S = 900.0


def report_row(name: str, y_true: np.ndarray, y_pred: np.ndarray, p_ok: float = 1.0) -> dict[str, Any]:
    """tpr, ppv, fpr, UC(1024), counts and UC crossing node counts of one predictor."""
    y, p = np.asarray(y_true).astype(bool), np.asarray(y_pred).astype(bool)
    return row_from_counts(name, int((y & p).sum()), int((~y & p).sum()), int(y.sum()), int((~y).sum()), p_ok)


def row_from_counts(name: str, tp: int, fp: int, failures: int, ok: int, p_ok: float = 1.0) -> dict[str, Any]:
    """:func:`report_row` from its counts: true and false positives among ``failures`` and ``ok`` events.

    >>> r = row_from_counts("lstm-vote", tp=3, fp=1, failures=4, ok=10_000)
    >>> r["tpr"], r["fpr"], r["ppv"]
    (0.75, 0.0001, 0.75)
    """
    fpr = ratio(fp, ok)
    row: dict[str, Any] = {"name": name, "tpr": ratio(tp, failures), "ppv": ratio(tp, tp + fp), "fpr": fpr,
                           "uc_1024": float(uc_probability(fpr, 1024, p_ok)) if fpr == fpr else float("nan"),
                           "tp": int(tp), "fp": int(fp), "failures": int(failures), "ok": int(ok)}
    for level in UC_LEVELS:
        row[f"nodes_uc_{int(round(level * 100))}"] = uc_crossing(fpr, level, p_ok) if fpr == fpr else None
    return row


def pool_rows(histories: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Several test histories' report rows as one: each predictor's counts added and its rates
    recomputed (also ``tpr_precursor`` from ``tp_precursor``/``precursor_failures`` where given).
    Only the predictors every history has are pooled, in the first history's order.

    >>> a = [{"name": "lstm-vote", "tp": 3, "fp": 0, "failures": 4, "ok": 5000,
    ...       "tp_precursor": 3, "precursor_failures": 3}]
    >>> b = [{"name": "lstm-vote", "tp": 1, "fp": 1, "failures": 4, "ok": 5000,
    ...       "tp_precursor": 1, "precursor_failures": 2}]
    >>> r = pool_rows([a, b])[0]
    >>> r["tpr"], r["fpr"], r["tpr_precursor"], r["tp_precursor"]
    (0.5, 0.0001, 0.8, 4)
    """
    by_name = [{r["name"]: r for r in rows} for rows in histories]
    pooled = []
    for name in (r["name"] for r in histories[0]):
        if not all(name in rows for rows in by_name):
            continue
        parts = [rows[name] for rows in by_name]
        row = row_from_counts(name, *(sum(int(p[k]) for p in parts) for k in ("tp", "fp", "failures", "ok")))
        if all("tp_precursor" in p for p in parts):
            row["tp_precursor"] = sum(int(p["tp_precursor"]) for p in parts)
            row["precursor_failures"] = sum(int(p["precursor_failures"]) for p in parts)
            row["tpr_precursor"] = ratio(row["tp_precursor"], row["precursor_failures"])
        pooled.append(row)
    return pooled


def ensemble_rows(ensemble, features: np.ndarray, labels: np.ndarray, p_ok: float = 1.0,
                  unanimous: tuple[int, ...] = (1, 2, 4, 6), single_lead: int = 2) -> tuple[list[dict], dict]:
    """Rows for unanimous@n, the LSTM vote and one network on per-lead event features ``(N, 6, 70)``.

    Also returns the raw scores (``network_probabilities``, ``vote_probability``) for ROC plots.
    """
    out = ensemble.predict_batch(features)
    rows = [report_row(f"unanimous@{n}", labels, ensemble.unanimous(out.network_probabilities, n), p_ok)
            for n in unanimous]
    rows.append(report_row("lstm-vote", labels, out.vote_probability >= ensemble.threshold, p_ok))
    i = list(ensemble.leads).index(single_lead)
    rows.append(report_row(f"single-network@{single_lead}min", labels,
                           out.network_probabilities[:, i] > ensemble.net_threshold, p_ok))
    return rows, {"network_probabilities": out.network_probabilities, "vote_probability": out.vote_probability}


def caught_by_family(family: Sequence[str], caught: np.ndarray) -> dict[str, dict[str, int]]:
    """Failures and how many of them ``caught`` flags, per failure family (``failures.csv``
    ``family`` or ``cause``; empty = ``unknown``), the largest family first.

    >>> caught_by_family(["fan", "psu", "fan", "sudden"], np.array([True, False, False, False]))
    {'fan': {'failures': 2, 'caught': 1}, 'psu': {'failures': 1, 'caught': 0}, 'sudden': {'failures': 1, 'caught': 0}}
    """
    fam = np.array([str(f) or "unknown" for f in family], dtype=object)
    c = np.asarray(caught, bool)
    if fam.size != c.size:
        raise ValueError(f"{fam.size} families for {c.size} failures")
    names, counts = np.unique(fam.astype(str), return_counts=True)
    order = sorted(range(names.size), key=lambda i: (-counts[i], names[i]))
    return {str(names[i]): {"failures": int(counts[i]), "caught": int(c[fam == names[i]].sum())} for i in order}


def seen_families(trained: Sequence[str], precursor_failures: dict[str, int]) -> dict[str, Any]:
    """How many of a test's precursor failures belong to a family that the training failures hold.

    A model learns a precursor's shape from examples of it: a family it never saw in training
    is caught only where it happens to resemble one it did, and nothing in training tells it
    from that family's benign look-alikes.  ``share`` is the part of the precursor failures a
    model trained on those failures can be expected to reach (``None`` when a test failure's
    family is unknown).

    >>> seen_families(["psu", "fan"], {"fan": 30, "memory_leak": 20, "psu": 10})
    {'trained': ['fan', 'psu'], 'seen': 40, 'unseen': {'memory_leak': 20}, 'share': 0.6666666666666666}
    """
    known = set(trained)
    unseen = {f: int(n) for f, n in precursor_failures.items() if f not in known}
    total = int(sum(precursor_failures.values()))
    seen = total - sum(unseen.values())
    share = None if "unknown" in precursor_failures or not total else seen / total
    return {"trained": sorted(known), "seen": seen, "unseen": unseen, "share": share}


def false_positive_runs(nodes: np.ndarray, times: np.ndarray, gap_s: float = FALSE_POSITIVE_RUN_GAP_S) -> int:
    """How many runs the false positives at ``(node, time)`` form: one node's false positives no
    more than ``gap_s`` apart are one run (:func:`~hpcguard.models.warning_eval.warning_episodes`,
    the grouping of the online false-alarm episodes).

    Healthy events are drawn from every node and step, so one look-alike episode or one odd stretch
    of a node gives several false positives in a row; the runs are what happened independently, and
    an fpr that rests on a few runs moves far from one history to the next.

    >>> false_positive_runs(np.array([3, 5, 3, 3]), np.array([300.0, 300.0, 0.0, 2000.0]))  # node 3: 0-300 s, 2000 s
    3
    >>> [false_positive_runs(np.array([1, 1]), np.array([0.0, t])) for t in (900.0, 901.0)]
    [1, 2]
    >>> false_positive_runs(np.array([]), np.array([]))
    0
    """
    return len(warning_episodes(nodes, times, gap_s))


def look_alike_at(nodes: np.ndarray, times: np.ndarray, look_alikes: tuple, kinds: Sequence[str],
                  after_s: float = 420.0) -> np.ndarray:
    """Kind of the benign look-alike episode each event lies in (``''``: none).

    An event at ``(node, time)`` lies in an episode ``(node, start, end)`` when
    ``start <= time <= end + after_s``: its lead windows (up to 7 min before ``time``)
    still overlap the episode.  Where episodes overlap, the earliest listed wins.

    >>> look_alike_at(np.array([0, 0, 1]), np.array([100.0, 2000.0, 150.0]),
    ...               (np.array([0, 1]), np.array([50.0, 0.0]), np.array([120.0, 60.0])), ["fan_dip", "psu_warm"])
    array(['fan_dip', '', 'psu_warm'], dtype='<U8')
    """
    n, t = np.asarray(nodes), np.asarray(times, float)
    ln, ls, le = (np.asarray(a) for a in look_alikes)
    width = max((len(str(k)) for k in kinds), default=1)
    out = np.full(n.size, "", dtype=f"<U{width}")
    for node, start, end, kind in zip(ln, ls, le, kinds):   # episodes are few; events are vectorised
        out[(out == "") & (n == node) & (t >= start) & (t <= end + after_s)] = kind
    return out


def _histories(values: np.ndarray, history_steps: int, stride: int, chunk: int):
    """Every node's histories ending every ``stride`` steps whose last 4 minutes hold a sample:
    yields ``(node index, evaluated-end indices, windows (n, history_steps, S))`` and returns
    nothing; :func:`history_ends` gives the ends."""
    v = np.asarray(values, dtype=float)
    if stride < 1:
        raise ValueError(f"stride must be >= 1, got {stride}")
    ends = history_ends(v.shape[1], history_steps, stride)
    for n in range(v.shape[0]):                                   # one node at a time keeps memory bounded
        views = np.lib.stride_tricks.sliding_window_view(v[n], history_steps, axis=0)   # (W, S, T)
        alive = _evaluated(v[n], ends)
        for a in range(0, alive.size, chunk):
            idx = alive[a:a + chunk]
            yield n, idx, views[ends[idx] - history_steps].transpose(0, 2, 1)


def _evaluated(series: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Indices of the ``ends`` (exclusive) whose last 4 minutes of ``series (steps, S)`` hold a sample."""
    seen = np.concatenate([[0], np.cumsum((~np.isnan(series)).any(axis=1))])
    return np.flatnonzero(seen[ends] - seen[ends - WINDOW_STEPS] > 0)


def history_ends(n_steps: int, history_steps: int, stride: int = 1) -> np.ndarray:
    """Exclusive end steps of the histories an online scan evaluates (the first full one, then every ``stride``)."""
    return np.arange(history_steps, n_steps + 1, stride)


def online_scan(predict: Callable[[list[str], np.ndarray], Sequence[Any]], values: np.ndarray, t0: float,
                grid_s: float, history_steps: int, stride: int = 1, chunk: int = 4096,
                nodes: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Warnings of a predictor evaluated on every node's history, every ``stride`` steps.

    ``predict(nodes, windows (n, history_steps, S))`` is the streaming worker's predictor
    call (its results carry ``warn``), so the offline scan and the worker run one
    implementation.  A history ending at step ``e`` (exclusive) is available at
    ``t0 + e·grid_s``.  Histories whose last 4 minutes hold no sample (node down) are
    not evaluated.  Returns ``warn (nodes, evaluated ends)``, ``window_end_time`` and the
    ``node``/``time`` of each warning.
    """
    v = np.asarray(values, dtype=float)
    names = [str(n) for n in (nodes if nodes is not None else range(v.shape[0]))]
    ends = history_ends(v.shape[1], history_steps, stride)
    warn = np.zeros((v.shape[0], ends.size), bool)
    for n, idx, windows in _histories(v, history_steps, stride, chunk):
        warn[n, idx] = [vd.warn for vd in predict([names[n]] * idx.size, windows)]
    return warnings_scan(warn, t0 + ends * grid_s)


def warnings_scan(warn: np.ndarray, window_end_time: np.ndarray) -> dict[str, np.ndarray]:
    """An online scan's dict from its ``warn (nodes, evaluated ends)`` and the ends' times."""
    node_idx, k = np.nonzero(warn)
    return {"warn": warn, "window_end_time": window_end_time, "node": node_idx, "time": window_end_time[k]}


def online_vote_scan(series_votes: Callable[[np.ndarray, np.ndarray], np.ndarray], values: np.ndarray, t0: float,
                     grid_s: float, history_steps: int, stride: int = 1, chunk: int = 4096) -> dict[str, np.ndarray]:
    """The online vote on every history :func:`online_scan` evaluates: ``vote (nodes, evaluated
    ends)``, NaN where none is evaluated, and ``window_end_time``.  ``series_votes(series, ends)``
    is ``FailureEnsemble.series_votes`` (the vote of one node's histories ending at ``ends``,
    equal to ``online_vote`` on each).  :func:`warnings_at` turns it into the scan a threshold gives."""
    v = np.asarray(values, dtype=float)
    ends = history_ends(v.shape[1], history_steps, stride)
    out = np.full((v.shape[0], ends.size), np.nan)
    for n in range(v.shape[0]):
        idx = _evaluated(v[n], ends)
        for a in range(0, idx.size, chunk):
            out[n, idx[a:a + chunk]] = series_votes(v[n], ends[idx[a:a + chunk]])
    return {"vote": out, "window_end_time": t0 + ends * grid_s}


def warnings_at(vote_scan: dict[str, np.ndarray], threshold: float) -> dict[str, np.ndarray]:
    """The online scan of the same predictor with its vote threshold at ``threshold``."""
    with np.errstate(invalid="ignore"):
        return warnings_scan(vote_scan["vote"] >= threshold, vote_scan["window_end_time"])


def online_summary(scan: dict[str, np.ndarray], failure_nodes: np.ndarray, failure_times: np.ndarray,
                   healthy: np.ndarray, t0: float, grid_s: float, precursor: np.ndarray | None = None,
                   horizon_s: float = 900.0, min_lead_s: float = 120.0, gap_s: float = 600.0,
                   family: Sequence[str] | None = None) -> dict[str, Any]:
    """What an operator would see: failures warned (≥ ``min_lead_s`` ahead), false-alarm episodes
    per 100 node-days, median lead, and the per-evaluation fpr on healthy steps.

    ``healthy (nodes, steps)`` marks healthy steps (``dataset.healthy_mask``); an evaluation
    counts as healthy when the last step of its history is healthy.  ``precursor`` flags
    the failures that had a precursor (scored separately); with ``family`` (one per
    failure) ``by_family`` gives the failures warned ≥ ``min_lead_s`` ahead per family;
    ``warned_lead_minutes`` lists those failures' leads (what the cluster simulator's
    ``--predictor eval:`` resamples).
    Warning episodes and false alarms follow :func:`hpcguard.models.warning_eval.score_warnings`.
    """
    warn = scan["warn"]
    n_nodes, n_steps = healthy.shape
    h = _healthy_evaluations(scan["window_end_time"], healthy, t0, grid_s)
    fp = int((warn & h).sum())
    fn_ = np.asarray(failure_nodes, int)
    ft = np.asarray(failure_times, float)
    scores = score_warnings(scan["node"].astype(str), scan["time"], fn_.astype(str), ft, horizon_s, gap_s,
                            per_failure=True)
    lead = np.asarray(scores["per_failure_lead_minutes"], float)        # NaN = not warned
    early = lead >= min_lead_s / 60.0
    pre = np.ones(ft.size, bool) if precursor is None else np.asarray(precursor, bool)
    node_days = n_nodes * n_steps * grid_s / 86400.0
    by_family = {} if family is None else {"by_family": caught_by_family(family, early)}
    summary = {**by_family, "evaluations": int(warn.size), "healthy_evaluations": int(h.sum()),
               "false_positive_evaluations": fp, "fpr_per_step": fp / max(int(h.sum()), 1), "failures": int(ft.size),
               "warned": int((~np.isnan(lead)).sum()), "warned_2min": int(early.sum()),
               "warned_2min_share": float(early.mean()) if ft.size else float("nan"),
               "precursor_failures": int(pre.sum()), "precursor_warned_2min": int(early[pre].sum()),
               "precursor_warned_2min_share": float(early[pre].mean()) if pre.any() else float("nan"),
               "false_alarm_episodes": scores["false_alarms"], "node_days": node_days,
               "false_alarms_per_100_node_days": ratio(100.0 * scores["false_alarms"], node_days),
               "median_lead_minutes": float(np.nanmedian(lead)) if (~np.isnan(lead)).any() else float("nan"),
               # the lead of each failure warned >= min_lead_s ahead: the distribution ``--predictor eval:`` resamples
               "warned_lead_minutes": sorted(float(x) for x in lead[early])}
    return {**summary, **online_intervals(summary)}


def online_intervals(counts: dict[str, Any]) -> dict[str, list[float]]:
    """95 % intervals of an online summary's two target quantities, from its counts
    (:data:`CURVE_COUNTS`): the share of precursor failures warned >= 2 min ahead (Wilson) and
    the false-alarm episodes per 100 node-days (exact Poisson).  A threshold set on a few
    episodes moves with the history it is set on; these say by how much.

    >>> ci = online_intervals({"precursor_warned_2min": 62, "precursor_failures": 103,
    ...                        "false_alarm_episodes": 4, "node_days": 384.0})
    >>> [round(x, 2) for x in ci["precursor_warned_2min_ci95"]], [round(x, 2) for x in ci["false_alarms_per_100_node_days_ci95"]]
    ([0.51, 0.69], [0.28, 2.67])
    """
    low, high = poisson_interval(counts["false_alarm_episodes"], counts["node_days"] / 100.0)
    return {"precursor_warned_2min_ci95": list(wilson_interval(counts["precursor_warned_2min"],
                                                               counts["precursor_failures"])),
            "false_alarms_per_100_node_days_ci95": [low, high]}


def _healthy_evaluations(end_time: np.ndarray, healthy: np.ndarray, t0: float, grid_s: float) -> np.ndarray:
    """``(nodes, evaluated ends)``: the evaluation counts as healthy when the last step of its history is."""
    last_step = np.round((np.asarray(end_time) - t0) / grid_s).astype(int) - 1
    return np.asarray(healthy, bool)[:, last_step]


def healthy_votes(vote_scan: dict[str, np.ndarray], healthy: np.ndarray, t0: float, grid_s: float) -> np.ndarray:
    """The votes of an :func:`online_vote_scan`'s healthy evaluations (1-D)."""
    votes = vote_scan["vote"][_healthy_evaluations(vote_scan["window_end_time"], healthy, t0, grid_s)]
    return votes[~np.isnan(votes)]


def curve_thresholds(ok_votes: np.ndarray, max_fpr: float = 1e-2, points: int = 24) -> np.ndarray:
    """Vote thresholds for an operating curve from the healthy evaluations' votes: each lets at
    most ``k`` of them warn, for ``k`` from 0 to ``max_fpr`` of them on a geometric grid
    (ascending, unique).

    >>> curve_thresholds(np.array([0.1, 0.2, 0.9, 0.3]), max_fpr=0.5, points=3).round(3).tolist()
    [0.2, 0.3, 0.9]
    """
    ok = np.sort(np.asarray(ok_votes, float))[::-1]
    if not ok.size:
        raise ValueError("no healthy evaluation to set thresholds on")
    top = max(1, int(np.floor(max_fpr * ok.size)))
    ks = np.unique(np.concatenate([[0], np.round(np.geomspace(1, top, points)).astype(int)]))
    ks = ks[ks < ok.size]
    return np.unique(np.nextafter(ok[ks], np.inf))      # just above the (k+1)-th highest: at most k warn


CURVE_COUNTS = ("healthy_evaluations", "false_positive_evaluations", "failures", "warned_2min",
                "precursor_failures", "precursor_warned_2min", "false_alarm_episodes", "node_days")


def online_curve(vote_scan: dict[str, np.ndarray], thresholds: Sequence[float], failure_nodes: np.ndarray,
                 failure_times: np.ndarray, healthy: np.ndarray, t0: float, grid_s: float,
                 precursor: np.ndarray | None = None) -> list[dict[str, Any]]:
    """The online operating curve: :func:`online_summary` at each vote threshold (ascending).

    What an operator chooses between: the share of (precursor) failures warned >= 2 min
    ahead against the false-alarm episodes per 100 node-days.  Each point keeps its counts
    (:data:`CURVE_COUNTS`), so :func:`pool_curves` can add several histories' curves.
    """
    keys = ("fpr_per_step", "warned_2min_share", "precursor_warned_2min_share", "false_alarms_per_100_node_days",
            "precursor_warned_2min_ci95", "false_alarms_per_100_node_days_ci95", "median_lead_minutes") + CURVE_COUNTS
    curve = []
    for t in sorted(float(x) for x in thresholds):
        s = online_summary(warnings_at(vote_scan, t), failure_nodes, failure_times, healthy, t0, grid_s,
                           precursor=precursor)
        curve.append({"threshold": t, **{k: s[k] for k in keys}})
    return curve


def pool_summaries(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several histories' online summaries (or curve points) as one: the counts of
    :data:`CURVE_COUNTS` and the node-days added, shares, rates and their intervals recomputed (the
    median lead is left out: it does not add).

    >>> a = {"healthy_evaluations": 100, "false_positive_evaluations": 1, "failures": 4, "warned_2min": 2,
    ...      "precursor_failures": 2, "precursor_warned_2min": 1, "false_alarm_episodes": 1, "node_days": 50.0}
    >>> p = pool_summaries([a, a])
    >>> p["false_alarms_per_100_node_days"], p["warned_2min_share"], p["failures"]
    (2.0, 0.5, 8)
    """
    c = {k: sum(s[k] for s in summaries) for k in CURVE_COUNTS}
    return {"fpr_per_step": c["false_positive_evaluations"] / max(c["healthy_evaluations"], 1),
            "warned_2min_share": ratio(c["warned_2min"], c["failures"]),
            "precursor_warned_2min_share": ratio(c["precursor_warned_2min"], c["precursor_failures"]),
            "false_alarms_per_100_node_days": ratio(100.0 * c["false_alarm_episodes"], c["node_days"]),
            **online_intervals(c), **c}


def pool_curves(curves: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Several histories' :func:`online_curve` at the same thresholds as one curve: each threshold's
    points pooled by :func:`pool_summaries`.

    >>> a = [{"threshold": 0.9, "healthy_evaluations": 100, "false_positive_evaluations": 1, "failures": 4,
    ...       "warned_2min": 2, "precursor_failures": 2, "precursor_warned_2min": 1, "false_alarm_episodes": 1,
    ...       "node_days": 50.0}]
    >>> pool_curves([a, a])[0]["false_alarms_per_100_node_days"], pool_curves([a, a])[0]["warned_2min_share"]
    (2.0, 0.5)
    """
    pooled = []
    for points in zip(*curves, strict=True):
        if len({p["threshold"] for p in points}) != 1:
            raise ValueError("curves must share their thresholds")
        pooled.append({"threshold": points[0]["threshold"], **pool_summaries(points)})
    return pooled


def threshold_for_false_alarms(curve: list[dict[str, Any]], per_100_node_days: float) -> dict[str, Any] | None:
    """The point of an :func:`online_curve` with the lowest threshold whose false-alarm episodes per
    100 node-days, and those of every higher threshold on the curve, stay within the budget
    (``None``: not even the highest does).

    >>> curve = [{"threshold": t, "false_alarms_per_100_node_days": fa}
    ...          for t, fa in ((0.5, 9.0), (0.6, 1.0), (0.7, 3.0), (0.8, 0.0))]
    >>> threshold_for_false_alarms(curve, 2.0)["threshold"]      # not 0.6: 0.7 breaks the budget again
    0.8
    """
    chosen = None
    for point in sorted(curve, key=lambda p: -p["threshold"]):
        if not point["false_alarms_per_100_node_days"] <= per_100_node_days:
            break
        chosen = point
    return chosen


def tpr_at_fpr(labels: np.ndarray, scores: np.ndarray, fpr: float,
               counted: np.ndarray | None = None) -> dict[str, Any]:
    """The tpr of ``scores`` with the threshold put where ``fpr`` of the healthy events warn.

    An event warns when its score is above the ``(k + 1)``-th highest healthy score,
    ``k = ⌊fpr · healthy events⌋``, so at most ``k`` healthy events warn (fewer on ties).
    ``counted`` (one flag per event) restricts the failures counted, e.g. to those with a
    precursor.  This threshold is set on the data it scores: it tells what a score could
    reach at that fpr, not what a model's own threshold does.

    >>> y = np.array([1, 1, 1, 0, 0, 0, 0, 0])
    >>> s = np.array([.9, .5, .2, .8, .3, .1, .1, .0])
    >>> r = tpr_at_fpr(y, s, 0.2)            # one of the five healthy events may warn
    >>> (r["threshold"], r["tpr"], r["false_positives"])
    (0.3, 0.6666666666666666, 1)
    """
    y = np.asarray(labels).astype(bool)
    s = np.asarray(scores, float)
    ok = np.sort(s[~y])[::-1]
    if not ok.size or not y.any():
        raise ValueError("need both failures and healthy events")
    k = int(np.floor(fpr * ok.size + 1e-9))
    threshold = float(ok[k]) if k < ok.size else -np.inf
    fail = y if counted is None else y & np.asarray(counted, bool)
    return {"fpr_bound": float(fpr), "threshold": threshold,
            "tpr": float((s[fail] > threshold).mean()) if fail.any() else float("nan"),
            "false_positives": int((ok > threshold).sum()), "ok": int(ok.size), "failures": int(fail.sum())}


def check_targets(vote_row: dict[str, Any], online: dict[str, Any] | None = None,
                  targets: dict[str, float] = PREDICTION_TARGETS) -> list[dict[str, Any]]:
    """Each target with the value reached, its bound and whether it is met.

    ``vote_row`` is the LSTM vote's :func:`report_row` (with ``tpr_precursor``) at the
    model's own threshold; its tpr targets count only when its fpr is within the bound.
    ``online`` is an :func:`online_summary` (omitted: no online targets).  Each target's
    ``ci95`` is the 95 % interval of its value from the counts behind it (Wilson; the
    false-alarm rate exact Poisson), ``None`` where the row holds no counts: whether a miss
    or a hit could be the luck of a few dozen failures.

    >>> row = {"tpr": 0.6, "tpr_precursor": 0.8, "fpr": 1e-4}
    >>> [(t["target"], t["met"]) for t in check_targets(row)]
    [('LSTM vote fpr', True), ('LSTM vote tpr', True), ('LSTM vote tpr (precursor failures)', True)]
    >>> check_targets({**row, "fpr": 1e-3})[1]["met"]      # tpr bought with too many false positives
    False
    >>> counted = {**row, "tp": 30, "failures": 50, "fp": 2, "ok": 20_000, "tp_precursor": 28, "precursor_failures": 35}
    >>> [round(x, 2) for x in check_targets(counted)[1]["ci95"]]
    [0.46, 0.72]
    """
    def wilson(k: str, n: str) -> list[float] | None:
        return list(wilson_interval(vote_row[k], vote_row[n])) if k in vote_row and n in vote_row else None

    fpr_ok = bool(vote_row["fpr"] <= targets["vote_fpr"])
    out = [{"target": "LSTM vote fpr", "value": vote_row["fpr"], "bound": f"<= {targets['vote_fpr']:g}",
            "met": fpr_ok, "ci95": wilson("fp", "ok")},
           {"target": "LSTM vote tpr", "value": vote_row["tpr"], "bound": f">= {targets['vote_tpr']:g}",
            "met": fpr_ok and bool(vote_row["tpr"] >= targets["vote_tpr"]), "ci95": wilson("tp", "failures")},
           {"target": "LSTM vote tpr (precursor failures)", "value": vote_row["tpr_precursor"],
            "bound": f">= {targets['vote_tpr_precursor']:g}",
            "met": fpr_ok and bool(vote_row["tpr_precursor"] >= targets["vote_tpr_precursor"]),
            "ci95": wilson("tp_precursor", "precursor_failures")}]
    if online is not None:
        share, alarms = online["precursor_warned_2min_share"], online["false_alarms_per_100_node_days"]
        out += [{"target": "online: precursor failures warned >= 2 min ahead", "value": share,
                 "bound": f">= {targets['online_precursor_warned_2min_share']:g}",
                 "met": bool(share >= targets["online_precursor_warned_2min_share"]),
                 "ci95": online.get("precursor_warned_2min_ci95")},
                {"target": "online: false-alarm episodes per 100 node-days", "value": alarms,
                 "bound": f"<= {targets['online_false_alarms_per_100_node_days']:g}",
                 "met": bool(alarms <= targets["online_false_alarms_per_100_node_days"]),
                 "ci95": online.get("false_alarms_per_100_node_days_ci95")}]
    return out
