"""The budget controller as the worker runs it (``models/budget_epochs.py``: hourly thresholds, labels
from silences) against the per-step controller with ground-truth labels, on randomised sites.

Uses the models an ``hpcguard evaluate sites --out DIR`` run left in ``DIR/site-<seed>/model``,
regenerates each site's test window (the same seed, nodes and hours), scans the online vote and
scores after the first streamed day: the model's fixed threshold; the per-step controller fed the
simulator's failures (what ``evaluate sites`` reports); ``epoch_silence``, the epoch controller fed
the scan's votes only (a step whose history holds a down step has no vote there, so a node whose
history shows one missing step looks silent for a whole history: false failures); and the worker,
which publishes a verdict (without a score) for such a step, with one input partition and with
``--partitions`` (one controller each, each seeing only its nodes).

    python benchmarks/epoch_budget_sites.py --sites-dir DIR --seeds 1100-1105 --nodes 64 \\
        --train-hours 48 --test-hours 72

``--prime``: the worker's controllers (one partition and each of ``--partitions``) start from the model's
``metadata.budget_prior`` exactly as the worker does (``streams.decisions.budget_for`` over an
``EnsemblePredictor`` of the model); a model without one gets the prior ``train threshold`` /
``evaluate sites --prime`` build (``simulators.failure_training.budget_prior``) from the site's training
history (the same seed, nodes and hours).  The diagnostic rows (``per_step_truth``, ``epoch_silence``) stay
unprimed.  ``--cache DIR`` keeps each site's vote scans (``budget_first_day.py``'s files: the same scans).

Writes ``benchmarks/results/epoch_budget_sites.json`` and prints one line per site and the pool (also scored
over the whole test window, first streamed day included: ``whole``, ``pooled_whole``).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from hpcguard.connectors.model_store import load_model
from hpcguard.models.budget import BudgetController, replay
from hpcguard.models.budget_epochs import EpochBudget, epoch_scan
from hpcguard.models.failure.assessment import BURN_IN_S, scored_after
from hpcguard.models.failure.evaluation import online_vote_scan
from hpcguard.models.metrics import wilson_interval
from hpcguard.simulators import failure_training as ft
from hpcguard.simulators.parity import MIN_PRESENT, judge_with_budget
from hpcguard.simulators.site_sweep import write_site

ROWS = ("fixed", "per_step_truth", "epoch_silence", "worker_one_partition", "worker_partitions")
KEYS = ("precursor_warned_2min", "precursor_failures", "false_alarm_episodes", "node_days",
        "false_alarms_per_100_node_days")


def judged_steps(values: np.ndarray, t0: float, grid_s: float, window_end_time, window_steps: int = 16) -> np.ndarray:
    """``(nodes, scan steps)``: the steps the worker publishes a verdict for (``simulators.parity``'s rule: the
    step holds a sample and ``MIN_PRESENT`` of its window does), its vote NaN where the history holds a step
    with no sensor (the node was down or restarting).  Such a verdict keeps the node from looking silent."""
    present = ~np.isnan(values).all(axis=2)
    csum = np.concatenate([np.zeros((present.shape[0], 1)), np.cumsum(present, axis=1)], axis=1)
    last = np.arange(present.shape[1])
    count = csum[:, last + 1] - csum[:, np.maximum(last - window_steps + 1, 0)]
    ok = present & (count >= MIN_PRESENT * window_steps)
    steps = np.rint((np.asarray(window_end_time, float) - t0) / grid_s).astype(int) - 1
    inside = (steps >= 0) & (steps < present.shape[1])
    out = np.zeros((present.shape[0], steps.size), bool)
    out[:, inside] = ok[:, steps[inside]]
    return out


def partition_scan(votes, window_end_time, nodes, partitions: int, make_budget, judged=None) -> dict:
    """The worker's judging of a vote scan ``(nodes, steps)``: the verdicts of the ``judged`` steps (a NaN
    vote there is a verdict without a score; default: the steps with a vote) through
    :func:`~hpcguard.simulators.parity.judge_with_budget`, one controller per input partition."""
    v = np.asarray(votes, float)
    times = np.asarray(window_end_time, float)
    mask = ~np.isnan(v) if judged is None else np.asarray(judged, bool)
    names = [str(n) for n in nodes]
    idx = np.argwhere(mask)
    preds = [{"node": names[i], "sample_time": float(times[k]), "score": None if v[i, k] != v[i, k] else float(v[i, k])}
             for i, k in idx.tolist()]
    judge_with_budget(preds, partitions, make_budget)
    warn = np.zeros(v.shape, bool)
    warn[idx[:, 0], idx[:, 1]] = [p["warn"] for p in preds]
    return {"warn": warn}


def site_prior(ensemble, manifest: dict, train_dir: Path | None, budget: float, kpath: Path | None) -> tuple[dict, str]:
    """The model's ``metadata.budget_prior``, else the one ``train threshold`` / ``evaluate sites --prime``
    build from the site's training history (:func:`~hpcguard.simulators.failure_training.budget_prior`)."""
    prior = (manifest.get("metadata") or {}).get("budget_prior")
    if isinstance(prior, dict):
        return prior, "manifest"
    if kpath is not None and kpath.exists():
        z = dict(np.load(kpath))
        rec = SimpleNamespace(failure_nodes=z["failure_nodes"], failure_times=z["failure_times"],
                              nodes=[str(n) for n in z["nodes"]])
        scan = {"vote": z["vote"], "window_end_time": z["times"]}
        source = "training history (cached scan)"
    else:
        rec = ft.load_recorded(str(train_dir), ensemble.grid_s, ft.load_mapping(None))
        scan = online_vote_scan(ensemble.series_votes, rec.values, rec.t0, ensemble.grid_s, ensemble.history_steps)
        if kpath is not None:
            kpath.parent.mkdir(parents=True, exist_ok=True)
            np.savez(kpath, vote=scan["vote"], times=np.asarray(scan["window_end_time"], float),
                     failure_nodes=np.asarray(rec.failure_nodes, int),
                     failure_times=np.asarray(rec.failure_times, float),
                     nodes=np.asarray([str(n) for n in rec.nodes]), t0=rec.t0)
        source = "training history"
    return ft.budget_prior([(rec, scan)], budget, float(ensemble.threshold), ensemble.grid_s), source


def one_site(seed: int, model_dir: Path, nodes: int, train_hours: float, test_hours: float, budget: float,
             epoch_s: float, work: Path, partitions: int = 4, prime: bool = False, cache: Path | None = None) -> dict:
    started = time.perf_counter()
    ensemble, manifest = load_model(str(model_dir))
    cpath = cache / f"site-{seed}.npz" if cache else None
    kpath = cache / f"site-{seed}-train.npz" if cache else None
    has_prior = isinstance((manifest.get("metadata") or {}).get("budget_prior"), dict)
    need_train = prime and not has_prior and not (kpath and kpath.exists())
    write_site(seed, work / f"site-{seed}", nodes=nodes, train_hours=train_hours, test_hours=test_hours,
               parts=("train", "test") if need_train else ("test",))
    rec = ft.load_recorded(str(work / f"site-{seed}" / "test"), ensemble.grid_s, ft.load_mapping(None))
    if cpath is not None and cpath.exists():
        z = np.load(cpath)
        v, times = z["vote"], np.asarray(z["times"], float)
    else:
        scan = online_vote_scan(ensemble.series_votes, rec.values, rec.t0, ensemble.grid_s, ensemble.history_steps)
        v, times = scan["vote"], np.asarray(scan["window_end_time"], float)
        if cpath is not None:
            cpath.parent.mkdir(parents=True, exist_ok=True)
            np.savez(cpath, vote=v, times=times)
    n = v.shape[0]
    t_end = rec.t0 + rec.values.shape[1] * ensemble.grid_s
    start = rec.t0 + min(BURN_IN_S, 0.5 * (t_end - rec.t0))
    fn, ftm = np.asarray(rec.failure_nodes, int), np.asarray(rec.failure_times, float)
    pre = np.asarray(rec.precursor, bool) if rec.precursor is not None else np.ones(ftm.size, bool)
    args = (times, fn, ftm, pre, n, t_end, start)
    thr = float(ensemble.threshold)
    with np.errstate(invalid="ignore"):
        fixed = scored_after(v >= thr, *args)
    step = replay(v, times, fn, ftm, BudgetController(budget, initial=thr, step_s=ensemble.grid_s), nodes=rec.nodes)
    epoch = epoch_scan(v, times, rec.nodes, EpochBudget(budget, initial=thr, epoch_s=epoch_s, step_s=ensemble.grid_s))
    # diagnostics: which of the stream's two differences costs the budget
    # the worker: EpochBudget(budget=false_alarms, initial=threshold, epoch_s, silence_s=300, step_s=grid), a
    # verdict for every step it judges (a down node's history gives a verdict without a score, not a silence)
    judged = judged_steps(rec.values, rec.t0, ensemble.grid_s, times)

    def make():
        return EpochBudget(budget, initial=thr, epoch_s=epoch_s, silence_s=300.0, step_s=ensemble.grid_s,
                           warmup_node_days=8.0)

    out = {"seed": seed, "threshold": thr, "primed": prime}
    if prime:
        # the worker's factory (streams.decisions.budget_for) over the model with its prior, as agents_windows
        # and simulators.parity call it: one primed EpochBudget per partition
        from hpcguard.settings import Settings
        from hpcguard.streams.decisions import budget_for
        from hpcguard.streams.predictors import EnsemblePredictor

        prior, out["prior_source"] = site_prior(ensemble, manifest, work / f"site-{seed}" / "train", budget, kpath)
        primed_manifest = {**manifest, "metadata": {**manifest.get("metadata", {}), "budget_prior": prior}}
        settings = Settings()
        settings.worker = dataclasses.replace(settings.worker, false_alarms=budget, grid_s=ensemble.grid_s,
                                              budget_epoch_minutes=epoch_s / 60.0, budget_silence_s=300.0,
                                              budget_warmup_node_days=8.0)
        predictor = EnsemblePredictor(ensemble, str(ensemble.version), primed_manifest)
        make = budget_for(settings, predictor)
        first = make()
        out["prior_node_days"] = first.controller.node_days
        out["primed_threshold"] = first.threshold
        assert first.controller.node_days >= first.controller.warmup_node_days, "the prior does not end the warm-up"

    made: list = []

    def traced():
        made.append(make())
        return made[-1]

    worker_1 = partition_scan(v, times, rec.nodes, 1, traced, judged)
    one = made[:]
    made.clear()
    worker = partition_scan(v, times, rec.nodes, partitions, traced, judged)
    out["final_thresholds"] = {"one_partition": [b.controller.threshold for b in one],
                               "partitions": [b.controller.threshold for b in made]}
    for name, w in (("fixed", None), ("per_step_truth", step["warn"]), ("epoch_silence", epoch["warn"]),
                    ("worker_one_partition", worker_1["warn"]), ("worker_partitions", worker["warn"])):
        s = fixed if w is None else scored_after(w, *args)
        out[name] = {k: s[k] for k in KEYS}
        with np.errstate(invalid="ignore"):   # the whole test window, first streamed day included (not tuned on)
            s = scored_after(v >= thr if w is None else w, *args[:-1], rec.t0)
        out.setdefault("whole", {})[name] = {k: s[k] for k in KEYS}
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def pool(scores: list[dict], budget: float) -> dict:
    """Sites within ``budget`` (with a Wilson interval) and the pooled warned, failures, false alarms, node-days."""
    within = sum(s["false_alarms_per_100_node_days"] <= budget for s in scores)
    return {"within": within, "of": len(scores), "within_ci95": wilson_interval(within, len(scores)),
            **{out: sum(s[k] for s in scores) for out, k in (("warned", "precursor_warned_2min"),
                                                            ("failures", "precursor_failures"),
                                                            ("false_alarms", "false_alarm_episodes"),
                                                            ("node_days", "node_days"))}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites-dir", required=True)
    ap.add_argument("--seeds", default="1100-1105")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--train-hours", type=float, default=48.0)
    ap.add_argument("--test-hours", type=float, default=72.0)
    ap.add_argument("--false-alarms", type=float, default=2.0)
    ap.add_argument("--epoch-minutes", type=float, default=60.0)
    ap.add_argument("--partitions", type=int, default=4, help="Kafka input partitions (one budget each)")
    ap.add_argument("--prime", action="store_true",
                    help="start the worker's controllers from the model's budget prior, as the worker does")
    ap.add_argument("--cache", default=None, help="keep each site's vote scans here (budget_first_day.py's files)")
    args = ap.parse_args()
    t_start = time.perf_counter()
    first, last = (int(x) for x in args.seeds.split("-"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="epoch-budget-") as tmp:
        for seed in range(first, last + 1):
            r = one_site(seed, Path(args.sites_dir) / f"site-{seed}" / "model", args.nodes, args.train_hours,
                         args.test_hours, args.false_alarms, 60.0 * args.epoch_minutes, Path(tmp), args.partitions,
                         args.prime, Path(args.cache) if args.cache else None)
            rows.append(r)
            if args.prime:
                print(seed, f"prior ({r['prior_source']}): {r['prior_node_days']:.1f} node-days, threshold "
                            f"{r['primed_threshold']:.6f} (model {r['threshold']:.6f})", flush=True)
            print(seed, f"{r['seconds']:.0f} s;", " · ".join(f"{k}: {r[k]['precursor_warned_2min']}/{r[k]['precursor_failures']} warned, "
                                    f"{r[k]['false_alarms_per_100_node_days']:.2f} / 100 nd"
                                    for k in ROWS), flush=True)
    pooled = {k: pool([r[k] for r in rows], args.false_alarms) for k in ROWS}
    pooled_whole = {k: pool([r["whole"][k] for r in rows], args.false_alarms) for k in ROWS}
    for label, table in (("", pooled), (" (whole window, first day included)", pooled_whole)):
        for k, p in table.items():
            print(f"{k}{label}: within budget {p['within']}/{p['of']}; warned {p['warned']}/{p['failures']}; "
                  f"{100 * p['false_alarms'] / p['node_days']:.2f} false alarms / 100 node-days pooled")
    path = Path(__file__).parent / "results" / "epoch_budget_sites.json"
    path.parent.mkdir(exist_ok=True)
    seconds = round(time.perf_counter() - t_start, 1)
    print(f"{seconds:.0f} s")
    path.write_text(json.dumps({"args": vars(args), "pooled": pooled, "pooled_whole": pooled_whole, "rows": rows,
                                "seconds": seconds}, indent=1,
                               default=float))


if __name__ == "__main__":
    main()
