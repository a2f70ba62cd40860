"""Magnitudes of the seeds' trends from the cluster simulator (for docs/results.md; not a test).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/cluster_trends.py [--out benchmarks/results/cluster_trends.json]

* FARS Tab. 3 baseline on 512 nodes, 21,048 jobs (§5.2.1), exponential and Weibull (shape 0.7)
  failures, precision = recall = 0.7: Kiviat gains of SUL-D / JFR-D / FSD-D over FCFS (Figs. 4–5).
* Seed 000 ch. 3: aware vs Daly checkpoint cost for medium-failure-probability jobs.
* Seed 003 Fig. 7.1: fault-tolerance overhead of models B, C, D relative to model A (Young on the PFS).
* Seed 004 Fig. 5.6: makespan with and without CanarIO IO-aware actions over 10 workloads.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from hpcguard.models.policy import SiteCosts
from hpcguard.simulators.cluster import Costs, IoModel, simulate
from hpcguard.simulators.cluster_metrics import cluster_metrics, relative_gains
from hpcguard.simulators.failures import FailureTrace, emulate_predictor, renewal_failures
from hpcguard.simulators.workload import Workload, synthetic_workload

# seed 003 model D figures: live migration and safeguard checkpoint of 60 s each (750 GB at 12.5 GB/s;
# 750 GB to the burst buffer then the PFS at 25 GB/s each)
SITE_60S = SiteCosts(node_memory_gb=750.0, migration_gbs=12.5, bb_write_gbs=25.0, pfs_write_gbs=25.0)


def fars(shape: float) -> dict:
    nodes = 512
    wl = synthetic_workload(np.random.default_rng(0), n_jobs=21048, nodes=nodes, utilization=0.7)
    horizon = float(wl.submit.max() + 10 * 86400)
    fl = renewal_failures(np.random.default_rng(1), nodes, horizon, mtbf_h=14 * 24, mttr_h=0.75, shape=shape)
    pr = emulate_predictor(np.random.default_rng(2), fl, nodes, horizon, 1800.0, 0.7, 0.7)
    res = {p: cluster_metrics(simulate(wl, nodes, fl, p, predictions=pr, node_mtbf_h=14 * 24,
                                       weibull_shape=None if shape == 1 else shape))
           for p in ("fcfs", "sul-d", "jfr-d", "fsd-d")}
    gains = relative_gains(res, "fcfs")
    return {p: {"kiviat_gain": gains[p]["gain_vs_fcfs"], "sul_node_h": res[p]["service_unit_loss_node_h"],
                "failed_jobs": res[p]["failed_jobs"], "job_failure_rate": res[p]["job_failure_rate"],
                "avg_response_time_s": res[p]["avg_response_time_s"]} for p in res} | {
        "failures": len(fl), "precision": pr.measured_precision(), "recall": pr.measured_recall(fl)}


def aware_vs_daly(seeds: int = 6) -> dict:
    nodes, node_mtbf_h, runtime_h, n = 64, 14 * 24.0, 3.0, 300
    wl = Workload(np.zeros(n), np.full(n, runtime_h * 3600), np.full(n, nodes), np.full(n, runtime_h * 3600),
                  np.zeros(n, bool), np.zeros(n), np.arange(n))
    savings = []
    for seed in range(seeds):
        fl = renewal_failures(np.random.default_rng(seed), nodes, 2000 * 3600.0, mtbf_h=node_mtbf_h, mttr_h=0.0)
        c = {}
        for pol in ("daly", "aware"):
            m = cluster_metrics(simulate(wl, nodes, fl, pol, costs=Costs(ckpt_s=600.0, restart_s=0.0),
                                         node_mtbf_h=node_mtbf_h))
            c[pol] = m["checkpoint_node_h"] + m["lost_node_h"]
        savings.append(1 - c["aware"] / c["daly"])
    return {"job_failure_probability": 1 - float(np.exp(-runtime_h * nodes / node_mtbf_h)),
            "saving_vs_daly_mean": float(np.mean(savings)), "saving_vs_daly_min": float(np.min(savings)),
            "saving_vs_daly_max": float(np.max(savings))}


def multilevel() -> dict:
    nodes = 128
    wl = synthetic_workload(np.random.default_rng(5), n_jobs=6000, nodes=nodes, mean_runtime_s=4 * 3600.0,
                            mean_size=16.0, utilization=0.7)
    horizon = float(wl.submit.max() + 20 * 86400)
    out = {}
    for label, shape, scale_mtbf in (("weibull 0.6885 (Titan shape)", 0.6885, 0.5), ("exponential", 1.0, 0.5)):
        fl = renewal_failures(np.random.default_rng(6), nodes, horizon, mtbf_h=14 * 24 * scale_mtbf, shape=shape)
        pr = emulate_predictor(np.random.default_rng(7), fl, nodes, horizon, 1800.0, 0.7, 0.7, lead_s=300.0)
        costs = Costs(ckpt_s=900.0, restart_s=900.0, bb_ckpt_s=60.0, bb_restart_s=60.0,
                  site=SITE_60S)
        ft = {}
        for pol in ("young", "multilevel-bb", "multilevel-safeguard", "multilevel"):
            m = cluster_metrics(simulate(wl, nodes, fl, pol, costs=costs, predictions=pr,
                                         weibull_shape=None if shape == 1 else shape))
            ft[pol] = m["fault_tolerance_overhead_node_h"]
        out[label] = {p: ft[p] / ft["young"] for p in ft}
    return out


def io_aware(workloads: int = 10) -> dict:
    nodes = 100
    io = IoModel(pfs_events=((3600.0, 3 * 3600.0),), event_slowdown=0.85, rerun_probability=0.5)
    none = FailureTrace(np.zeros(0), np.zeros(0, np.int64), np.zeros(0))
    spans = {"young": [], "io-aware": []}
    for seed in range(workloads):
        rng = np.random.default_rng(seed)
        n = 1000
        size = np.clip(np.ceil(rng.exponential(4, n)), 1, nodes).astype(np.int64)
        rt = np.maximum(rng.exponential(3600.0 / 3, n), 60.0)
        wl = Workload(np.sort(rng.uniform(0, 12 * 3600.0, n)), rt, size, 1.5 * rt, rng.random(n) < 0.5,
                      np.zeros(n), np.arange(n))
        for pol in spans:
            spans[pol].append(cluster_metrics(simulate(wl, nodes, none, pol, io=io, seed=seed))["makespan_h"])
    a, b = np.array(spans["young"]), np.array(spans["io-aware"])
    return {"mean_makespan_h_unaware": float(a.mean()), "mean_makespan_h_io_aware": float(b.mean()),
            "mean_reduction": float(1 - b.mean() / a.mean()), "max_reduction": float(np.max(1 - b / a)),
            "workloads_improved": int((b < a).sum()), "workloads": workloads}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/cluster_trends.json")
    args = ap.parse_args()
    out = {"fars_exponential": fars(1.0), "fars_weibull_0.7": fars(0.7), "aware_vs_daly": aware_vs_daly(),
           "multilevel_overhead_vs_young": multilevel(), "io_aware": io_aware()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
