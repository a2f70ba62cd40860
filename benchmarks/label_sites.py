"""``hpcguard label`` on randomised sites: failures found within 5 min, and labels that are true (issue 56).

For each site seed: the randomised site (``simulators/random_sites.py``) simulated with its Slurm
accounting and node events (``sacct.txt``, ``events.txt``), labelled from those and the
telemetry's silences as ``hpcguard label --sacct --events --data`` does, and matched to the
simulator's ground truth (``models.labels.match_labels``: a label within 5 min of a failure on
the same node finds it). Also each evidence alone: Slurm's node events, the silences.

    python benchmarks/label_sites.py --seeds 1200-1219 --nodes 32 --hours 24

Prints the distribution (median and 10th percentile of recall and precision over sites, pooled
with a Wilson 95 % interval); writes ``benchmarks/results/label_sites.json``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import numpy as np

from hpcguard.connectors.failure_labels import grid_sample_times, label_files
from hpcguard.connectors.recorded import load_failures, load_meta, load_sensor_grid
from hpcguard.connectors.sacct import SacctDialect, read_sacct
from hpcguard.connectors.slurm_events import read_events
from hpcguard.models.labels import failure_labels, match_labels
from hpcguard.models.metrics import wilson_interval
from hpcguard.simulators.random_sites import random_site
from hpcguard.simulators.telemetry import simulate_telemetry


def _window(labels: np.ndarray, meta: dict) -> np.ndarray:
    # a silence starts at the grid step of the last sample, up to one step before the window
    return labels[(labels["time"] >= meta["start"] - 15.0) & (labels["time"] < meta["end"])]


def one_site(seed: int, nodes: int, hours: float, work: Path) -> dict:
    profile, description = random_site(seed)
    d = work / f"site-{seed}"
    simulate_telemetry(str(d), nodes=nodes, hours=hours, seed=seed, profile=profile, io=False, slurm_events=True)
    truth, meta = load_failures(d), load_meta(d)
    run = label_files(sacct=d / "slurm" / "sacct.txt", events=d / "slurm" / "events.txt", data=d)
    both = match_labels(_window(run["labels"], meta), truth)
    jobs = [r for r in read_sacct(d / "slurm" / "sacct.txt", dialect=SacctDialect()) if isinstance(r, dict)]
    events = [r for r in read_events(d / "slurm" / "events.txt", tz="UTC") if isinstance(r, dict)]
    names, times, end = grid_sample_times(load_sensor_grid(d))
    alone = {"events": failure_labels(jobs, events), "silence": failure_labels(jobs, [], (names, times), end)}
    keep = ("failures", "found", "labels", "true_labels", "recall", "precision")
    return {"seed": seed, "summary": description["summary"], "all": {k: both[k] for k in keep},
            **{k: {x: m[x] for x in keep} for k, m in ((k, match_labels(_window(v, meta), truth))
                                                         for k, v in alone.items())}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1200-1219")
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--hours", type=float, default=24.0)
    args = ap.parse_args()
    first, last = (int(x) for x in args.seeds.split("-"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="label-sites-") as tmp:
        for seed in range(first, last + 1):
            rows.append(one_site(seed, args.nodes, args.hours, Path(tmp)))
            a = rows[-1]["all"]
            print(f"site {seed}: found {a['found']}/{a['failures']}, true {a['true_labels']}/{a['labels']}", flush=True)
    out: dict = {"seeds": args.seeds, "nodes": args.nodes, "hours": args.hours, "rows": rows}
    for source in ("all", "events", "silence"):
        rec = [r[source]["recall"] for r in rows if r[source]["failures"]]
        pre = [r[source]["precision"] for r in rows if r[source]["labels"]]
        found, fails = sum(r[source]["found"] for r in rows), sum(r[source]["failures"] for r in rows)
        true, labels = sum(r[source]["true_labels"] for r in rows), sum(r[source]["labels"] for r in rows)
        out[source] = {"recall_median": statistics.median(rec), "recall_p10": float(np.percentile(rec, 10)),
                       "precision_median": statistics.median(pre), "precision_p10": float(np.percentile(pre, 10)),
                       "sites_recall_90": sum(x >= 0.9 for x in rec), "sites_precision_90": sum(x >= 0.9 for x in pre),
                       "of": len(rows), "pooled_recall": [found, fails, *wilson_interval(found, fails)],
                       "pooled_precision": [true, labels, *wilson_interval(true, labels)]}
        o = out[source]
        print(f"{source}: recall median {o['recall_median']:.0%} (10th pct {o['recall_p10']:.0%}), pooled "
              f"{found}/{fails} ({o['pooled_recall'][2]:.0%}–{o['pooled_recall'][3]:.0%}); precision median "
              f"{o['precision_median']:.0%} (10th pct {o['precision_p10']:.0%}), pooled {true}/{labels} "
              f"({o['pooled_precision'][2]:.0%}–{o['pooled_precision'][3]:.0%}); sites ≥ 90 %: recall "
              f"{o['sites_recall_90']}/{len(rows)}, precision {o['sites_precision_90']}/{len(rows)}")
    path = Path(__file__).parent / "results" / "label_sites.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=1, default=float))


if __name__ == "__main__":
    main()
