"""Net node-hours saved per 1,000 node-days on each simulator profile (issue 55's table).

For each profile: a 64-node training history and a later test history of the same site
(fresh seeds), ``hpcguard train failure`` with the site defaults, then ``hpcguard evaluate
savings`` on the test history with the break-even rule on and off. The workload is a
production one (jobs of 2 h median on a warm cluster at 85 % utilisation), not the
simulator's 15-minute default.

    python benchmarks/savings_profiles.py --seed 501 [--profiles classic,mixed] [--hours 24]

Writes ``benchmarks/results/savings_profiles.json`` and prints the markdown rows of
``docs/results.md``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOAD = {"runtime_median_minutes": 120.0, "runtime_sigma": 1.0, "utilization": 0.85, "warmup_hours": 16.0}


def run(argv: list[str]) -> str:
    done = subprocess.run([sys.executable, "-m", "hpcguard", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    from hpcguard.settings import Settings
    from hpcguard.simulators.parity import offline_decisions
    from hpcguard.simulators.profiles import PROFILES
    from hpcguard.simulators.savings_report import evaluate_savings
    from hpcguard.simulators.telemetry import simulate_telemetry

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=501)
    ap.add_argument("--profiles", default=",".join(PROFILES))
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--train-hours", type=float, default=48.0)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "savings_profiles.json"))
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="savings-profiles-"))
    rows = []
    for k, profile in enumerate(args.profiles.split(",")):
        seed = args.seed + 10 * k
        hist, test, model = root / f"{profile}-hist", root / f"{profile}-test", root / f"{profile}-model"
        simulate_telemetry(str(hist), nodes=args.nodes, hours=args.train_hours, seed=seed, profile=profile,
                           **WORKLOAD)
        simulate_telemetry(str(test), nodes=args.nodes, hours=args.hours, seed=seed + 1, profile=profile, **WORKLOAD)
        run(["train", "failure", "--data", str(hist), "--out", str(model), "--seed", str(seed), "--json"])
        row = {"profile": profile, "seed": seed, "nodes": args.nodes, "hours": args.hours}
        predictions = None
        for name, break_even in (("on", True), ("off", False)):
            # the worker's decide path on the test history; the scan once, the policy twice
            settings = Settings().with_overrides(policy=dict(break_even=break_even))
            decided = offline_decisions(str(test), str(model), settings, predictions=predictions)
            predictions = decided["predictions"]
            s = evaluate_savings(test, settings=settings, actions=decided["actions"])
            scale = 1000.0 / s["node_days"]
            row[name] = {"net_per_1000_node_days": s["net_per_1000_node_days"],
                         "ci95": [scale * x for x in s["ci95"]["net"]] if s["ci95"]["net"] else None,
                         "saved": s["saved"], "spent": s["spent"], "failures": len(s["failures"]),
                         "protected": len(s["protected"]), "lost_without": s["without_node_hours_lost"],
                         "by_kind": {kk: {"count": v["count"], "saved": v["saved"], "spent": v["spent"]}
                                     for kk, v in s["by_kind"].items()}}
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"workload": WORKLOAD, "rows": rows}, indent=1))
    print("| profile | failures | protected | net / 1,000 node-days, break-even on (95 %) | off (95 %) |")
    print("|---|---|---|---|---|")
    for r in rows:
        def cell(x):
            ci = x["ci95"]
            return f"{x['net_per_1000_node_days']:+.1f}" + (f" ({ci[0]:+.1f} … {ci[1]:+.1f})" if ci else "")
        print(f"| {r['profile']} | {r['on']['failures']} | {r['on']['protected']} | {cell(r['on'])} | {cell(r['off'])} |")


if __name__ == "__main__":
    main()
