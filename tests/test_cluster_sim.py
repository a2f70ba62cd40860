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


def _one_warned_job(runtime_s: float, precision: float = 0.9):
    """A 2-node job on a 4-node cluster, its node 0 fails at 1200 s, warned 300 s ahead."""
    from hpcguard.models.policy import SiteCosts
    from hpcguard.simulators.cluster import POLICIES, ClusterSimulator
    from hpcguard.simulators.failures import Predictions

    wl = Workload(submit=np.zeros(1), runtime=np.array([runtime_s]), size=np.array([2], np.int64),
                  estimate=np.array([runtime_s]), io_sensitive=np.zeros(1, bool), io_demand=np.zeros(1),
                  job_id=np.arange(1))
    fl = FailureTrace(np.array([1200.0]), np.array([0], np.int64), np.array([600.0]))
    pr = Predictions(issued=np.array([0.0]), node=np.array([0], np.int64), window_start=np.array([1200.0]),
                     window_end=np.array([1200.0]), failure_index=np.array([0], np.int64), n_failure_windows=1,
                     lead_s=300.0)
    sim = ClusterSimulator(wl, 4, fl, POLICIES["multilevel"], predictions=pr, precision=precision,
                           costs=Costs(site=SiteCosts()))
    sim.run()
    return sim


def test_simulator_does_not_migrate_a_job_that_ends_before_its_warned_failure():
    """Issue 55: the job view gives the job's end; a job done before the failure has nothing at risk."""
    ends = _one_warned_job(1000.0)          # ends at 1000 s, the failure comes at 1200 s
    assert ends.decisions == [] and ends.counts["migrations"] == 0
    runs = _one_warned_job(2000.0)          # still running at 1200 s: 2 nodes × 1200 s at risk
    assert [a["kind"] for a in runs.decisions] == ["migrate"] and runs.counts["avoided_failures"] == 1
    assert runs.decisions[0]["reason"]["inputs"]["job_end"] >= 2000.0


def test_multilevel_interval_sigma_follows_the_break_even_rule():
    """Eq. 5.10's σ: the catch rate without the rule, only the failures it migrates with it."""
    from hpcguard.models.policy import SiteCosts, acted_sigma, break_even_age_s
    from hpcguard.simulators.cluster import POLICIES, ClusterSimulator

    rng = np.random.default_rng(3)
    wl = synthetic_workload(rng, n_jobs=200, nodes=64)
    fl = renewal_failures(np.random.default_rng(4), 64, 20 * 86400, mtbf_h=24 * 30)
    pred = emulate_predictor(np.random.default_rng(5), fl, 64, 20 * 86400, 1800.0, 0.5, 0.8, 300.0)
    costs = Costs(site=SiteCosts())
    on, off = (ClusterSimulator(wl, 64, fl, POLICIES["multilevel"], costs=costs, predictions=pred, precision=0.002,
                                node_mtbf_h=24 * 30, break_even=be) for be in (True, False))
    assert off.acted_age_s == 0.0 and on.acted_age_s == pytest.approx(break_even_age_s(0.002, 10.24))
    assert on.sigma == off.sigma > 0
    assert np.all(on.tau <= off.tau) and np.any(on.tau < off.tau)
    from hpcguard.models.checkpoint import scale_mtbf

    big = int(np.argmax(wl.size))
    _, tau_h = acted_sigma(on.sigma, on.acted_age_s / 3600, float(scale_mtbf(24 * 30, int(wl.size[big]), 1)),
                           costs.bb_ckpt_s / 3600, costs.ckpt_s / 3600)
    assert on.tau[big] == pytest.approx(tau_h * 3600)


def _migrated_then_failed(fail_at: float):
    """A 2-node, 5000 s job on 4 nodes; τ = 1000 s, δ = 100 s (first checkpoint done at 1100 s).

    A false alarm on node 0 (predicted for 1900 s, 300 s lead) migrates it at 1600 s to node 2;
    node 1, which it keeps, then fails at ``fail_at`` (repaired 100 s later).
    """
    from hpcguard.models.policy import SiteCosts
    from hpcguard.simulators.cluster import ClusterSimulator, Policy
    from hpcguard.simulators.failures import Predictions

    wl = _wl([0], [5000], [2])
    fl = FailureTrace(np.array([fail_at]), np.array([1], np.int64), np.array([100.0]))
    pr = Predictions(issued=np.array([0.0]), node=np.array([0], np.int64), window_start=np.array([1900.0]),
                     window_end=np.array([1900.0]), failure_index=np.array([-1], np.int64), n_failure_windows=0,
                     lead_s=300.0)
    pol = Policy("young-migrate", checkpoint="young", migrate=True)
    sim = ClusterSimulator(wl, 4, fl, pol, predictions=pr, precision=0.9, node_mtbf_h=24.0, break_even=False,
                           costs=Costs(ckpt_s=100.0, restart_s=50.0, site=SiteCosts()))
    sim.tau[:] = 1000.0
    res = sim.run()
    assert sim.counts["migrations"] == 1 and res.failed.tolist() == [1]
    return sim, res, sim.decisions[0]["reason"]["inputs"]["migration_s"]


def test_live_migration_does_not_make_unsaved_work_durable():
    """A live migration moves the processes and writes nothing: a later failure before the next
    checkpoint loses the work since the last checkpoint (1000 s of work, done at 1100 s), not only
    the work since the migration; the periodic schedule goes on from that checkpoint."""
    # migrated at 1600 s (500 s of work unsaved), moving takes m s; node 1 fails at 1900 s
    sim, res, m = _migrated_then_failed(1900.0)
    lost = 500.0 + (1900.0 - 1600.0 - m)              # not just the 300 − m s since the migration
    assert res.totals["lost"] == pytest.approx(2 * lost)
    assert res.totals["useful"] == pytest.approx(2 * 5000.0)
    # restart at 1900 s on the free nodes 2, 3 from the 1000 s checkpoint: 50 + 4000 + 3 × 100
    assert res.completion[0] == pytest.approx(1900.0 + 50.0 + 4000.0 + 300.0)
    # the next checkpoint comes τ after the last one, 500 s of work after the migration (ends at
    # 1600 + m + 500 + 100) and saves the carried work too: a failure at 2400 s loses only what follows
    sim, res, m = _migrated_then_failed(2400.0)
    assert res.totals["lost"] == pytest.approx(2 * (2400.0 - (1600.0 + m + 600.0)))
    assert res.completion[0] == pytest.approx(2400.0 + 50.0 + 3000.0 + 200.0)
