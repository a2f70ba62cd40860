"""Cluster simulator core: EASY backfilling, failure/restart accounting, predictor emulation, metrics, CLI."""
from __future__ import annotations

import json

import numpy as np
import pytest

from hpcguard.simulators.cluster import Costs, simulate
from hpcguard.simulators.cluster_metrics import cluster_metrics, kiviat_k, relative_gains
from hpcguard.simulators.failures import (FailureTrace, emulate_predictor, parse_duration_s, parse_failure_spec,
                                          parse_predictor_spec, renewal_failures)
from hpcguard.simulators.workload import Workload, synthetic_workload


def _wl(submit, runtime, size, estimate=None):
    n = len(submit)
    rt = np.asarray(runtime, float)
    return Workload(submit=np.asarray(submit, float), runtime=rt, size=np.asarray(size, np.int64),
                    estimate=rt if estimate is None else np.asarray(estimate, float), io_sensitive=np.zeros(n, bool),
                    io_demand=np.zeros(n), job_id=np.arange(n))


def _no_failures():
    return FailureTrace(np.zeros(0), np.zeros(0, np.int64), np.zeros(0))


def test_easy_backfilling_hand_checked():
    # 4 nodes. J0 (t=0, 3 nodes, 10 s) runs; J1 (t=1, 4 nodes) waits: reservation at t=10 with 0 extra nodes.
    # J2 (t=2, 1 node, 5 s) ends by 7 ≤ 10 → backfilled at 2.  J3 (t=3, 1 node, 20 s) would end at 23 > 10 and
    # there are no extra nodes → it must wait for J1 (10..20) and starts at 20.
    # J4 (t=4, 1 node, 6 s): the free node is held by J2 until 7, and 7 + 6 > 10 → it also starts at 20.
    wl = _wl([0, 1, 2, 3, 4], [10, 10, 5, 20, 6], [3, 4, 1, 1, 1])
    res = simulate(wl, 4, _no_failures(), "none")
    assert res.first_start.tolist() == [0, 10, 2, 20, 20]
    assert res.completion.tolist() == [10, 20, 7, 40, 26]
    # FCFS order of the reservation is kept: J1 never waits for a later job
    assert res.first_start[1] == 10


def test_backfill_uses_extra_nodes():
    # 4 nodes: J0 2 nodes 10 s; J1 needs 3 → shadow 10 with 1 extra node; J2 (1 node, 100 s) may use the extra.
    wl = _wl([0, 1, 2], [10, 10, 100], [2, 3, 1])
    res = simulate(wl, 4, _no_failures(), "none")
    assert res.first_start.tolist() == [0, 10, 2]


def test_failure_loses_work_since_checkpoint_and_restarts():
    # one node, one job of 1000 s without checkpoints; the node fails at 400 s and is repaired after 100 s
    wl = _wl([0], [1000], [1])
    fl = FailureTrace(np.array([400.0]), np.array([0]), np.array([100.0]))
    res = simulate(wl, 1, fl, "none", costs=Costs(restart_s=180.0))
    assert res.failed.tolist() == [1]
    assert res.completion[0] == pytest.approx(500 + 180 + 1000)
    m = cluster_metrics(res)
    assert m["lost_node_h"] == pytest.approx(400 / 3600)
    assert m["service_unit_loss_node_h"] == pytest.approx((400 + 180) / 3600)
    assert m["job_failure_rate"] == 1.0
    # failure slowdown: (lost 400 + wait 100 + restart 180) / runtime 1000
    assert m["failure_slowdown"] == pytest.approx(0.68)
    assert m["useful_node_h"] == pytest.approx(1000 / 3600)


def test_checkpoints_bound_the_loss():
    # same failure with Young checkpoints: the loss is below one interval
    wl = _wl([0], [20000], [1])
    fl = FailureTrace(np.array([9000.0]), np.array([0]), np.array([100.0]))
    res = simulate(wl, 1, fl, "young", node_mtbf_h=24.0)
    m = cluster_metrics(res)
    tau = res.totals["mean_interval_h"] * 3600
    assert 0 < m["lost_node_h"] * 3600 < tau
    assert m["checkpoint_node_h"] > 0


def test_predictor_emulation_matches_precision_and_recall():
    rng = np.random.default_rng(0)
    horizon = 200 * 86400.0
    fl = renewal_failures(rng, 256, horizon, mtbf_h=24 * 14, mttr_h=0.75)
    pr = emulate_predictor(np.random.default_rng(1), fl, 256, horizon, 1800.0, precision=0.7, recall=0.7,
                           lead_s=300)
    assert pr.measured_recall(fl) == pytest.approx(0.7, abs=0.05)
    assert pr.measured_precision() == pytest.approx(0.7, abs=0.03)
    true = pr.failure_index >= 0
    ft = fl.time[pr.failure_index[true]]
    assert np.all(ft >= pr.window_start[true]) and np.all(ft < pr.window_end[true])
    assert np.all(pr.window_start - pr.issued == 300)


def test_renewal_failures_rate_and_specs():
    fl = renewal_failures(np.random.default_rng(0), 500, 365 * 86400.0, mtbf_h=100.0, mttr_h=1.0, shape=0.7)
    assert 500 * 365 * 24 / len(fl) == pytest.approx(101.0, rel=0.1)
    assert parse_duration_s("5m") == 300 and parse_predictor_spec("precision=0.6,recall=0.8,lead=2m") == {
        "precision": 0.6, "recall": 0.8, "lead_s": 120.0}
    for bad in ("weibull:shape=0.7", "gamma:mtbf=3", "lanl:onlyfile", "exponential:mtbf=x"):
        with pytest.raises(ValueError):
            parse_failure_spec(bad, 4, 1000.0, np.random.default_rng(0))


def test_kiviat_k_and_gains():
    assert kiviat_k([1] * 6, [1] * 6) == pytest.approx(3 * np.sqrt(3) / 2)
    assert kiviat_k([0.5] * 6, [1] * 6) == pytest.approx(kiviat_k([1] * 6, [1] * 6) / 4)
    base = {"avg_response_time_s": 100.0, "utilization": 0.5, "throughput_jobs_per_h": 2.0,
            "service_unit_loss_node_h": 10.0, "job_failure_rate": 0.1, "failure_slowdown": 0.2,
            "fault_tolerance_overhead_node_h": 30.0}
    better = dict(base, service_unit_loss_node_h=5.0, job_failure_rate=0.05, fault_tolerance_overhead_node_h=20.0)
    g = relative_gains({"a": base, "b": better}, "a")
    assert g["a"]["gain_vs_a"] == 0 and g["b"]["gain_vs_a"] > 0 and g["b"]["node_hours_saved"] == 10.0


def test_bad_inputs():
    wl = _wl([0], [10], [8])
    with pytest.raises(ValueError, match="nodes"):
        simulate(wl, 4, _no_failures(), "none")
    with pytest.raises(ValueError, match="unknown policy"):
        simulate(_wl([0], [10], [1]), 4, _no_failures(), "nope")


def test_all_jobs_complete_under_failures():
    wl = synthetic_workload(np.random.default_rng(3), n_jobs=800, nodes=64)
    fl = renewal_failures(np.random.default_rng(4), 64, 40 * 86400.0, mtbf_h=72.0)
    res = simulate(wl, 64, fl, "fcfs")
    m = cluster_metrics(res)
    assert m["completed_jobs"] == 800 and m["failures_on_jobs"] > 0
    # node-hour balance: busy = useful + checkpoint + lost + restart (no IO slowdown here)
    t = res.totals
    assert t["busy"] == pytest.approx(t["useful"] + t["checkpoint"] + t["lost"] + t["restart"], rel=1e-9)


def test_cli_simulate_cluster_json():
    from typer.testing import CliRunner

    from hpcguard.cli import app

    out = CliRunner().invoke(app, ["simulate", "cluster", "--workload", "synthetic", "--nodes", "64", "--jobs", "300",
                                   "--failures", "weibull:shape=0.7,mtbf=200", "--policy", "sul-d",
                                   "--predictor", "precision=0.7,recall=0.7,lead=5m", "--seed", "1", "--json"])
    assert out.exit_code == 0, out.output
    m = json.loads(out.stdout)["metrics"]
    for key in ("avg_response_time_s", "utilization", "throughput_jobs_per_h", "service_unit_loss_node_h",
                "job_failure_rate", "failure_slowdown", "makespan_h", "useful_node_h", "checkpoint_node_h",
                "lost_node_h"):
        assert key in m
    bad = CliRunner().invoke(app, ["simulate", "cluster", "--failures", "weibull:mtbf", "--jobs", "10"])
    assert bad.exit_code != 0 and "failure spec" in bad.output


def test_cli_evaluate_policies_table_json_and_plot(tmp_path):
    from typer.testing import CliRunner

    from hpcguard.cli import app

    png = tmp_path / "cmp.png"
    args = ["evaluate", "policies", "--workload", "synthetic", "--nodes", "64", "--jobs", "400", "--failures",
            "exponential:mtbf=100", "--policies", "fcfs,sul-d,multilevel", "--seed", "2"]
    out = CliRunner().invoke(app, args + ["--json", "--plot", str(png)])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert set(data["results"]) == {"fcfs", "sul-d", "multilevel"}
    assert data["results"]["fcfs"]["gain_vs_fcfs"] == 0.0
    assert png.stat().st_size > 10_000
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0 and "| sul-d |" in table.stdout
    bad = CliRunner().invoke(app, args[:-2] + ["--policies", "fcfs,bogus"])
    assert bad.exit_code != 0 and "bogus" in bad.output
