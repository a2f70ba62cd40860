"""Issue 56's "done when", walked on randomised sites with the commands a new site has.

For each seed: simulate the site (``simulators.site_sweep.write_site``), put its ``failures.csv`` and
``anomalies.csv`` aside (a site has neither), then

1. ``hpcguard label --sacct train/slurm/sacct.txt --data train --out train/failures.csv``;
2. ``hpcguard train failure --data train --out model`` (its defaults; the model carries the budget prior
   of its own labelled history);
3. an embedded broker, ``hpcguard worker --shadow --model model`` and a replay of ``test`` at maximum speed
   (``simulators.pipeline_run.run_pipeline``: the stream is event-time, so the pace changes nothing);
4. ``hpcguard report shadow --data test`` (:func:`~hpcguard.simulators.shadow_report.shadow_report`), scored
   on the stream's own labels and, for comparison, on the simulator's truth.

    python benchmarks/shadow_walkthrough.py --seeds 1801-1802 --nodes 32 --workdir /tmp/walk

Prints one line per site and writes ``benchmarks/results/shadow_walkthrough.json``.  One site is a
walk-through, not a figure: its node-days allow about one false-alarm episode.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

KEYS = ("node_days", "failures", "false_alarm_episodes", "false_alarms_per_100_node_days",
        "false_alarms_per_100_node_days_ci95", "budget_verdict", "warned_2min", "recall", "recall_ci95")


def hpcguard(*args: str) -> dict:
    """One ``hpcguard`` command with ``--json``, as a site runs it."""
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "hpcguard", *args, "--json"], check=True, capture_output=True,
                         text=True)
    return {**json.loads(out.stdout), "wall_s": round(time.perf_counter() - t, 1)}


def walk(seed: int, root: Path, nodes: int, train_hours: float, test_hours: float, budget: float,
         cache_dir: str | None) -> dict:
    from hpcguard.connectors.broker import EmbeddedBroker
    from hpcguard.connectors.kafka import wait_for_broker
    from hpcguard.settings import Settings
    from hpcguard.simulators.pipeline_run import run_pipeline
    from hpcguard.simulators.shadow_report import shadow_report
    from hpcguard.simulators.site_sweep import write_site

    site = root / f"site-{seed}"
    shutil.rmtree(site, ignore_errors=True)
    write_site(seed, site, nodes=nodes, train_hours=train_hours, test_hours=test_hours)
    truth = site / "truth"
    truth.mkdir()
    for part in ("train", "test"):
        for name in ("failures.csv", "anomalies.csv"):
            shutil.move(str(site / part / name), str(truth / f"{part}-{name}"))
    label = hpcguard("label", "--sacct", str(site / "train/slurm/sacct.txt"), "--data", str(site / "train"),
                     "--out", str(site / "train/failures.csv"))
    train = hpcguard("train", "failure", "--data", str(site / "train"), "--out", str(site / "model"),
                     *(["--cache-dir", cache_dir] if cache_dir else []))
    work = site / "shadow"
    work.mkdir()
    with EmbeddedBroker(log_path=str(work / "broker.log")) as broker:
        run_id = uuid.uuid4().hex[:8]
        prefix = f"hpcguard-walk-{run_id}"
        settings = Settings.load().with_overrides(
            kafka=dict(bootstrap=broker.bootstrap),
            topics=dict(prefix=prefix, ldms_format=f"{prefix}.ldms.{{schema}}"),
            worker=dict(app_id=f"hpcguard-walk-{run_id}", data_dir=str(work / "worker"), false_alarms=budget),
            adapter=dict(kind="dry-run", audit_log=str(work / "audit.jsonl"), ledger=str(work / "ledger.sqlite")))
        wait_for_broker(settings.kafka)
        env = {"HPCGUARD_TOPICS__PREFIX": prefix, "HPCGUARD_TOPICS__LDMS_FORMAT": f"{prefix}.ldms.{{schema}}",
               "HPCGUARD_WORKER__FALSE_ALARMS": str(budget)}
        t = time.perf_counter()
        run = run_pipeline(settings, site / "test", str(site / "model"), work, 1, None, env, True, 3600.0,
                           settle=True, worker_args=["--shadow"])
        stream_s = round(time.perf_counter() - t, 1)
        own = shadow_report(settings, None, data=site / "test", budget=budget)
        true = shadow_report(settings, truth / "test-failures.csv", data=site / "test", budget=budget)
    return {"seed": seed, "nodes": nodes, "train_hours": train_hours, "test_hours": test_hours, "budget": budget,
            "label": {"counts": label.get("counts"), "wall_s": label["wall_s"]},
            "train": {k: train.get(k) for k in ("version", "failures", "lstm_threshold", "tpr", "fpr",
                                                 "budget_prior_node_days", "wall_s")},
            "stream": {"replayed": run["replayed"], "wall_s": stream_s},
            "stream_labels": {k: own.get(k) for k in KEYS} | {"savings": (own.get("savings") or {}).get("net")},
            "truth": {k: true.get(k) for k in KEYS} | {"savings": (true.get("savings") or {}).get("net")},
            "days": own.get("by_day"), "after_day_1": after_first_day(own.get("by_day") or [])}


def after_first_day(days: list[dict]) -> dict:
    """False-alarm episodes and node-days after the first streamed day (issue 56's targets count there)."""
    later = [d for d in days if d["day"] >= 1]
    node_days = sum(d["node_days"] for d in later)
    episodes = sum(d["false_alarm_episodes"] for d in later)
    return {"node_days": node_days, "false_alarm_episodes": episodes,
            "per_100_node_days": 100.0 * episodes / node_days if node_days else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="1801-1802", help="A-B or a comma list of fresh site seeds.")
    p.add_argument("--nodes", type=int, default=32)
    p.add_argument("--train-hours", type=float, default=48.0)
    p.add_argument("--test-hours", type=float, default=48.0)
    p.add_argument("--false-alarms", type=float, default=2.0)
    p.add_argument("--workdir", default="/tmp/hpcguard-walk")
    p.add_argument("--cache-dir", default=None)
    p.add_argument("--out", default="benchmarks/results/shadow_walkthrough.json")
    a = p.parse_args()
    seeds = (list(range(int(a.seeds.split("-")[0]), int(a.seeds.split("-")[1]) + 1)) if "-" in a.seeds
             else [int(s) for s in a.seeds.split(",")])
    rows = []
    for seed in seeds:
        r = walk(seed, Path(a.workdir), a.nodes, a.train_hours, a.test_hours, a.false_alarms, a.cache_dir)
        rows.append(r)
        s, t = r["stream_labels"], r["truth"]
        print(f"site {seed}: {s['node_days']:.1f} node-days, false alarms {s['false_alarm_episodes']} = "
              f"{s['false_alarms_per_100_node_days']:.2f} per 100 node-days ({s['budget_verdict']}); warned "
              f"{s['warned_2min']}/{s['failures']} (truth {t['warned_2min']}/{t['failures']}); prior "
              f"{r['train']['budget_prior_node_days']} node-days; after day 1 {r['after_day_1']}; net node-hours "
              f"{s['savings']}", flush=True)
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps({"args": vars(a), "rows": rows}, indent=1, default=str))


if __name__ == "__main__":
    main()
