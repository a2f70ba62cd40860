"""Cluster-simulator benchmark (not a test): one simulated year of a 1,024-node cluster
with ≥ 100,000 jobs and LANL-like failures (LANL system 18: 1,024 nodes; Weibull
shape 0.817 / scale 6.63 h system-wide from seed 003 Tab. 7.2 when the file is missing),
timed per policy on one core.  Target (issue 6): ≤ 60 s per run.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_cluster.py [--jobs 110000] [--policies fcfs,sul-d,multilevel]
        [--out benchmarks/results/cluster.json]
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from hpcguard.simulators.cluster import simulate
from hpcguard.simulators.cluster_metrics import cluster_metrics
from hpcguard.simulators.failures import emulate_predictor, lanl_failures, renewal_failures
from hpcguard.simulators.workload import synthetic_workload

LANL = "/work/shared/data/lanl-failures/LA-UR-05-7318-failure-data-1996-2005.csv.xz"
YEAR_S = 365 * 86400.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=110_000)
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--policies", default="fcfs,sul-d,multilevel")
    ap.add_argument("--out", default="benchmarks/results/cluster.json")
    ap.add_argument("--progress", action="store_true", help="rich progress bar on stderr")
    args = ap.parse_args()
    N = args.nodes
    t0 = time.perf_counter()
    mean_ia = YEAR_S / args.jobs
    wl = synthetic_workload(np.random.default_rng(0), n_jobs=args.jobs, nodes=N, mean_size=20.0,
                            mean_runtime_s=0.7 * N * mean_ia / 20.0, mean_interarrival_s=mean_ia)
    horizon = float(wl.submit.max() + 30 * 86400)
    if os.path.exists(LANL):
        fl = lanl_failures(LANL, 18, N, horizon)
    else:
        shape, scale_h = 0.817, 6.6293
        fl = renewal_failures(np.random.default_rng(1), N, horizon, mtbf_h=scale_h * N * 0.9, shape=shape)
    pr = emulate_predictor(np.random.default_rng(2), fl, N, horizon, 1800.0, 0.7, 0.7, lead_s=300.0)
    setup_s = time.perf_counter() - t0
    out = {"nodes": N, "jobs": len(wl), "simulated_days": float(wl.submit.max() / 86400), "failures": len(fl),
           "failure_source": fl.source, "predictions": len(pr), "setup_s": setup_s, "target_s": 60.0, "runs": {}}
    for pol in [p.strip() for p in args.policies.split(",") if p.strip()]:
        if args.progress:
            from rich.progress import Progress

            with Progress(transient=True) as prog:
                task = prog.add_task(pol, total=1.0)
                start = time.perf_counter()
                res = simulate(wl, N, fl, pol, predictions=pr, progress=lambda f: prog.update(task, completed=f))
        else:
            start = time.perf_counter()
            res = simulate(wl, N, fl, pol, predictions=pr)
        wall = time.perf_counter() - start
        m = cluster_metrics(res)
        out["runs"][pol] = {"wall_s": wall, "ratio_to_target": wall / 60.0, "events": res.totals["events"],
                            "events_per_s": res.totals["events"] / wall, "completed_jobs": m["completed_jobs"],
                            "utilization": m["utilization"], "job_failure_rate": m["job_failure_rate"],
                            "service_unit_loss_node_h": m["service_unit_loss_node_h"]}
        print(f"{pol:12s} {wall:6.1f} s  ({res.totals['events']} events, {m['completed_jobs']} jobs, "
              f"util {m['utilization']:.3f})", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
