"""The false-alarm budget over a new site's WHOLE test window, first day included (issue 56).

``epoch_budget_sites.py`` and docs/results.md score after the first streamed day, where the controller
holds the budget.  A site that runs ``hpcguard worker --shadow`` and ``hpcguard report shadow`` counts
from the start, warm-up included.  This benchmark uses the models an ``hpcguard evaluate sites --out DIR``
run left in ``DIR/site-<seed>/model``, regenerates each site's train and test windows (same seed, nodes,
hours), scans the online vote over the test window and runs the worker's judging
(``epoch_budget_sites.partition_scan``: one :class:`~hpcguard.models.budget_epochs.EpochBudget` per input
partition, labels from silences, a verdict without a score for a down node's history) with these warm-ups:

* ``fixed``: the model's own threshold throughout (no controller; reference);
* ``shipped``: the worker as shipped: model threshold until ``warmup`` (8) node-days are learnt;
* ``shipped_w2`` / ``shipped_w16``: the same with a 2 / 16 node-day warm-up;
* ``calibrated``: warm-up threshold = what ``hpcguard train threshold`` sets for the budget when calibrated
  on the site's own TRAINING history (``calibrate_threshold``'s choice: its operating curve and
  ``threshold_for_false_alarms``; what a new site has before it streams), 8 node-days;
  ``calibrated_day1``: that threshold for ``nodes`` node-days (about the first day);
* ``silent``: a warm-up that warns nothing (threshold above every vote), 8 node-days;
* ``primed``: the controller first learns every node-step of the training history with its failures
  (a site has them from ``hpcguard label``), so it leaves its warm-up before the first streamed step.

Each is scored (``models.failure.assessment.scored_after``, by difference for a bounded period) over:
``warmup`` (test start until the controller leaves its warm-up: the first epoch at which it has learnt the
warm-up's node-days), ``rest_day1`` (from then to the end of the first streamed day), ``day1``, ``after_day1``
(what results.md reports) and ``whole`` (what ``report shadow`` counts).  False-alarm episodes per 100
node-days with exact Poisson 95 % intervals, precursor failures warned >= 2 min with Wilson intervals;
per site and pooled over sites.

    python benchmarks/budget_first_day.py --sites-dir DIR --seeds 1600-1602 --nodes 64 \\
        --train-hours 48 --test-hours 48 --cache /tmp/bfd/cache

Writes ``--out`` (default ``benchmarks/results/budget_first_day.json``) and prints the tables.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from epoch_budget_sites import judged_steps, partition_scan  # noqa: E402

from hpcguard.connectors.model_store import load_model  # noqa: E402
from hpcguard.models.budget import BudgetController  # noqa: E402
from hpcguard.models.budget_epochs import EpochBudget  # noqa: E402
from hpcguard.models.failure.assessment import scored_after  # noqa: E402
from hpcguard.models.failure.evaluation import online_vote_scan  # noqa: E402
from hpcguard.models.metrics import poisson_interval, wilson_interval  # noqa: E402
from hpcguard.simulators import failure_training as ft  # noqa: E402
from hpcguard.simulators.site_sweep import write_site  # noqa: E402

DAY_S = 86400.0
PERIODS = ("warmup", "rest_day1", "day1", "after_day1", "whole")
ABOVE_EVERY_VOTE = float(np.nextafter(1.0, 2.0))   # "warns nothing": no vote reaches it


class TracedBudget(EpochBudget):
    """:class:`EpochBudget` that records, at each epoch start, the threshold it moves to and when it left
    its warm-up (the first epoch start at which the controller had learnt ``warmup_node_days``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.warm_end: float | None = None
        self.trace: list[tuple[float, float, float]] = []   # (epoch start, node-days learnt, threshold)

    def _close(self, boundary: float) -> None:
        super()._close(boundary)
        c = self.controller
        if self.warm_end is None and c.node_days >= c.warmup_node_days:
            self.warm_end = boundary
        self.trace.append((boundary, c.node_days, c.threshold))


def scored_between(warn, a: float, b: float, args: tuple) -> dict:
    """``scored_after`` restricted to ``[a, b)``: failures at/after ``a`` and before ``b``, episodes that start
    in it, node-days of it (the difference of the scores from ``a`` and from ``b``)."""
    times, fn, ftm, pre, n, t_end = args
    b = min(b, t_end)
    if b <= a:
        return {"precursor_warned_2min": 0, "precursor_failures": 0, "false_alarm_episodes": 0, "node_days": 0.0}
    s_a = scored_after(warn, times, fn, ftm, pre, n, t_end, a)
    if b >= t_end:
        s_b = {"precursor_warned_2min": 0, "precursor_failures": 0, "false_alarm_episodes": 0, "node_days": 0.0}
    else:
        s_b = scored_after(warn, times, fn, ftm, pre, n, t_end, b)
    return {k: s_a[k] - s_b[k] for k in ("precursor_warned_2min", "precursor_failures", "false_alarm_episodes",
                                         "node_days")}


def _train_scan(ensemble, train_dir: Path, budget: float) -> tuple[dict, dict]:
    """The online vote on the site's training history and what ``hpcguard train threshold --data TRAIN
    --false-alarms budget`` sets from it (``calibrate_threshold``'s choice: its operating curve and
    ``threshold_for_false_alarms``, without writing a model)."""
    from hpcguard.models.failure.assessment import operating_curve
    from hpcguard.models.failure.dataset import healthy_mask
    from hpcguard.models.failure.evaluation import threshold_for_false_alarms

    rec = ft.load_recorded(str(train_dir), ensemble.grid_s, ft.load_mapping(None))
    scan = online_vote_scan(ensemble.series_votes, rec.values, rec.t0, ensemble.grid_s, ensemble.history_steps)
    healthy = healthy_mask(rec.values.shape[0], rec.values.shape[1], rec.t0, ensemble.grid_s,
                           rec.failure_nodes, rec.failure_times)
    pre = rec.precursor if rec.precursor is not None else np.ones(len(rec.failure_times), bool)
    curve = operating_curve(ensemble, [(rec, scan, healthy, pre)], points=60)
    chosen = threshold_for_false_alarms(curve, budget)
    cal = {"threshold": None if chosen is None else float(chosen["threshold"]),
           "train_false_alarms": None if chosen is None else int(chosen["false_alarm_episodes"]),
           "node_days": float(curve[0]["node_days"]),
           "error": None if chosen is not None else "no threshold within the budget on the training history"}
    data = {"vote": scan["vote"], "times": np.asarray(scan["window_end_time"], float),
            "failure_nodes": np.asarray(rec.failure_nodes, int), "failure_times": np.asarray(rec.failure_times, float),
            "nodes": np.asarray([str(n) for n in rec.nodes]), "t0": rec.t0}
    return cal, data


def primed_controller(train: dict, budget: float, step_s: float, initial: float) -> BudgetController:
    """The controller the worker starts from a ``train threshold`` prior (``streams.decisions.budget_for``):
    every node-step of the training history learnt with its labels (the failures a site labels there,
    e.g. ``hpcguard label``), out of its warm-up before the first streamed step."""
    prior = BudgetController(budget, initial=initial, step_s=step_s).learn_history(
        train["vote"], train["times"], train["failure_nodes"], train["failure_times"], nodes=train["nodes"]).prior()
    return BudgetController.from_prior(prior, budget=budget, initial=initial, step_s=step_s)


def one_site(seed: int, model_dir: Path, nodes: int, train_hours: float, test_hours: float, budget: float,
             epoch_s: float, work: Path, cache: Path | None, partitions: int = 1) -> dict:
    ensemble, _ = load_model(str(model_dir))
    site = work / f"site-{seed}"
    cpath = cache / f"site-{seed}.npz" if cache else None
    kpath = cache / f"site-{seed}-train.npz" if cache else None
    need_test = not (cpath and cpath.exists())
    need_train = not (kpath and kpath.exists())
    parts = tuple(p for p, need in (("train", need_train), ("test", True)) if need)
    write_site(seed, site, nodes=nodes, train_hours=train_hours, test_hours=test_hours, parts=parts)
    rec = ft.load_recorded(str(site / "test"), ensemble.grid_s, ft.load_mapping(None))
    if need_test:
        scan = online_vote_scan(ensemble.series_votes, rec.values, rec.t0, ensemble.grid_s, ensemble.history_steps)
        v, times = scan["vote"], np.asarray(scan["window_end_time"], float)
        if cpath:
            cache.mkdir(parents=True, exist_ok=True)
            np.savez(cpath, vote=v, times=times)
    else:
        z = np.load(cpath)
        v, times = z["vote"], z["times"]
    if need_train:
        cal, train = _train_scan(ensemble, site / "train", budget)
        if kpath:
            np.savez(kpath, **train)
            (cache / f"site-{seed}-calibration.json").write_text(json.dumps(cal, indent=1))
    else:
        train = dict(np.load(kpath))
        cal = json.loads((cache / f"site-{seed}-calibration.json").read_text())
    primed = primed_controller(train, budget, ensemble.grid_s, float(ensemble.threshold))
    n = v.shape[0]
    t_end = rec.t0 + rec.values.shape[1] * ensemble.grid_s
    fn, ftm = np.asarray(rec.failure_nodes, int), np.asarray(rec.failure_times, float)
    pre = np.asarray(rec.precursor, bool) if rec.precursor is not None else np.ones(ftm.size, bool)
    args = (times, fn, ftm, pre, n, t_end)
    thr = float(ensemble.threshold)
    cal_thr = cal["threshold"] if cal["threshold"] is not None else thr
    judged = judged_steps(rec.values, rec.t0, ensemble.grid_s, times)

    # (warm-up threshold, warm-up node-days); "primed": the controller primed with the training history
    variants = {"shipped": (thr, 8.0), "shipped_w2": (thr, 2.0), "shipped_w16": (thr, 16.0),
                "calibrated": (cal_thr, 8.0), "calibrated_day1": (cal_thr, float(nodes)),
                "silent": (ABOVE_EVERY_VOTE, 8.0), "primed": (None, None)}
    out = {"seed": seed, "threshold": thr, "calibration": cal, "train_t0": float(train["t0"]), "primed_threshold":
           primed.threshold, "primed_node_days": primed.node_days, "failures": int(ftm.size),
           "precursor_failures": int(pre.sum()), "t0": rec.t0, "t_end": t_end, "variants": {}}
    with np.errstate(invalid="ignore"):
        fixed_warn = v >= thr
    warns = {"fixed": (fixed_warn, None, [])}
    for name, (initial, warm) in variants.items():
        made: list[TracedBudget] = []

        def make(initial=initial, warm=warm):
            if initial is None:   # primed: a copy of the primed controller (its state is JSON)
                made.append(TracedBudget(budget, epoch_s=epoch_s, silence_s=300.0, step_s=ensemble.grid_s,
                                         controller=BudgetController.from_state(primed.to_state())))
                made[-1].warm_end = rec.t0
            else:
                made.append(TracedBudget(budget, initial=initial, epoch_s=epoch_s, silence_s=300.0,
                                         step_s=ensemble.grid_s, warmup_node_days=warm))
            return made[-1]

        w = partition_scan(v, times, rec.nodes, partitions, make, judged)["warn"]
        ends = [b.warm_end for b in made]
        warm_end = max(e if e is not None else t_end for e in ends)   # the last partition to leave it
        warns[name] = (w, warm_end, made[0].trace)
    # the shipped controller's warm-up end splits the first day for "fixed" too
    for name, (w, warm_end, trace) in warns.items():
        we = warm_end if warm_end is not None else warns["shipped"][1]
        bounds = {"warmup": (rec.t0, we), "rest_day1": (we, rec.t0 + DAY_S), "day1": (rec.t0, rec.t0 + DAY_S),
                  "after_day1": (rec.t0 + DAY_S, t_end), "whole": (rec.t0, t_end)}
        row = {p: scored_between(w, a, b, args) for p, (a, b) in bounds.items()}
        row["warm_end_hours"] = (we - rec.t0) / 3600.0
        row["thresholds"] = [[round((t - rec.t0) / 3600.0, 2), round(nd, 2), th] for t, nd, th in trace[:30]]
        out["variants"][name] = row
    return out


def cell(d: dict) -> dict:
    """Rates and intervals of a count cell."""
    nd, fa, w, f = d["node_days"], d["false_alarm_episodes"], d["precursor_warned_2min"], d["precursor_failures"]
    lo, hi = poisson_interval(fa, nd)
    rlo, rhi = wilson_interval(w, f)
    return {**d, "rate": 100.0 * fa / nd if nd > 0 else float("nan"), "rate_ci95": (100.0 * lo, 100.0 * hi),
            "recall": w / f if f else float("nan"), "recall_ci95": (rlo, rhi)}


def fmt(c: dict) -> str:
    return (f"{c['false_alarm_episodes']:3d} FA/{c['node_days']:6.1f} nd = {c['rate']:6.2f} "
            f"({c['rate_ci95'][0]:.2f}-{c['rate_ci95'][1]:.2f}); warned {c['precursor_warned_2min']}/"
            f"{c['precursor_failures']} = {c['recall']:.2f} ({c['recall_ci95'][0]:.2f}-{c['recall_ci95'][1]:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites-dir", required=True)
    ap.add_argument("--seeds", default="1600-1602", help="a range A-B or a comma list")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--train-hours", type=float, default=48.0)
    ap.add_argument("--test-hours", type=float, default=48.0)
    ap.add_argument("--false-alarms", type=float, default=2.0)
    ap.add_argument("--epoch-minutes", type=float, default=60.0)
    ap.add_argument("--partitions", type=int, default=1, help="Kafka input partitions (the default setting: 1)")
    ap.add_argument("--cache", default=None, help="keep each site's vote scan and calibration here")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "budget_first_day.json"))
    args = ap.parse_args()
    if "-" in args.seeds:
        first, last = (int(x) for x in args.seeds.split("-"))
        seeds = list(range(first, last + 1))
    else:
        seeds = [int(x) for x in args.seeds.split(",")]
    cache = Path(args.cache) if args.cache else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="budget-first-day-") as tmp:
        for seed in seeds:
            model = Path(args.sites_dir) / f"site-{seed}" / "model"
            if not (model / "manifest.json").exists() and not model.exists():
                print(seed, "no model: skipped", flush=True)
                continue
            r = one_site(seed, model, args.nodes, args.train_hours, args.test_hours, args.false_alarms,
                         60.0 * args.epoch_minutes, Path(tmp), cache, args.partitions)
            rows.append(r)
            cal = r["calibration"]
            print(f"site {seed}: test t0 {r['t0']:.0f}, train t0 {r['train_t0']:.0f}; primed threshold "
                  f"{r['primed_threshold']:.6f} after {r['primed_node_days']:.1f} node-days", flush=True)
            print(f"site {seed}: model threshold {r['threshold']:.5f}, calibrated on train "
                  f"{cal['threshold'] if cal['threshold'] is None else round(cal['threshold'], 5)}"
                  f"{'' if cal['error'] is None else ' (' + cal['error'][:80] + ')'}", flush=True)
            for name, row in r["variants"].items():
                print(f"  {name:14s} warm-up ends {row['warm_end_hours']:5.1f} h", flush=True)
                for p in PERIODS:
                    print(f"    {p:10s} {fmt(cell(row[p]))}", flush=True)
    pooled = {}
    for name in rows[0]["variants"] if rows else []:
        pooled[name] = {}
        for p in PERIODS:
            tot = {k: sum(r["variants"][name][p][k] for r in rows)
                   for k in ("precursor_warned_2min", "precursor_failures", "false_alarm_episodes", "node_days")}
            c = cell(tot)
            rates = [cell(r["variants"][name][p])["rate"] for r in rows if r["variants"][name][p]["node_days"] > 0]
            c["sites_within_budget"] = sum(x <= args.false_alarms for x in rates)
            c["sites"] = len(rates)   # those with node-days in the period
            pooled[name][p] = c
    print(f"pooled over {len(rows)} sites ({', '.join(str(r['seed']) for r in rows)}):")
    for name, per in pooled.items():
        print(f"  {name}")
        for p in PERIODS:
            print(f"    {p:10s} {fmt(per[p])}; within {per[p]['sites_within_budget']}/{per[p]['sites']}")
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"args": vars(args), "pooled": pooled,
                                "rows": [{**r, "variants": {k: {**v, **{p: cell(v[p]) for p in PERIODS}}
                                                            for k, v in r["variants"].items()}} for r in rows]},
                               indent=1, default=float))


if __name__ == "__main__":
    main()
