"""The label-free score (``models/peer_deviation.py``) on randomised sites, under the budget controller.

For each site seed: the same site and test window ``hpcguard evaluate sites`` streams (the drawn
profile, ``--nodes``, the first ``--train-hours`` skipped, the next ``--test-hours`` scored), the
deviation score of every node-step (own past and hardware peers, no label, no training), its vote
run through the budget controller in event time (labels from the failures once their horizon
has passed, as ``evaluate sites`` does for the ensemble) and, for comparison, the hindsight-best
fixed threshold within the budget. Counted after the first streamed day; recall per precursor
family with ``in prior`` as in ``evaluate sites``.

    python benchmarks/label_free_sites.py --seeds 1100-1105 --nodes 64 --train-hours 48 --test-hours 72

Writes ``benchmarks/results/label_free_sites.json`` and prints the markdown rows.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import numpy as np

from hpcguard.models.budget import BudgetController, replay
from hpcguard.models.failure.assessment import BURN_IN_S, hindsight_best, scored_after
from hpcguard.models.metrics import wilson_interval
from hpcguard.models.peer_deviation import deviation_scores, vote_of
from hpcguard.models.warning_eval import score_warnings
from hpcguard.simulators import failure_training as ft
from hpcguard.simulators.random_sites import random_site
from hpcguard.simulators.site_sweep import write_site

GRID_S = 15.0


def one_site(seed: int, nodes: int, train_hours: float, test_hours: float, budget: float, work: Path,
             sensors: list[int]) -> dict:
    _, description = random_site(seed)
    hardware = write_site(seed, work / f"site-{seed}", nodes=nodes, train_hours=train_hours, test_hours=test_hours,
                          parts=("test",))
    rec = ft.load_recorded(str(work / f"site-{seed}" / "test"), GRID_S, ft.load_mapping(None))
    score = deviation_scores(rec.values[:, :, sensors], groups=hardware)
    votes = vote_of(score)
    times = rec.t0 + GRID_S * (np.arange(votes.shape[1]) + 1.0)
    n = votes.shape[0]
    t_end = rec.t0 + rec.values.shape[1] * GRID_S
    start = rec.t0 + min(BURN_IN_S, 0.5 * (t_end - rec.t0))
    fn, ftimes = np.asarray(rec.failure_nodes, int), np.asarray(rec.failure_times, float)
    pre = np.asarray(rec.precursor, bool) if rec.precursor is not None else np.ones(ftimes.size, bool)
    args = (times, fn, ftimes, pre, n, t_end, start)
    c = BudgetController(budget, initial=0.9, step_s=GRID_S)
    run = replay(votes, times, fn, ftimes, c, nodes=rec.nodes)
    ctrl = scored_after(run["warn"], *args)
    best = hindsight_best(votes, *args, budget=budget)
    # per family: the controller's warnings ≥ 2 min ahead of each failure after the burn-in
    node_idx, k = np.nonzero(run["warn"])
    late = ftimes >= start
    lead = np.asarray(score_warnings(node_idx, times[k], fn[late], ftimes[late], 900.0, 600.0,
                                     per_failure=True)["per_failure_lead_minutes"], float)
    fams = np.asarray(rec.family, object)[late] if rec.family is not None else np.array([""] * int(late.sum()))
    builtin = {f["name"]: bool(f.get("builtin")) for f in description["families"]}
    by_family: dict[str, dict] = {}
    for fam, ld, p in zip(fams, lead, pre[late]):
        if not p:
            continue
        f = by_family.setdefault(str(fam), {"failures": 0, "caught": 0, "in_prior": builtin.get(str(fam), False)})
        f["failures"] += 1
        f["caught"] += int(ld >= 2.0)
    return {"seed": seed, "summary": description["summary"], "controller": ctrl, "hindsight": best,
            "by_family": by_family}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1100-1105")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--train-hours", type=float, default=48.0)
    ap.add_argument("--test-hours", type=float, default=72.0)
    ap.add_argument("--false-alarms", type=float, default=2.0)
    ap.add_argument("--sensors", default="cpu_temp,cpu_fan_rpm,cpu_voltage,psu_temp",
                    help="canonical sensors scored (the workload's load, cpu, disk, memory and network "
                         "readings swamp the score: every job start is a deviation)")
    args = ap.parse_args()
    from hpcguard.models.features import CANONICAL_SENSORS

    sensors = [CANONICAL_SENSORS.index(x) for x in args.sensors.split(",")]
    first, last = (int(x) for x in args.seeds.split("-"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="label-free-") as tmp:
        for seed in range(first, last + 1):
            r = one_site(seed, args.nodes, args.train_hours, args.test_hours, args.false_alarms, Path(tmp), sensors)
            rows.append(r)
            c = r["controller"]
            print(f"site {seed}: warned {c['precursor_warned_2min']}/{c['precursor_failures']}, "
                  f"{c['false_alarms_per_100_node_days']:.2f} false alarms / 100 node-days", flush=True)
    within = sum(r["controller"]["false_alarms_per_100_node_days"] <= args.false_alarms for r in rows)
    shares = [r["controller"]["precursor_warned_2min_share"] for r in rows
              if r["controller"]["precursor_failures"]]
    k = sum(r["controller"]["precursor_warned_2min"] for r in rows)
    m = sum(r["controller"]["precursor_failures"] for r in rows)
    pooled_fam: dict[str, dict] = {}
    for r in rows:
        for fam, f in r["by_family"].items():
            p = pooled_fam.setdefault(fam, {"failures": 0, "caught": 0, "in_prior": f["in_prior"]})
            p["failures"] += f["failures"]
            p["caught"] += f["caught"]
    absent = [f for f in pooled_fam.values() if not f["in_prior"]]
    ka, ma = sum(f["caught"] for f in absent), sum(f["failures"] for f in absent)
    summary = {"seeds": args.seeds, "nodes": args.nodes, "sensors": args.sensors, "within_budget": within, "of": len(rows),
               "within_ci95": wilson_interval(within, len(rows)), "median_warned": statistics.median(shares) if shares else None,
               "pooled_warned": [k, m], "absent_families_warned": [ka, ma], "by_family": pooled_fam, "rows": rows}
    out = Path(__file__).parent / "results" / "label_free_sites.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(summary, indent=1, default=float))
    lo, hi = summary["within_ci95"]
    print(f"label-free, controller: within budget {within}/{len(rows)} ({lo:.0%}–{hi:.0%}); warned median "
          f"{summary['median_warned']:.0%}, pooled {k}/{m}; families absent from the prior {ka}/{ma}")
    for fam, f in sorted(pooled_fam.items(), key=lambda x: x[1]["caught"] / max(x[1]["failures"], 1)):
        print(f"| {fam} | {'yes' if f['in_prior'] else 'no'} | {f['caught']}/{f['failures']} |")


if __name__ == "__main__":
    main()
