"""The budget controller's parameters against the hindsight-best threshold, on sites an ``evaluate sites`` run
trained (issue 56: within budget, and within 10 points of the hindsight-best's warned share).

For each site: the model ``DIR/site-<seed>/model``, the vote scans of its test window and of its training
history (``benchmarks/budget_first_day.py``'s cache files, made here when missing), the controller primed as
the worker primes it (its training history learnt with its failures) with each combination of the parameters
asked for, scored by :func:`~hpcguard.simulators.budget_eval.budget_rows` after ``--burn-in-h`` (true labels,
every step) beside the fixed and the hindsight-best thresholds.  A replay takes seconds.

    python benchmarks/budget_margin.py --sites-dir DIR --seeds 1700-1702 --cache CACHE \\
        --toward-guard 0.5,0.25,0 --max-recall-loss 0.05 --aim-share 0.5

Prints one JSON line per site and combination; writes ``benchmarks/results/budget_margin.json``.
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import budget_first_day as bfd  # noqa: E402  (the cached scans' maker)

from hpcguard.connectors.model_store import load_model  # noqa: E402
from hpcguard.models.budget import BudgetController  # noqa: E402
from hpcguard.simulators import failure_training as ft  # noqa: E402
from hpcguard.simulators.budget_eval import budget_rows  # noqa: E402
from hpcguard.simulators.site_sweep import write_site  # noqa: E402


def floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sites-dir", required=True, help="an evaluate sites --out directory")
    ap.add_argument("--seeds", required=True, help="first-last site seed")
    ap.add_argument("--cache", required=True, help="vote scans (budget_first_day.py's cache files)")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--train-hours", type=float, default=48.0)
    ap.add_argument("--test-hours", type=float, default=48.0)
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--burn-in-h", type=float, default=24.0, help="scored after this much of the test window")
    ap.add_argument("--aim-share", type=floats, default=[0.5])
    ap.add_argument("--toward-guard", type=floats, default=[0.5])
    ap.add_argument("--max-recall-loss", type=floats, default=[0.05])
    ap.add_argument("--workdir", default="/tmp/hpcguard-budget-margin")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "budget_margin.json"))
    args = ap.parse_args()
    first, last = (int(x) for x in args.seeds.split("-"))
    sites, cache, work = Path(args.sites_dir), Path(args.cache), Path(args.workdir)
    rows = []
    for seed in range(first, last + 1):
        model_dir = sites / f"site-{seed}" / "model"
        ens, _ = load_model(str(model_dir))
        if not (cache / f"site-{seed}-train.npz").exists():
            bfd.one_site(seed, model_dir, args.nodes, args.train_hours, args.test_hours, args.budget, 3600.0,
                         work, cache)
        site = work / f"site-{seed}"
        if not (site / "test").exists():
            write_site(seed, site, nodes=args.nodes, train_hours=args.train_hours, test_hours=args.test_hours,
                       parts=("test",))
        rec = ft.load_recorded(str(site / "test"), ens.grid_s, ft.load_mapping(None))
        scan = np.load(cache / f"site-{seed}.npz")
        train = dict(np.load(cache / f"site-{seed}-train.npz"))
        threshold = float(ens.threshold)
        prior = BudgetController(args.budget, initial=threshold, step_s=ens.grid_s).learn_history(
            train["vote"], train["times"], train["failure_nodes"], train["failure_times"], nodes=train["nodes"]).prior()
        for aim, toward, loss in itertools.product(args.aim_share, args.toward_guard, args.max_recall_loss):
            c = BudgetController.from_prior(prior, budget=args.budget, initial=threshold, step_s=ens.grid_s,
                                            aim_share=aim, toward_guard=toward, max_recall_loss=loss)
            scored = {r["name"]: r for r in budget_rows(scan["vote"], scan["times"], rec.failure_nodes,
                                                        rec.failure_times, rec.t0, threshold, budget=args.budget,
                                                        burn_in_s=3600.0 * args.burn_in_h, step_s=ens.grid_s,
                                                        controller=c)}
            row = {"seed": seed, "aim_share": aim, "toward_guard": toward, "max_recall_loss": loss,
                   "failures": scored["controller"]["failures"], "node_days": scored["controller"]["node_days"],
                   **{f"{name}_{k}": r[k] for name, r in scored.items()
                      for k in ("warned_2min", "false_alarm_episodes", "false_alarms_per_100_node_days")}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"args": {k: v for k, v in vars(args).items()}, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
