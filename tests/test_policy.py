"""Multilevel decision tree (seed 003 Fig. 4.2, Tab. 4.1), UC gating, decide()."""
import math

import pytest

from hpcguard.models.policy import (SUMMIT, SiteCosts, acted_sigma, break_even_age_s, checkpoint_recommendation, decide,
                                    decide_many, job_end_time, multilevel_decision, node_hours_at_risk, shift_schedule,
                                    uc_gate)

PRED = {"node": "n3", "time": 10_000.0, "warn": True, "lead_minutes": 2.0, "failure_probability": 0.8,
        "model": "ensemble-lstm"}
JOB = {"job_id": "77", "nodes": ["n1", "n2", "n3", "n4"], "num_nodes": 4, "start_time": 3_000.0,
       "time_limit_s": 12 * 3600, "last_checkpoint_time": 7_000.0}


def test_summit_migration_time_41_seconds():
    # seed 003 §4.4: 512 GB DRAM over ~12.5 GB/s -> "maximum ... time needed to migrate ... is 41 seconds"
    assert round(SUMMIT.migration_seconds()) == 41
    assert round(SUMMIT.checkpoint_seconds()) == 756  # 512 GB through the 2.1 GB/s burst buffer, then the PFS


def test_default_site_is_a_typical_cluster():
    # 128 GB nodes, no burst buffer: half the memory to the PFS at 1 GB/s, the whole in-use memory when known
    assert round(SiteCosts().migration_seconds()) == 10 and SiteCosts().checkpoint_seconds() == 64.0
    assert SiteCosts().checkpoint_seconds(memory_gb=16.0) == 16.0


@pytest.mark.parametrize("lead, spare, kind, branch", [
    (60, True, "migrate", "migrate:lead>=migration"),
    (60, False, "checkpoint", "checkpoint:no-spare"),
    (35, True, "checkpoint", "checkpoint:lead>=safeguard"),
    (10, True, "none", "none:imminent-failure"),
    (41, True, "migrate", "migrate:lead>=migration"),  # boundary: lead == migration time
])
def test_decision_tree_branches(lead, spare, kind, branch):
    d = multilevel_decision(lead, migration_s=41, safeguard_ckpt_s=30, spare_available=spare)
    assert (d.kind, d.branch) == (kind, branch)


def test_schedule_shifts_follow_tab_4_1():
    nxt, end, period = 9_000.0, 5_000.0, 3_600.0
    assert shift_schedule("migrate", "computation", nxt, end, period) == nxt
    assert shift_schedule("migrate", "checkpoint_bb", nxt, end, period) == end
    assert shift_schedule("checkpoint", "bleed_off", nxt, end, period) == nxt
    assert shift_schedule("checkpoint", "computation", nxt, end, period) == end + period
    assert shift_schedule("none", "computation", nxt, end, period) == end + period
    with pytest.raises(ValueError):
        shift_schedule("migrate", "lunch", nxt, end, period)


def test_decide_migrate_and_checkpoint_actions():
    costs = SiteCosts(node_memory_gb=64, migration_gbs=12.5, bb_write_gbs=2.1, pfs_write_gbs=1.0,
                      checkpoint_fraction=1.0)
    (act,) = decide(PRED, JOB, spare_nodes=2, costs=costs)
    assert act["kind"] == "migrate" and act["nodes"] == ["n3"] and act["source"] == "policy"
    assert act["deadline"] == PRED["time"] + 120
    r = act["reason"]
    assert r["branch"] == "migrate:lead>=migration" and r["lead_minutes"] == pytest.approx(2.0)
    assert r["node_hours_at_risk"] == pytest.approx(4 * (10_120 - 7_000) / 3600)
    assert r["node_hours_cost"] == pytest.approx(4 * (64 / 12.5) / 3600)
    assert r["expected_node_hours_saved"] == pytest.approx(0.8 * 4 * (10_120 - 7_000) / 3600 - 4 * (64 / 12.5) / 3600)
    assert r["inputs"]["migration_s"] == pytest.approx(64 / 12.5)

    (ck,) = decide(PRED, JOB, spare_nodes=0, costs=costs)
    assert ck["kind"] == "checkpoint" and ck["nodes"] == JOB["nodes"]
    safeguard = 64 / 2.1 + 64 / 1.0
    assert ck["reason"]["expected_node_hours_saved"] == pytest.approx(0.8 * 4 * 3000 / 3600 - 4 * safeguard / 3600)

    late = decide({**PRED, "lead_minutes": 0.5}, JOB, spare_nodes=0, costs=costs)
    assert late == []  # imminent failure: nothing to do
    assert decide({**PRED, "warn": False}, JOB, 2, costs) == []
    (drain,) = decide(PRED, None, 2, costs)
    assert drain["kind"] == "drain" and drain["nodes"] == ["n3"]


def test_decide_uses_now_for_remaining_lead():
    costs = SiteCosts(node_memory_gb=64)
    (act,) = decide(PRED, JOB, 2, costs, now=PRED["time"] + 60)
    assert act["reason"]["lead_minutes"] == pytest.approx(1.0)


def test_uc_gating_holds_back_large_jobs():
    metrics = pytest.importorskip("hpcguard.models.metrics")
    ok, uc = uc_gate(0.00004, 1024, ceiling=0.05)
    assert ok and uc == pytest.approx(float(metrics.uc_probability(0.00004, 1024)))
    assert uc == pytest.approx(1 - (1 - 0.00004) ** 1024)  # Eq. 4.4 with P(K) = 1
    costs = SiteCosts(node_memory_gb=64)
    big = {**JOB, "num_nodes": 4096}
    assert decide(PRED, big, 2, costs, ensemble_fpr=0.00004, uc_ceiling=0.05) == []
    (act,) = decide(PRED, JOB, 2, costs, ensemble_fpr=0.00004, uc_ceiling=0.05)
    assert act["reason"]["uc"] == pytest.approx(1 - (1 - 0.00004) ** 4)


def test_bad_prediction_rejected():
    with pytest.raises(ValueError, match="lead_minutes"):
        decide({"node": "n1", "time": 0.0, "warn": True}, JOB, 1, SiteCosts())
    with pytest.raises(ValueError):
        decide({**PRED, "lead_minutes": math.nan}, JOB, 1, SiteCosts())


def test_checkpoint_recommendation_uses_aware_interval():
    from hpcguard.models.checkpoint import aware_interval

    rec = checkpoint_recommendation(JOB, mtbf_h=24.0, ckpt_cost_h=0.25, shape=0.8, system_nodes=16)
    ref = aware_interval(12.0, 0.25, 24.0, shape=0.8, nodes=4, system_nodes=16)
    assert rec["interval_h"] == pytest.approx(ref.interval_h)
    assert rec["first_checkpoint_time"] == pytest.approx(JOB["start_time"] + ref.interval_h * 3600)
    assert rec["job_mtbf_h"] == pytest.approx(96.0)


def test_decide_many_lets_fars_share_short_spares():
    costs = SiteCosts(node_memory_gb=64)
    big = {**JOB, "job_id": "big", "nodes": [f"b{i}" for i in range(64)], "num_nodes": 64}
    small = {**JOB, "job_id": "small", "nodes": ["s1", "s2"], "num_nodes": 2}
    preds = [{**PRED, "node": "b7"}, {**PRED, "node": "s1"}, {**PRED, "node": "idle9"}]
    by_node = {n: big for n in big["nodes"]} | {n: small for n in small["nodes"]}
    acts = {a["job_id"]: a for a in decide_many(preds, by_node, 1, costs, precision=0.8)}
    assert acts["big"]["kind"] == "migrate"          # SUL-D: more node-hours at risk
    assert acts["big"]["reason"]["fars"]["granted_spare"] is True
    assert acts["small"]["kind"] == "checkpoint"     # no spare left: safeguard checkpoint
    assert acts[None]["kind"] == "drain"
    plenty = decide_many(preds, by_node, 5, costs, precision=0.8)
    assert sorted(a["kind"] for a in plenty) == ["drain", "migrate", "migrate"]


def test_break_even_holds_back_actions_that_cost_more_than_they_save():
    costs = SiteCosts()  # 64 s checkpoint, 10 s migration
    fresh = {**JOB, "last_checkpoint_time": PRED["time"] - 30.0}   # 30 s of work at risk < 64 s checkpoint
    assert decide(PRED, fresh, 0, costs) == []
    (ck,) = decide(PRED, fresh, 0, costs, apply_break_even=False)
    assert ck["kind"] == "checkpoint" and ck["reason"]["break_even"] is False
    assert ck["reason"]["expected_node_hours_saved"] < 0
    unlikely = {**PRED, "failure_probability": 0.01}             # 0.01 × 4 × 50 min < 4 × 64 s
    assert decide(unlikely, JOB, 0, costs) == []
    (ck,) = decide({**PRED, "failure_probability": 0.5}, JOB, 0, costs)
    assert ck["reason"]["break_even"] is True and ck["reason"]["expected_node_hours_saved"] > 0


def test_nothing_at_risk_for_a_job_that_ends_before_the_predicted_failure():
    """Issue 55: at a 3-year node MTBF 15 % of the migrations protected jobs whose time limit ended
    before the warned failure; a failure that comes after the job has gone destroys nothing of it."""
    costs = SiteCosts()
    deadline = PRED["time"] + 60.0 * PRED["lead_minutes"]
    ending = {**JOB, "time_limit_s": deadline - JOB["start_time"] - 1.0}    # gone 1 s before the failure
    likely = {**PRED, "failure_probability": 0.9}
    assert decide(likely, ending, 1, costs) == [] and decide(likely, ending, 0, costs) == []
    for spare in (1, 0):
        (act,) = decide(likely, ending, spare, costs, apply_break_even=False)
        assert act["reason"]["node_hours_at_risk"] == 0.0 and act["reason"]["break_even"] is False
        assert act["reason"]["inputs"]["job_end"] == deadline - 1.0
    running = {**JOB, "time_limit_s": deadline - JOB["start_time"] + 1.0}   # still running at the failure
    (mig,) = decide(likely, running, 1, costs)
    assert mig["kind"] == "migrate"
    assert mig["reason"]["node_hours_at_risk"] == pytest.approx(4 * (deadline - JOB["last_checkpoint_time"]) / 3600)
    assert decide(likely, {k: v for k, v in JOB.items() if k != "time_limit_s"}, 1, costs)[0]["kind"] == "migrate"


def test_node_hours_at_risk_and_job_end():
    assert job_end_time({"start_time": 10.0, "time_limit_s": 0}) is None
    assert job_end_time({"start_time": None, "time_limit_s": 60}) is None
    assert node_hours_at_risk("migrate", 2, 3600.0, 7200.0, 0.0) == pytest.approx(4.0)
    assert node_hours_at_risk("checkpoint", 2, 3600.0, 7200.0, 0.0) == pytest.approx(2.0)
    assert node_hours_at_risk("migrate", 2, 3600.0, 7200.0, 0.0, job_end=7200.0) == 0.0
    assert node_hours_at_risk("checkpoint", 2, 3600.0, 7200.0, 0.0, job_end=7200.1) == pytest.approx(2.0)
    # still running past its limit (grace time, stale limit): its end is unknown, the work counts
    assert node_hours_at_risk("migrate", 2, 3600.0, 7200.0, 0.0, job_end=3600.0) == pytest.approx(4.0)
    with pytest.raises(ValueError):
        node_hours_at_risk("drain", 1, 0.0, 1.0, 0.0)


def test_interval_sigma_counts_only_the_failures_break_even_migrates():
    """Eq. 5.10's σ is the share of failures migrated; with the break-even rule a warned failure
    whose work is younger than t_mig / p is not, so σ is below the catch rate and falls with p."""
    from hpcguard.models.checkpoint import multilevel_interval

    assert break_even_age_s(0.002, 10.0) == pytest.approx(5000.0)
    sigma0, tau0 = acted_sigma(0.81, 0.0, 300.0, 30 / 3600, 180 / 3600)
    assert sigma0 == pytest.approx(0.81)                                    # no rule: the old σ
    assert tau0 == pytest.approx(multilevel_interval(300.0, 30 / 3600, 180 / 3600, sigma=0.81))
    sigmas = [acted_sigma(0.81, break_even_age_s(p, 10.0) / 3600, 300.0, 30 / 3600, 180 / 3600)
              for p in (0.05, 0.0056, 0.0019, 0.0006)]
    assert all(a[0] > b[0] and a[1] > b[1] for a, b in zip(sigmas, sigmas[1:]))
    assert sigmas[0][0] < 0.81
    for sigma, tau in sigmas:                                              # a fixed point of both relations
        assert tau == pytest.approx(multilevel_interval(300.0, 30 / 3600, 180 / 3600, sigma=sigma))
    assert acted_sigma(0.81, 1e6, 300.0, 30 / 3600)[0] == 0.0


def test_checkpoint_size_follows_the_nodes_meminfo():
    costs = SiteCosts(node_memory_gb=256.0)
    (small,) = decide({**PRED, "mem_usage_percent": 10.0}, JOB, 0, costs)
    (big,) = decide({**PRED, "mem_usage_percent": 45.0}, JOB, 0, costs)
    assert small["reason"]["inputs"]["safeguard_ckpt_s"] == pytest.approx(25.6)
    assert big["reason"]["inputs"]["safeguard_ckpt_s"] == pytest.approx(115.2)
    # 120 s of lead: a node using 50 % of 256 GB cannot write its checkpoint in time
    assert decide({**PRED, "mem_usage_percent": 50.0}, JOB, 0, costs) == []
