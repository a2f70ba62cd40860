"""``hpcguard evaluate sites``: the project's yardstick on sites nobody tuned on (issue 56).

For each of ``sites`` randomised sites (:func:`~hpcguard.simulators.random_sites.random_site`,
seeds ``seed``, ``seed + 1``, ...) :func:`run_site_sweep` simulates one continuous history of
``train_hours + test_hours``, cuts it into the site's first days (its recorded history) and
its next days (what it then streams), trains on the first with ``hpcguard train failure``'s
own function and defaults (:func:`~hpcguard.simulators.failure_training.train_failure_model`),
and scores the next days through the online scan ``hpcguard evaluate failure`` reports
(:func:`~hpcguard.models.failure.assessment.evaluate_history`: the worker's vote at every step
of every node, warning episodes and false alarms as ``models.warning_eval`` counts them).  The
figures are therefore the ones ``evaluate failure`` prints as "online: precursor failures
warned >= 2 min" and "false-alarm episodes / 100 node-days".

:func:`summarise_sites` gives the distribution over sites: median, 10th and 90th percentile of
the warned share and of the false-alarm rate (95 % bootstrap intervals over sites) and the
share of sites within the budget (Wilson interval).

Alternative thresholding (a budget controller): ``controller(votes, rec, ensemble, budget)``
returns the warnings ``(nodes, evaluations)`` it raises on the vote scan ``votes``
(:func:`~hpcguard.models.failure.evaluation.online_vote_scan`'s dict, at event time); each
site then also gets its figures under ``controller``, counted the same way, and the summary
its distribution.  ``after_hours`` counts only from that hour of the streamed days on (the
targets' "after the first streamed day").

The false-alarm budget controller (``budget_controller``, on by default; ``evaluate sites
--false-alarms N``, 0 turns it off): each site's vote scan also gets
:func:`~hpcguard.models.failure.assessment.budget_report` at the sweep's budget — the model's
fixed threshold, :class:`~hpcguard.models.budget.BudgetController` run in event time and the
hindsight-best fixed threshold within the same budget, all three scored after the first
streamed day (the first half of a shorter stream) — in the row's ``budget``;
:func:`summarise_budget` gives their distribution over sites, the share of sites within the
budget (Wilson interval) and the share whose controller warns within ``NEAR`` of the
hindsight-best (issue 56's targets: >= 95 % of sites within budget; within 10 points on each).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

from hpcguard.jsonable import jsonable

# What a site row keeps of the online summary (models.failure.evaluation.online_summary).
ONLINE_KEYS = ("failures", "precursor_failures", "warned_2min", "warned_2min_share", "precursor_warned_2min",
               "precursor_warned_2min_share", "precursor_warned_2min_ci95", "false_alarm_episodes", "node_days",
               "false_alarms_per_100_node_days", "false_alarms_per_100_node_days_ci95", "median_lead_minutes",
               "fpr_per_step")

# What a site row keeps of each budget_report row (models.failure.assessment.scored_after and the threshold).
BUDGET_KEYS = ("threshold", "threshold_range", "failures", "warned_2min", "warned_2min_share", "precursor_failures",
               "precursor_warned_2min", "precursor_warned_2min_share", "false_alarm_episodes", "node_days",
               "false_alarms_per_100_node_days")
NEAR = 0.10     # the controller's warned share may be this far under the hindsight-best's (issue 56)

Controller = Callable[[dict, Any, Any, float], np.ndarray]
Progress = Callable[[int, int, str], None]


# --------------------------------------------------------------------------- the distribution over sites
def _quantile_ci(x: np.ndarray, q: float, rng: np.random.Generator, boots: int) -> dict:
    """The ``q``-quantile of ``x`` and its 95 % percentile-bootstrap interval over the sites."""
    if not x.size:
        return {"value": float("nan"), "ci95": [float("nan"), float("nan")]}
    idx = rng.integers(0, x.size, (boots, x.size))
    stats = np.quantile(x[idx], q, axis=1)
    return {"value": float(np.quantile(x, q)), "ci95": [float(v) for v in np.quantile(stats, [0.025, 0.975])]}


def summarise_sites(rows: Sequence[dict], budget: float = 2.0, boots: int = 2000, seed: int = 0,
                    key: str = "online") -> dict:
    """The distribution over sites of ``rows[i][key]`` (an online summary per site).

    Median, 10th and 90th percentile of the precursor failures' warned share (sites with a
    precursor failure) and of the false-alarm episodes per 100 node-days, each with a 95 %
    percentile-bootstrap interval over the sites (``boots`` resamples, ``seed``); the share of
    sites within ``budget`` with its Wilson interval; the pooled counts.  Rows with an
    ``error`` (no model could be trained) or without ``key`` are counted, not summarised.

    >>> rows = [{"online": {"precursor_failures": 4, "precursor_warned_2min": k, "precursor_warned_2min_share": k / 4,
    ...                     "false_alarm_episodes": e, "node_days": 50.0, "false_alarms_per_100_node_days": 2.0 * e}}
    ...         for k, e in ((1, 0), (2, 1), (3, 2), (4, 4))]
    >>> s = summarise_sites(rows)
    >>> s["warned"]["median"]["value"], s["false_alarms"]["median"]["value"], s["within_budget"]["sites"]
    (0.625, 3.0, 2)
    """
    from hpcguard.models.metrics import ratio, wilson_interval

    rng = np.random.default_rng(seed)
    ok = [r[key] for r in rows if not r.get("error") and r.get(key)]
    warned = np.array([o["precursor_warned_2min_share"] for o in ok if o["precursor_failures"] > 0], float)
    fa = np.array([o["false_alarms_per_100_node_days"] for o in ok], float)

    def dist(x: np.ndarray) -> dict:
        return {"sites": int(x.size), **{name: _quantile_ci(x, q, rng, boots)
                                         for name, q in (("median", 0.5), ("p10", 0.1), ("p90", 0.9))}}

    within = int((fa <= budget).sum())
    pooled = {k: sum(o[k] for o in ok) for k in ("precursor_failures", "precursor_warned_2min",
                                                  "false_alarm_episodes", "node_days")}
    pooled["precursor_warned_2min_share"] = ratio(pooled["precursor_warned_2min"], pooled["precursor_failures"])
    pooled["false_alarms_per_100_node_days"] = ratio(100.0 * pooled["false_alarm_episodes"], pooled["node_days"])
    return {"sites": len(rows), "evaluated": len(ok), "failed": sum(1 for r in rows if r.get("error")),
            "budget": budget, "warned": dist(warned), "false_alarms": dist(fa),
            "within_budget": {"sites": within, "of": int(fa.size), "share": ratio(within, int(fa.size)),
                              "ci95": list(wilson_interval(within, int(fa.size)))},
            "pooled": pooled}


def site_budget(report: dict, budget: float) -> dict:
    """A site's row of :func:`~hpcguard.models.failure.assessment.budget_report`: ``fixed``, ``controller``,
    ``hindsight`` (``None`` where no fixed threshold keeps within: only silence does), each with
    ``within_budget``; the controller's ``near_hindsight`` (its precursor failures' warned share at least
    the hindsight-best's less :data:`NEAR`, the hindsight-best's 0 where it is ``None``; ``None`` without a
    precursor failure after the burn-in).

    >>> r = {"name": "fixed", "threshold": 0.9, "failures": 2, "warned_2min": 1, "warned_2min_share": 0.5,
    ...      "precursor_failures": 2, "precursor_warned_2min": 1, "precursor_warned_2min_share": 0.5,
    ...      "false_alarm_episodes": 3, "node_days": 50.0, "false_alarms_per_100_node_days": 6.0}
    >>> b = site_budget({"burn_in_hours": 24.0, "rows": [r, {**r, "name": "controller", "false_alarm_episodes": 1,
    ...                  "false_alarms_per_100_node_days": 2.0}]}, 2.0)
    >>> b["fixed"]["within_budget"], b["controller"]["within_budget"], b["hindsight"], b["controller"]["near_hindsight"]
    (False, True, None, True)
    """
    rows = {r["name"]: r for r in report["rows"]}
    out: dict[str, Any] = {"budget": budget, "burn_in_hours": report["burn_in_hours"],
                           "primed_node_days": report.get("primed_node_days", 0.0)}
    for name, key in (("fixed", "fixed"), ("controller", "controller"), ("hindsight", "hindsight-best")):
        r = rows.get(key)
        out[name] = None if r is None else {**{k: r.get(k) for k in BUDGET_KEYS},
                                            "within_budget": bool(r["false_alarms_per_100_node_days"] <= budget)}
    c, h = out["controller"], out["hindsight"]
    share = c["precursor_warned_2min_share"]
    best = 0.0 if h is None else h["precursor_warned_2min_share"]
    c["near_hindsight"] = None if share is None or best is None or share != share or best != best \
        else bool(share >= best - NEAR)
    return out


def summarise_budget(rows: Sequence[dict], budget: float = 2.0, boots: int = 2000, seed: int = 0) -> dict:
    """The distribution over sites of their ``budget`` rows (:func:`site_budget`): for ``fixed``,
    ``controller`` and ``hindsight`` each, :func:`summarise_sites` (warned share, false-alarm rate,
    sites within the budget with a Wilson interval, pooled counts; a site without a hindsight-best
    threshold counts as silent and within); ``near_hindsight``: the sites whose controller warns within
    :data:`NEAR` of the hindsight-best, of those with a precursor failure, with a Wilson interval."""
    from hpcguard.models.metrics import ratio, wilson_interval

    have = [r["budget"] for r in rows if not r.get("error") and r.get("budget")]
    silent = {"precursor_failures": 0, "precursor_warned_2min": 0, "precursor_warned_2min_share": 0.0,
              "false_alarm_episodes": 0, "node_days": 0.0, "false_alarms_per_100_node_days": 0.0}
    out: dict[str, Any] = {"sites": len(rows), "with_budget": len(have), "budget": budget}
    for name in ("fixed", "controller", "hindsight"):
        items = []
        for b in have:
            r = b[name]
            if r is None:      # no fixed threshold keeps within: silence, with the failures it leaves
                c = b["controller"]
                r = {**silent, "precursor_failures": c["precursor_failures"], "node_days": c["node_days"],
                     "precursor_warned_2min_share": ratio(0, c["precursor_failures"])}
            items.append({"x": r})
        out[name] = summarise_sites(items, budget, boots, seed, key="x")
    near = [b["controller"]["near_hindsight"] for b in have if b["controller"]["near_hindsight"] is not None]
    k = int(sum(near))
    out["near_hindsight"] = {"sites": k, "of": len(near), "share": ratio(k, len(near)),
                             "ci95": list(wilson_interval(k, len(near))), "points": NEAR}
    return out


# --------------------------------------------------------------------------- one site
def _online_after(scan: dict, rec, healthy: np.ndarray, precursor, family, grid_s: float, after_s: float) -> dict:
    """:func:`~hpcguard.models.failure.evaluation.online_summary` of ``scan`` counted from ``rec.t0 + after_s``
    on (0: the whole history, exactly as ``evaluate failure``)."""
    from hpcguard.models.failure.evaluation import online_summary, warnings_scan

    k = int(round(after_s / grid_s))
    t0 = rec.t0 + k * grid_s
    keep = np.asarray(scan["window_end_time"]) > t0
    cut = warnings_scan(np.asarray(scan["warn"])[:, keep], np.asarray(scan["window_end_time"])[keep])
    times = np.asarray(rec.failure_times, float)
    f = times >= t0
    pre = np.ones(times.size, bool) if precursor is None else np.asarray(precursor, bool)
    fam = None if family is None else [x for x, keep_f in zip(family, f) if keep_f]
    return online_summary(cut, np.asarray(rec.failure_nodes)[f], times[f], healthy[:, k:], t0, grid_s,
                          precursor=pre[f], family=fam)


def _online_only(ensemble, rec, stride: int) -> dict:
    """The online part of :func:`~hpcguard.models.failure.assessment.evaluate_history` alone, for a test
    history without a failure (its event rows need one): the same scan, summary and curve."""
    from hpcguard.models.failure.assessment import online_curve_at_target
    from hpcguard.models.failure.dataset import healthy_mask
    from hpcguard.models.failure.evaluation import online_summary, online_vote_scan, warnings_at

    if ensemble.vote != "lstm":
        raise ValueError("a test history without failures is scored for an LSTM vote only")
    votes = online_vote_scan(ensemble.series_votes, rec.values, rec.t0, ensemble.grid_s, ensemble.history_steps,
                             stride=stride)
    healthy = healthy_mask(rec.values.shape[0], rec.values.shape[1], rec.t0, ensemble.grid_s, rec.failure_nodes,
                           rec.failure_times)
    pre = np.zeros(0, bool)
    online = online_summary(warnings_at(votes, ensemble.threshold), rec.failure_nodes, rec.failure_times, healthy,
                            rec.t0, ensemble.grid_s, precursor=pre, family=[])
    return {"rows": [], "online": online, "families_seen": None, **online_curve_at_target(ensemble,
                                                                                          [(rec, votes, healthy, pre)]),
            "online_scan": (rec, votes, healthy, pre)}


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(jsonable(obj), sort_keys=True).encode()).hexdigest()[:12]


def write_site(site_seed: int, out_dir: Path, *, nodes: int, train_hours: float, test_hours: float,
               simulation: Optional[dict] = None, parts: Sequence[str] = ("train", "test")) -> list[str]:
    """Simulate randomised site ``site_seed`` and write its first ``train_hours`` to ``out_dir/train`` and
    the next ``test_hours`` to ``out_dir/test`` (the ``parts`` asked for, replaced); returns each node's
    hardware generation. ``simulation``: ``TelemetryParams`` fields over the drawn site's."""
    from hpcguard.simulators.random_sites import random_site
    from hpcguard.simulators.telemetry import generate_telemetry
    from hpcguard.simulators.writers import write_recording

    profile, _ = random_site(site_seed)
    tel = generate_telemetry(nodes, train_hours + test_hours, site_seed, profile=profile, **(simulation or {}))
    split = int(round(train_hours * 3600.0 / 15.0)) * 15
    spans = {"train": (0, split), "test": (split, tel.up1.shape[1])}
    for part in parts:
        shutil.rmtree(out_dir / part, ignore_errors=True)
        write_recording(tel.window(*spans[part]), str(out_dir / part), io=False)
    return list(tel.hardware)


def evaluate_site(site_seed: int, work: Path, *, nodes: int, train_hours: float, test_hours: float,
                  budget: float, stride: int = 1, max_ok: int = 20000, train_seed: int = 0,
                  training: Optional[dict] = None, controller: Optional[Controller] = None, after_hours: float = 0.0,
                  budget_controller: bool = False, prime: bool = False, cache_dir: Optional[str] = None,
                  keep_data: bool = False, simulation: Optional[dict] = None,
                  progress: Callable[[str], None] = lambda m: None,
                  notify: Optional[Callable[[str, str], None]] = None) -> dict:
    """One randomised site: simulate, cut, train (``train failure``'s defaults, over ``training``),
    score its next days online.  Returns its row (``error`` set when no model could be trained).
    ``simulation``: ``TelemetryParams`` fields over the drawn site's (tests: a short MTBF).
    ``budget_controller``: the row's ``budget`` (:func:`site_budget`) at ``budget`` (> 0); with ``prime``
    the controller starts from the training history's labelled node-steps, the prior ``train failure``
    stores with the model for the worker (:func:`~hpcguard.simulators.failure_training.history_prior`);
    without it, from the model's threshold for a warm-up."""
    from hpcguard.connectors.model_store import code_digest, load_model
    from hpcguard.models.failure.assessment import evaluate_history
    from hpcguard.models.failure.evaluation import threshold_for_false_alarms
    from hpcguard.models.failure.site_training import TrainingError
    from hpcguard.simulators import failure_training as ft
    from hpcguard.simulators.random_sites import random_site
    from hpcguard.streams.predictors import EnsemblePredictor

    _, description = random_site(site_seed)
    row: dict[str, Any] = {"seed": site_seed, "name": description["name"], "summary": description["summary"],
                           "description": description, "notes": []}
    config = {"nodes": nodes, "train_hours": train_hours, "test_hours": test_hours, "stride": stride,
              "max_ok": max_ok, "train_seed": train_seed, "training": training or {}, "after_hours": after_hours,
              "budget": budget, "simulation": simulation or {}, "controller": getattr(controller, "__name__", None) if controller else None,
              "budget_controller": bool(budget_controller and budget > 0), "prime": bool(prime),
              "description": description, "code": code_digest()}
    key = _digest(config)
    site_dir = work / f"site-{site_seed}"
    cached = site_dir / "result.json"
    if cached.is_file():
        old = json.loads(cached.read_text())
        if old.get("key") == key:
            progress(f"site {site_seed}: cached")
            return old
    site_dir.mkdir(parents=True, exist_ok=True)

    def note(kind: str, message: str) -> None:
        row["notes"].append(f"{kind}: {message}")
        if notify:
            notify(kind, f"site {site_seed}: {message}")

    t = time.perf_counter()
    progress(f"site {site_seed}: simulating {nodes} nodes × {train_hours + test_hours:g} h")
    train_dir, test_dir, model_dir = site_dir / "train", site_dir / "test", site_dir / "model"
    shutil.rmtree(model_dir, ignore_errors=True)
    write_site(site_seed, site_dir, nodes=nodes, train_hours=train_hours, test_hours=test_hours,
               simulation=simulation)
    row["simulate_s"] = round(time.perf_counter() - t, 1)
    try:
        t = time.perf_counter()
        summary = ft.train_failure_model([str(train_dir)], str(model_dir), seed=train_seed, cache_dir=cache_dir,
                                         progress=lambda m: progress(f"site {site_seed}: {m}"), notify=note,
                                         **(training or {}))
        row["train_s"] = round(time.perf_counter() - t, 1)
        row["training"] = {k: summary.get(k) for k in ("version", "features", "events", "failures", "lstm_threshold",
                                                      "validation_failures", "tpr", "fpr", "fpr_upper")}
        row["training"]["families"] = summary["metadata"].get("families")
        t = time.perf_counter()
        progress(f"site {site_seed}: online scan of the next {test_hours:g} h")
        ensemble, manifest = load_model(str(model_dir))
        rec = ft.load_recorded(str(test_dir), ensemble.grid_s, ft.load_mapping(None))
        meta = dict(manifest.get("metadata", {}))
        if prime and budget_controller and budget > 0 and meta.get("budget_prior"):
            row["primed_node_days"] = meta["budget_prior"]["node_days"]
        else:   # the warm-up start: without the prior 'train failure' stored from the training history
            meta.pop("budget_prior", None)
            manifest = {**manifest, "metadata": meta}
        predict = EnsemblePredictor(ensemble, ensemble.version, manifest).predict
        if len(rec.failure_times):
            result = evaluate_history(ensemble, manifest, rec, [], train_seed, max_ok, True, stride, forest=False,
                                      keep_scan=True, predict=predict,
                                      false_alarms=budget if budget_controller and budget > 0 else 0.0)
        else:   # nothing to warn of: the false alarms still count
            result = _online_only(ensemble, rec, stride)
    except (TrainingError, ValueError) as exc:   # no model, or a test without a failure to score
        row["error"] = str(exc)
        note("error", str(exc))
        (site_dir / "result.json").write_text(json.dumps(jsonable({**row, "key": key}), indent=2))
        return row
    finally:
        if not keep_data:
            shutil.rmtree(train_dir, ignore_errors=True)
            shutil.rmtree(test_dir, ignore_errors=True)
    vote = next((r for r in result["rows"] if r["name"] == "lstm-vote"), None)
    row["lstm_vote"] = vote and {k: vote[k] for k in ("tpr", "tpr_precursor", "fpr")}
    row["families_seen"] = result.get("families_seen")
    row["by_family"] = result["online"].get("by_family")
    row["threshold"] = float(ensemble.threshold)
    scan_rec, votes, healthy, pre = result.get("online_scan") or (rec, None, None, None)
    if after_hours > 0 and votes is not None:
        from hpcguard.models.failure.evaluation import warnings_at

        online = _online_after(warnings_at(votes, ensemble.threshold), rec, healthy, pre, rec.family,
                               ensemble.grid_s, after_hours * 3600.0)
    else:
        online = result["online"]
    row["online"] = {k: online[k] for k in ONLINE_KEYS}
    row["online"]["within_budget"] = bool(online["false_alarms_per_100_node_days"] <= budget)
    curve = result.get("online_curve")
    at = threshold_for_false_alarms(curve, budget) if curve else None
    row["hindsight"] = None if at is None else {
        k: at[k] for k in ("threshold", "precursor_warned_2min_share", "false_alarms_per_100_node_days")}
    if budget_controller and budget > 0 and votes is not None:
        report = result.get("budget")
        if report is None:   # a stream without a failure (evaluate_history's needs one): its false alarms
            from hpcguard.models.failure.assessment import budget_report

            from hpcguard.models.budget import primed_by

            primed = primed_by(manifest, budget=budget, initial=float(ensemble.threshold),
                               step_s=ensemble.grid_s * stride)
            report = budget_report(votes, rec, pre, ensemble.threshold, budget, step_s=ensemble.grid_s * stride,
                                   controller=primed)
        row["budget"] = site_budget(report, budget)
    if controller is not None and votes is not None:
        warn = np.asarray(controller(votes, rec, ensemble, budget), bool)
        from hpcguard.models.failure.evaluation import warnings_scan

        c = _online_after(warnings_scan(warn, votes["window_end_time"]), rec, healthy, pre, rec.family,
                          ensemble.grid_s, after_hours * 3600.0)
        row["controller"] = {k: c[k] for k in ONLINE_KEYS}
        row["controller"]["within_budget"] = bool(c["false_alarms_per_100_node_days"] <= budget)
    row["evaluate_s"] = round(time.perf_counter() - t, 1)
    (site_dir / "result.json").write_text(json.dumps(jsonable({**row, "key": key}), indent=2))
    return row


def summarise_families(rows: Sequence[dict]) -> list[dict]:
    """Recall per precursor family over the sites (issue 57 item 4): a blind spot is a row, not an average.

    Pools each family's failures warned ≥ 2 min ahead (the online scan over each site's whole
    test window) with a Wilson 95 % interval; ``in_prior`` says whether the family is one of the
    project's built-in families (the simulated prior holds those), ``sites`` how many sites drew
    it and ``site_shares`` their own recall.  ``sudden`` failures (no precursor) are left out.

    >>> rows = [{"description": {"families": [{"name": "fan", "builtin": True}, {"name": "nic_flap"}]},
    ...          "by_family": {"fan": {"failures": 4, "caught": 3}, "nic_flap": {"failures": 2, "caught": 0},
    ...                        "sudden": {"failures": 3, "caught": 0}}}]
    >>> [(f["family"], f["in_prior"], f["caught"], f["failures"]) for f in summarise_families(rows)]
    [('nic_flap', False, 0, 2), ('fan', True, 3, 4)]
    """
    from hpcguard.models.metrics import wilson_interval

    pooled: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r.get("error") or not r.get("by_family"):
            continue
        builtin = {f["name"]: bool(f.get("builtin")) for f in r["description"]["families"]}
        for name, c in r["by_family"].items():
            if name == "sudden" or not c.get("failures"):
                continue
            f = pooled.setdefault(name, {"family": name, "in_prior": False, "sites": 0, "failures": 0, "caught": 0,
                                         "site_shares": []})
            f["in_prior"] |= builtin.get(name, False)
            f["sites"] += 1
            f["failures"] += int(c["failures"])
            f["caught"] += int(c["caught"])
            f["site_shares"].append(round(c["caught"] / c["failures"], 3))
    out = []
    for f in pooled.values():
        f["share"] = f["caught"] / f["failures"]
        f["ci95"] = list(wilson_interval(f["caught"], f["failures"]))
        out.append(f)
    return sorted(out, key=lambda f: (f["share"], f["family"]))


def family_lines(families: Sequence[dict]) -> list[str]:
    """The per-family table of :func:`summarise_families` (markdown lines), lowest recall first."""
    if not families:
        return []
    lines = ["Recall per precursor family (failures warned ≥ 2 min ahead, pooled over the sites that drew it, "
             "whole test window; Wilson 95 %; in prior: a built-in family the simulated prior holds):", "",
             "| family | in prior | sites | warned / failures | recall (95 %) |", "|---|---|---|---|---|"]
    for f in families:
        lo, hi = f["ci95"]
        lines.append(f"| {f['family']} | {'yes' if f['in_prior'] else 'no'} | {f['sites']} | "
                     f"{f['caught']}/{f['failures']} | {_pct(f['share'])} ({_pct(lo)}–{_pct(hi)}) |")
    for prior, label in ((False, "absent from the prior"), (True, "in the prior")):
        part = [f for f in families if f["in_prior"] is prior]
        if part:
            k, n = sum(f["caught"] for f in part), sum(f["failures"] for f in part)
            lines.append(f"| **families {label}** | | | {k}/{n} | {_pct(k / n)} |")
    return lines


# --------------------------------------------------------------------------- the sweep
def run_site_sweep(sites: int = 20, seed: int = 1, *, nodes: int = 64, train_hours: float = 48.0,
                   test_hours: float = 48.0, false_alarms: float = 2.0, out: Optional[str] = None, stride: int = 1,
                   max_ok: int = 20000, train_seed: int = 0, training: Optional[dict] = None,
                   controller: Optional[Controller] = None, after_hours: float = 0.0, budget_controller: bool = True,
                   prime: bool = False, cache_dir: Optional[str] = None, keep_data: bool = False, simulation: Optional[dict] = None,
                   progress: Optional[Progress] = None,
                   notify: Optional[Callable[[str, str], None]] = None) -> dict:
    """``sites`` randomised sites (seeds ``seed``..``seed + sites - 1``), each trained on its first
    ``train_hours`` and scored online on its next ``test_hours``; returns the per-site rows and
    their distribution (:func:`summarise_sites`) and, with ``out``, writes report.json, report.md
    and each site's ``site-<seed>/result.json`` (reused by a rerun with the same settings and code;
    the model stays in ``site-<seed>/model``, the recordings only with ``keep_data``).
    ``training``: options of ``train_failure_model`` over ``train failure``'s defaults (none: the
    defaults); ``simulation``: ``TelemetryParams`` fields over each drawn site's (none in a measurement).
    ``controller``/``after_hours``/``budget_controller`` (off where ``false_alarms`` is 0): see the module
    docstring; ``prime``: :func:`evaluate_site`."""
    if sites < 1 or nodes < 2 or train_hours <= 0 or test_hours <= 0 or stride < 1 or false_alarms < 0:
        raise ValueError("need sites >= 1, nodes >= 2, positive train and test hours, stride >= 1, budget >= 0")
    tick = progress or (lambda done, total, message: None)
    tmp = None if out else tempfile.TemporaryDirectory(prefix="hpcguard-sites-")
    work = Path(out) if out else Path(tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    started = time.perf_counter()
    try:
        for i in range(sites):
            s = seed + i
            rows.append(evaluate_site(s, work, nodes=nodes, train_hours=train_hours, test_hours=test_hours,
                                      budget=false_alarms, stride=stride, max_ok=max_ok, train_seed=train_seed,
                                      training=training, controller=controller, after_hours=after_hours,
                                      budget_controller=budget_controller, prime=prime, cache_dir=cache_dir,
                                      keep_data=keep_data,
                                      simulation=simulation,
                                      progress=lambda m, i=i: tick(i, sites, m), notify=notify))
            tick(i + 1, sites, f"site {s} done")
        result = {"sites": sites, "seed": seed, "seeds": [seed + i for i in range(sites)], "nodes": nodes,
                  "train_hours": train_hours, "test_hours": test_hours, "false_alarms_budget": false_alarms,
                  "scan_stride_steps": stride, "after_hours": after_hours, "simulation": simulation or {}, "training": training or "train failure defaults",
                  "thresholding": "the model's fixed threshold" + (" and a controller" if controller else "")
                  + (" and the budget controller" if budget_controller and false_alarms > 0 else "")
                  + (" primed with the history trained on" if prime and budget_controller and false_alarms > 0 else ""),
                  "summary": summarise_sites(rows, false_alarms),
                  "rows": rows, "wall_s": round(time.perf_counter() - started, 1)}
        if controller is not None:
            result["summary_controller"] = summarise_sites(rows, false_alarms, key="controller")
        if budget_controller and false_alarms > 0:
            result["summary_budget"] = summarise_budget(rows, false_alarms)
        result["summary_families"] = summarise_families(rows)
        if out:
            (work / "report.json").write_text(json.dumps(jsonable(result), indent=2))
            (work / "report.md").write_text(sweep_markdown(result))
        return result
    finally:
        if tmp is not None:
            tmp.cleanup()


# --------------------------------------------------------------------------- the report
def _pct(x: Optional[float]) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:.0f} %"     # None: a NaN a saved row kept as null


def _num(x: Optional[float]) -> str:
    return "n/a" if x is None or x != x else f"{x:.2f}"


def summary_lines(summary: dict, label: str = "fixed threshold") -> list[str]:
    """The distribution table of :func:`summarise_sites` (markdown lines)."""
    w, fa, within = summary["warned"], summary["false_alarms"], summary["within_budget"]

    def cell(d: dict, fmt) -> str:
        lo, hi = d["ci95"]
        return f"{fmt(d['value'])} ({fmt(lo)}–{fmt(hi)})"

    lines = [f"| {label} | median (95 %) | 10th percentile (95 %) | 90th percentile (95 %) | sites |",
             "|---|---|---|---|---|",
             f"| precursor failures warned ≥ 2 min | {cell(w['median'], _pct)} | {cell(w['p10'], _pct)} | "
             f"{cell(w['p90'], _pct)} | {w['sites']} |",
             f"| false-alarm episodes / 100 node-days | {cell(fa['median'], _num)} | {cell(fa['p10'], _num)} | "
             f"{cell(fa['p90'], _num)} | {fa['sites']} |"]
    lo, hi = within["ci95"]
    p = summary["pooled"]
    lines += ["", f"Sites within the budget ({summary['budget']:g} episodes / 100 node-days): {within['sites']} of "
              f"{within['of']} = {_pct(within['share'])} (95 % Wilson: {_pct(lo)}–{_pct(hi)}). Pooled over the "
              f"sites: {p['precursor_warned_2min']} of {p['precursor_failures']} precursor failures warned "
              f"({_pct(p['precursor_warned_2min_share'])}), {p['false_alarm_episodes']} false-alarm episodes in "
              f"{p['node_days']:.0f} node-days ({_num(p['false_alarms_per_100_node_days'])} / 100 node-days)."]
    if summary["failed"]:
        lines.append(f"{summary['failed']} site(s) could not be evaluated (see their error): not in the figures.")
    return lines


def budget_lines(result: dict) -> list[str]:
    """The budget controller beside the fixed and the hindsight-best threshold (:func:`summarise_budget`
    and each site's :func:`site_budget`), markdown lines; none without ``summary_budget``."""
    sb = result.get("summary_budget")
    if not sb:
        return []
    have = [r for r in result["rows"] if not r.get("error") and r.get("budget")]
    burn = sorted({r["budget"]["burn_in_hours"] for r in have})
    after = "/".join(f"{h:g}" for h in burn) or "24"
    lines = [f"False-alarm budget {sb['budget']:g} episodes / 100 node-days, scored after the first {after} h "
             "streamed: the model's fixed threshold, the budget controller (models/budget.py, in event time from the "
             "labels resolved so far) and the hindsight-best fixed threshold within the budget. Warned: precursor "
             "failures warned ≥ 2 min.", "",
             "| threshold | false alarms / 100 node-days: median (10th–90th) | pooled | warned: median (10th–90th) "
             "| pooled | sites within budget (95 % Wilson) |", "|---|---|---|---|---|---|"]
    for name in ("fixed", "controller", "hindsight"):
        s = sb[name]
        fa, w, p, within = s["false_alarms"], s["warned"], s["pooled"], s["within_budget"]
        lo, hi = within["ci95"]
        lines.append(f"| {'hindsight-best' if name == 'hindsight' else name} | {_num(fa['median']['value'])} "
                     f"({_num(fa['p10']['value'])}–{_num(fa['p90']['value'])}) | "
                     f"{_num(p['false_alarms_per_100_node_days'])} | {_pct(w['median']['value'])} "
                     f"({_pct(w['p10']['value'])}–{_pct(w['p90']['value'])}) | "
                     f"{p['precursor_warned_2min']}/{p['precursor_failures']} ({_pct(p['precursor_warned_2min_share'])}) | "
                     f"{within['sites']}/{within['of']} = {_pct(within['share'])} ({_pct(lo)}–{_pct(hi)}) |")
    n = sb["near_hindsight"]
    lo, hi = n["ci95"]
    lines += ["", f"Controller's warned share within {100 * n['points']:.0f} points of the hindsight-best's: "
              f"{n['sites']} of {n['of']} sites = {_pct(n['share'])} (95 % Wilson: {_pct(lo)}–{_pct(hi)}).", "",
              "| site | fixed: false alarms / 100 nd | warned | controller: false alarms / 100 nd | warned | "
              "threshold (median) | hindsight-best: warned | within: fixed, controller | near hindsight |",
              "|---|---|---|---|---|---|---|---|---|"]
    yes = {True: "yes", False: "no", None: "n/a"}
    for r in have:
        b = r["budget"]
        f, c, h = b["fixed"], b["controller"], b["hindsight"]

        def w(x: dict) -> str:
            return f"{x['precursor_warned_2min']}/{x['precursor_failures']} ({_pct(x['precursor_warned_2min_share'])})"

        lines.append(f"| {r['seed']} | {_num(f['false_alarms_per_100_node_days'])} ({f['false_alarm_episodes']}) | "
                     f"{w(f)} | {_num(c['false_alarms_per_100_node_days'])} ({c['false_alarm_episodes']}) | {w(c)} | "
                     f"{c['threshold']:.4g} | {'none within' if h is None else w(h)} | "
                     f"{yes[f['within_budget']]}, {yes[c['within_budget']]} | {yes[c['near_hindsight']]} |")
    return lines


def sweep_markdown(result: dict) -> str:
    """The report: what was run, the distribution over sites, then one line per site."""
    lines = [f"Randomised sites {result['seeds'][0]}–{result['seeds'][-1]} ({result['sites']}): "
             f"{result['nodes']} nodes, trained on the first {result['train_hours']:g} h ("
             + (result["training"] if isinstance(result["training"], str) else f"training options {result['training']}")
             + f"), the next {result['test_hours']:g} h scored online (the worker's vote, every "
             f"{result['scan_stride_steps']} step(s)"
             + (f", counted from hour {result['after_hours']:g}" if result["after_hours"] else "")
             + f"); {result['thresholding']}; budget {result['false_alarms_budget']:g} false-alarm episodes / "
             "100 node-days. Intervals: 95 % bootstrap over sites, Wilson for the share.", ""]
    lines += summary_lines(result["summary"])
    if "summary_controller" in result:
        lines += [""] + summary_lines(result["summary_controller"], "controller")
    if result.get("summary_budget"):
        lines += [""] + budget_lines(result)
    if result.get("summary_families"):
        lines += [""] + family_lines(result["summary_families"])
    lines += ["", "| site | vendors | families (sudden) | look-alikes | test failures (precursor) | precursor warned "
              "≥ 2 min | false alarms (node-days) | per 100 node-days | within | hindsight at budget | families "
              "seen in training |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        d = r["description"]
        vendors = "+".join(v["generation"] for v in d["vendors"])
        fams = ", ".join(f["name"] for f in d["families"]) + f" ({_pct(d['sudden_share'])})"
        looks = ", ".join(k["name"] for k in d["lookalikes"])
        if r.get("error"):
            lines.append(f"| {r['seed']} | {vendors} | {fams} | {looks} | error: {r['error'][:80]} | | | | | | |")
            continue
        o = r["online"]
        at = r.get("hindsight")
        seen = r.get("families_seen") or {}
        share = seen.get("share")
        lines.append(
            f"| {r['seed']} | {vendors} | {fams} | {looks} | {o['failures']} ({o['precursor_failures']}) | "
            f"{o['precursor_warned_2min']}/{o['precursor_failures']} ({_pct(o['precursor_warned_2min_share'])}) | "
            f"{o['false_alarm_episodes']} ({o['node_days']:.{0 if o['node_days'] >= 10 else 1}f}) | "
            f"{_num(o['false_alarms_per_100_node_days'])} | "
            f"{'yes' if o['within_budget'] else 'no'} | "
            f"{'none' if at is None else _pct(at['precursor_warned_2min_share'])} | "
            f"{'n/a' if share is None else _pct(share)} |")
    return "\n".join(lines) + "\n"
