"""The demo's scenario over many seeds: what it saves when the seed is not chosen (issue 55).

For each seed, what ``hpcguard demo`` would do without the broker: the demo's model (trained and
cached as the demo does), the demo's cluster (32 nodes × 2 h, the demo workload with one hot
spare, the PFS scenario's probes, the jobs' batch scripts and the PRIONN classifier pre-trained on
a separate history), the offline decisions on node warnings (equal to the stream's: the demo's
parity check) and CanarIO's (:func:`~hpcguard.simulators.demo_scenario.offline_io_actions`, the
``io`` role replayed in event time), and their node-hours.

    python benchmarks/demo_seeds.py --seeds 1-30

Prints one line per seed and the distribution (median net, the share of seeds with net > 0 with a
Wilson 95 % interval, and how many seeds show each action kind); writes
``benchmarks/results/demo_seeds.json``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from hpcguard.models.metrics import wilson_interval
from hpcguard.settings import Settings
from hpcguard.simulators.demo_run import DemoConfig, demo_model, simulate_demo_telemetry
from hpcguard.simulators.demo_scenario import offline_io_actions, pfs_scenario, train_job_classifier, write_job_scripts
from hpcguard.simulators.parity import offline_decisions
from hpcguard.simulators.savings_report import evaluate_savings
from hpcguard.simulators.telemetry import DEFAULT_START

KINDS = ("checkpoint", "migrate", "drain", "delay", "release", "reschedule")


def one_seed(seed: int, workdir: Path, nodes: int = 32, hours: float = 2.0, cache_dir: str | None = None) -> dict:
    model, _ = demo_model(DemoConfig(seed=seed, nodes=nodes, hours=hours, quiet=True, cache_dir=cache_dir), workdir)
    data = workdir / "telemetry"
    pfs = pfs_scenario(str(data), start=DEFAULT_START, hours=hours, seed=seed, nodes=nodes)
    simulate_demo_telemetry(str(data), nodes, hours, seed, pfs["io_slowdown"])
    write_job_scripts(str(data), seed=seed)  # as run_demo: scripts on the submit events, PRIONN pre-trained
    clf = train_job_classifier(str(workdir / "job_classifier.pt"), seed=seed + 2000)
    meta = json.loads((data / "meta.json").read_text())
    settings = Settings.load().with_overrides(policy=dict(hot_spares=",".join(meta.get("hot_spares", []))))
    actions = offline_decisions(str(data), model, settings)["actions"]
    io = offline_io_actions(str(data), {**pfs["env"], "HPCGUARD_WORKER__JOB_CLASSIFIER": clf["path"]}, settings)
    actions += io["actions"]
    horizon = 60.0 * settings.policy.quiet_minutes
    s = evaluate_savings(data, settings=settings, actions=actions, horizon_s=horizon)
    kinds: dict[str, int] = {}
    for a in actions:
        kinds[a["kind"]] = kinds.get(a["kind"], 0) + 1
    return {"seed": seed, "failures": meta["counts"]["failures"], "failures_on_jobs": meta["counts"]["failures_with_job"],
            "actions": kinds, "net": round(s["net"], 2), "saved": round(s["saved"], 2), "spent": round(s["spent"], 2),
            "ci95_net": [round(x, 2) for x in s["ci95"]["net"]] if s["ci95"]["net"] else None,
            "probes": round(s["by_kind"].get("probes", {}).get("spent", 0.0), 2),
            "degraded_windows": sum(1 for w in io["windows"] if w[1]),
            "false_alarm_actions": len(s["false_alarm_actions"]),
            "protected": [(p["kind"], p["job_id"], round(p["node_hours_saved"], 1)) for p in s["protected"]],
            "all_kinds": all(k in kinds for k in KINDS)
            and {"checkpoint", "migrate"} <= {p["kind"] for p in s["protected"]} and s["net"] > 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-30", help="first-last seed")
    ap.add_argument("--cache-dir", default=None, help="the demo's model cache (default: hpcguard demo's)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "demo_seeds.json"))
    args = ap.parse_args()
    first, last = (int(x) for x in args.seeds.split("-"))
    rows = []
    for seed in range(first, last + 1):
        with tempfile.TemporaryDirectory(prefix=f"demo-seed-{seed}-") as tmp:
            rows.append(one_seed(seed, Path(tmp), cache_dir=args.cache_dir))
        print(json.dumps(rows[-1]), flush=True)
    nets = [r["net"] for r in rows]
    positive = sum(n > 0 for n in nets)
    lo, hi = wilson_interval(positive, len(nets))
    both = sum(1 for r in rows if "migrate" in r["actions"] and "checkpoint" in r["actions"])
    with_kind = {k: sum(1 for r in rows if k in r["actions"]) for k in KINDS}
    every = [r["seed"] for r in rows if r["all_kinds"]]
    summary = {"seeds": args.seeds, "median_net": statistics.median(nets), "mean_net": statistics.fmean(nets),
               "net_positive": positive, "of": len(nets), "net_positive_ci95": [lo, hi],
               "with_migrate_and_checkpoint": both, "with_kind": with_kind,
               "every_kind_protecting_and_net_positive": every, "rows": rows}
    out = Path(args.out)
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(summary, indent=1))
    print(f"median net {summary['median_net']:+.1f} node-hours (mean {summary['mean_net']:+.1f}); net > 0 on "
          f"{positive}/{len(nets)} seeds (95 % {lo:.0%}–{hi:.0%}); migrate and checkpoint both on {both}; "
          f"seeds with each kind: {with_kind}; every kind, checkpoint and migrate protecting, net > 0: {every}")


if __name__ == "__main__":
    main()
