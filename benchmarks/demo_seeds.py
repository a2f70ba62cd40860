"""The demo's scenario over many seeds: what it saves when the seed is not chosen (issue 55).

For each seed: the demo's model (trained and cached as ``hpcguard demo`` does), the demo's
cluster (32 nodes × 2 h, the demo workload with one hot spare, the PFS scenario's probes), the
offline decisions (equal to the stream's: the demo's parity check) and their node-hours.

    python benchmarks/demo_seeds.py --seeds 1-30

Prints one line per seed and the distribution (median net and the share of seeds with net > 0,
with a Wilson 95 % interval); writes ``benchmarks/results/demo_seeds.json``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from hpcguard.models.metrics import wilson_interval
from hpcguard.settings import Settings
from hpcguard.simulators.demo_run import DEMO_WORKLOAD, DemoConfig, demo_model
from hpcguard.simulators.demo_scenario import pfs_scenario
from hpcguard.simulators.parity import offline_decisions
from hpcguard.simulators.savings_report import evaluate_savings
from hpcguard.simulators.telemetry import DEFAULT_START, simulate_telemetry


def one_seed(seed: int, workdir: Path, nodes: int = 32, hours: float = 2.0) -> dict:
    model, _ = demo_model(DemoConfig(seed=seed, nodes=nodes, hours=hours, quiet=True), workdir)
    data = workdir / "telemetry"
    pfs = pfs_scenario(str(data), start=DEFAULT_START, hours=hours, seed=seed, nodes=nodes)
    simulate_telemetry(str(data), nodes=nodes, hours=hours, seed=seed, io_slowdown=pfs["io_slowdown"],
                       **DEMO_WORKLOAD)
    meta = json.loads((data / "meta.json").read_text())
    settings = Settings.load().with_overrides(policy=dict(hot_spares=",".join(meta.get("hot_spares", []))))
    actions = offline_decisions(str(data), model, settings)["actions"]
    s = evaluate_savings(data, settings=settings, actions=actions, horizon_s=60.0 * settings.policy.quiet_minutes)
    kinds: dict[str, int] = {}
    for a in actions:
        kinds[a["kind"]] = kinds.get(a["kind"], 0) + 1
    return {"seed": seed, "failures": meta["counts"]["failures"], "failures_on_jobs": meta["counts"]["failures_with_job"],
            "actions": kinds, "net": round(s["net"], 2), "saved": round(s["saved"], 2), "spent": round(s["spent"], 2),
            "probes": round(s["by_kind"].get("probes", {}).get("spent", 0.0), 2),
            "false_alarm_actions": len(s["false_alarm_actions"]),
            "protected": [(p["kind"], p["job_id"], round(p["node_hours_saved"], 1)) for p in s["protected"]]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-30", help="first-last seed")
    args = ap.parse_args()
    first, last = (int(x) for x in args.seeds.split("-"))
    rows = []
    for seed in range(first, last + 1):
        with tempfile.TemporaryDirectory(prefix=f"demo-seed-{seed}-") as tmp:
            rows.append(one_seed(seed, Path(tmp)))
        print(json.dumps(rows[-1]), flush=True)
    nets = [r["net"] for r in rows]
    positive = sum(n > 0 for n in nets)
    lo, hi = wilson_interval(positive, len(nets))
    both = sum(1 for r in rows if "migrate" in r["actions"] and "checkpoint" in r["actions"])
    summary = {"seeds": args.seeds, "median_net": statistics.median(nets), "mean_net": statistics.fmean(nets),
               "net_positive": positive, "of": len(nets), "net_positive_ci95": [lo, hi],
               "with_migrate_and_checkpoint": both, "rows": rows}
    out = Path(__file__).parent / "results" / "demo_seeds.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(summary, indent=1))
    print(f"median net {summary['median_net']:+.1f} node-hours (mean {summary['mean_net']:+.1f}); net > 0 on "
          f"{positive}/{len(nets)} seeds (95 % {lo:.0%}–{hi:.0%}); migrate and checkpoint both on {both}")


if __name__ == "__main__":
    main()
