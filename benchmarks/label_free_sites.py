"""The label-free scores (``models/peer_deviation.py``) on randomised sites, under the budget controller.

For each site seed: the same site and test window ``hpcguard evaluate sites`` streams (the drawn
profile, ``--nodes``, the first ``--train-hours`` skipped, the next ``--test-hours`` scored), a
label-free score of every node-step (no label, no training), its vote run through the budget
controller in event time (labels from the failures once their horizon has passed, as ``evaluate
sites`` does for the ensemble) and, for comparison, the hindsight-best fixed threshold within the
budget. Counted after the first streamed day; recall per precursor family with ``in prior`` as in
``evaluate sites``.

Scores (``--scores``, comma-separated, all from one simulation of each site):

* ``load-peer`` — :func:`~hpcguard.models.peer_deviation.load_peer_deviations` (own past at the same
  load, rack-and-hardware and job peers) per sensor family, each family over its running 99.9th
  percentile, the largest over ``--families``
  (:func:`~hpcguard.models.peer_deviation.family_vote_score`);
* ``family:<name>`` — one family of the same deviations alone (e.g. ``family:load``);
* ``own-past`` — the first try, :func:`~hpcguard.models.peer_deviation.deviation_scores` over
  ``--sensors`` (own exponentially weighted past and hardware peers).

The job on each node at each step is the LDMS ``job_id`` column of the recorded ``loadavg`` file
(what a site's samplers record); racks come from the recording's ``meta.json``.

    python benchmarks/label_free_sites.py --seeds 1500-1505 --nodes 64 --train-hours 48 --test-hours 72 \\
        --scores load-peer,family:load,own-past

Writes ``benchmarks/results/label_free_sites.json`` (``--out``) and prints the markdown rows.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from hpcguard.models.budget import BudgetController, replay
from hpcguard.models.failure.assessment import BURN_IN_S, hindsight_best, scored_after
from hpcguard.models.metrics import wilson_interval
from hpcguard.models.peer_deviation import (VOTE_FAMILIES, calibrated, deviation_scores, family_vote_score,
                                            load_peer_deviations, vote_of)
from hpcguard.models.warning_eval import score_warnings
from hpcguard.simulators import failure_training as ft
from hpcguard.simulators.random_sites import random_site
from hpcguard.simulators.site_sweep import write_site

GRID_S = 15.0


def job_grid(data_dir: Path, nodes: list[str], t0: float, steps: int) -> np.ndarray:
    """The LDMS ``job_id`` on each node at each grid step ``(nodes, steps)`` (0: none or no sample),
    from the recording's ``ldms/loadavg*`` file, steps placed as the sensor grid places them."""
    from hpcguard.connectors.recorded import read_store_csv_arrays

    jobs = np.zeros((len(nodes), steps), np.int64)
    files = sorted(Path(data_dir, "ldms").glob("loadavg*"))
    if not files:
        return jobs
    times, names, cols = read_store_csv_arrays(files[0])
    if "job_id" not in cols:
        return jobs
    index = {n: i for i, n in enumerate(nodes)}
    node = np.array([index.get(str(x), -1) for x in names], int)
    step = np.floor(times / GRID_S).astype(np.int64) - int(round(t0 / GRID_S))
    jid = cols["job_id"]
    ok = (node >= 0) & (step >= 0) & (step < steps) & np.isfinite(jid)
    jobs[node[ok], step[ok]] = jid[ok].astype(np.int64)
    return jobs


def score_site(rec, hardware, racks, jobs, specs: list[str], families: tuple[str, ...], sensors: list[int]) -> dict:
    """Each score of ``specs`` as ``(votes (nodes, steps), seconds)``."""
    out: dict[str, tuple[np.ndarray, float]] = {}
    fam, fam_s = None, 0.0
    for spec in specs:
        t = time.perf_counter()
        if spec == "own-past":
            votes = vote_of(deviation_scores(rec.values[:, :, sensors], groups=hardware))
        elif spec == "load-peer" or spec.startswith("family:"):
            if fam is None:
                fam = load_peer_deviations(rec.values, hardware=hardware, racks=racks, jobs=jobs)
                fam_s = time.perf_counter() - t
            if spec == "load-peer":
                votes = vote_of(family_vote_score(fam, families), scale=1.0)
            else:
                votes = vote_of(calibrated(fam[spec.split(":", 1)[1]]), scale=1.0)
        else:
            raise SystemExit(f"unknown score {spec!r} (load-peer, family:<name>, own-past)")
        out[spec] = (votes, time.perf_counter() - t + (fam_s if spec != "own-past" else 0.0))
    return out


def judge(votes, rec, budget: float, builtin: dict) -> dict:
    """The controller's and the hindsight-best's figures of one score on one site, and recall per family."""
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
    # per family: the controller's warnings >= 2 min ahead of each failure after the burn-in
    node_idx, k = np.nonzero(run["warn"])
    late = ftimes >= start
    lead = np.asarray(score_warnings(node_idx, times[k], fn[late], ftimes[late], 900.0, 600.0,
                                     per_failure=True)["per_failure_lead_minutes"], float)
    fams = np.asarray(rec.family, object)[late] if rec.family is not None else np.array([""] * int(late.sum()))
    by_family: dict[str, dict] = {}
    for fam, ld, p in zip(fams, lead, pre[late]):
        if not p:
            continue
        f = by_family.setdefault(str(fam), {"failures": 0, "caught": 0, "in_prior": builtin.get(str(fam), False)})
        f["failures"] += 1
        f["caught"] += int(ld >= 2.0)
    return {"controller": ctrl, "hindsight": best, "by_family": by_family}


def one_site(seed: int, nodes: int, train_hours: float, test_hours: float, budget: float, work: Path,
             specs: list[str], families: tuple[str, ...], sensors: list[int]) -> dict:
    _, description = random_site(seed)
    hardware = write_site(seed, work / f"site-{seed}", nodes=nodes, train_hours=train_hours, test_hours=test_hours,
                          parts=("test",))
    data = work / f"site-{seed}" / "test"
    rec = ft.load_recorded(str(data), GRID_S, ft.load_mapping(None))
    meta = json.loads((data / "meta.json").read_text())
    racks = [meta.get("racks", {}).get(name, 0) for name in rec.nodes]
    jobs = job_grid(data, rec.nodes, rec.t0, rec.values.shape[1])
    builtin = {f["name"]: bool(f.get("builtin")) for f in description["families"]}
    scores = score_site(rec, hardware, racks, jobs, specs, families, sensors)
    return {"seed": seed, "summary": description["summary"],
            "scores": {spec: {**judge(v, rec, budget, builtin), "seconds": round(sec, 1)}
                       for spec, (v, sec) in scores.items()}}


def summarise(rows: list[dict], spec: str, budget: float) -> dict:
    """Sites within the budget, the per-site median warned share, the pooled count (Wilson interval), the
    families absent from the prior, recall per family, for score ``spec``."""
    rs = [r["scores"][spec] for r in rows]
    within = sum(r["controller"]["false_alarms_per_100_node_days"] <= budget for r in rs)
    shares = [r["controller"]["precursor_warned_2min_share"] for r in rs if r["controller"]["precursor_failures"]]
    k = sum(r["controller"]["precursor_warned_2min"] for r in rs)
    m = sum(r["controller"]["precursor_failures"] for r in rs)
    hk = sum(r["hindsight"]["precursor_warned_2min"] if r["hindsight"] else 0 for r in rs)
    pooled: dict[str, dict] = {}
    for r in rs:
        for fam, f in r["by_family"].items():
            p = pooled.setdefault(fam, {"failures": 0, "caught": 0, "in_prior": f["in_prior"]})
            p["failures"] += f["failures"]
            p["caught"] += f["caught"]
    absent = [f for f in pooled.values() if not f["in_prior"]]
    ka, ma = sum(f["caught"] for f in absent), sum(f["failures"] for f in absent)
    return {"score": spec, "within_budget": within, "of": len(rs),
            "within_ci95": list(wilson_interval(within, len(rs))),
            "median_warned": statistics.median(shares) if shares else None, "per_site_warned": shares,
            "pooled_warned": [k, m], "pooled_ci95": list(wilson_interval(k, m)), "hindsight_warned": hk,
            "absent_families_warned": [ka, ma], "absent_ci95": list(wilson_interval(ka, ma)),
            "false_alarms_per_100_node_days": [r["controller"]["false_alarms_per_100_node_days"] for r in rs],
            "by_family": pooled}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1100-1105", help="first-last site seeds")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--train-hours", type=float, default=48.0)
    ap.add_argument("--test-hours", type=float, default=72.0)
    ap.add_argument("--false-alarms", type=float, default=2.0, help="budget: false-alarm episodes / 100 node-days")
    ap.add_argument("--scores", default="load-peer", help="comma-separated: load-peer, family:<name>, own-past")
    ap.add_argument("--families", default=",".join(VOTE_FAMILIES),
                    help="the families load-peer takes the largest of (thermal, power, load, memory, disk, network)")
    ap.add_argument("--sensors", default="cpu_temp,cpu_fan_rpm,cpu_voltage,psu_temp",
                    help="canonical sensors the own-past score takes (the workload's load, cpu, disk, memory and "
                         "network readings swamp it: every job start is a deviation)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "label_free_sites.json"))
    args = ap.parse_args()
    from hpcguard.models.features import CANONICAL_SENSORS

    sensors = [CANONICAL_SENSORS.index(x) for x in args.sensors.split(",")]
    specs = [s.strip() for s in args.scores.split(",") if s.strip()]
    families = tuple(f.strip() for f in args.families.split(",") if f.strip())
    first, last = (int(x) for x in args.seeds.split("-"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="label-free-") as tmp:
        for seed in range(first, last + 1):
            r = one_site(seed, args.nodes, args.train_hours, args.test_hours, args.false_alarms, Path(tmp),
                         specs, families, sensors)
            rows.append(r)
            for spec, s in r["scores"].items():
                c = s["controller"]
                print(f"site {seed} {spec}: warned {c['precursor_warned_2min']}/{c['precursor_failures']}, "
                      f"{c['false_alarms_per_100_node_days']:.2f} false alarms / 100 node-days "
                      f"({s['seconds']:.0f} s)", flush=True)
    summary = {"seeds": args.seeds, "nodes": args.nodes, "train_hours": args.train_hours,
               "test_hours": args.test_hours, "budget": args.false_alarms, "families": families,
               "sensors": args.sensors, "scores": {spec: summarise(rows, spec, args.false_alarms) for spec in specs},
               "rows": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1, default=float))
    print("| score | sites within budget | median site warned | precursor failures warned >= 2 min (95 % CI) "
          "| hindsight-best | families absent from the prior |")
    print("|---|---|---|---|---|---|")
    for spec, s in summary["scores"].items():
        (k, m), (lo, hi) = s["pooled_warned"], s["pooled_ci95"]
        ka, ma = s["absent_families_warned"]
        med = s["median_warned"]
        print(f"| {spec} | {s['within_budget']}/{s['of']} | {'-' if med is None else f'{med:.0%}'} | {k}/{m} "
              f"({lo:.0%}–{hi:.0%}) | {s['hindsight_warned']}/{m} | {ka}/{ma} |")
    for spec, s in summary["scores"].items():
        print(f"\n{spec}, per family:")
        for fam, f in sorted(s["by_family"].items(), key=lambda x: -x[1]["caught"] / max(x[1]["failures"], 1)):
            print(f"| {fam} | {'yes' if f['in_prior'] else 'no'} | {f['caught']}/{f['failures']} |")


if __name__ == "__main__":
    main()
