"""Node-hours accounting (issue 55 item 1): each rule on a small hand-made history whose
answer is known (docs/savings.md)."""
from __future__ import annotations

import json

import pytest

from hpcguard.models.savings import account_savings, loss_reference

H = 3600.0
JOB = {"job_id": "7", "nodes": ["n1", "n2", "n3", "n4"], "start": 0.0, "end": 4 * H}
FAIL = {"node": "n2", "time": 4 * H, "family": "thermal"}


def _act(kind, t, d, job_id="7", nodes=None, deadline=None, **reason):
    key = "migration_s" if kind == "migrate" else "safeguard_ckpt_s"
    return {"action_id": f"{kind}-{t:.0f}", "kind": kind, "job_id": job_id, "nodes": nodes or JOB["nodes"],
            "time": t, "deadline": t + 300.0 if deadline is None else deadline,
            "reason": {"inputs": {key: d}, **reason}}


def test_without_hpcguard_a_killed_job_loses_everything_since_its_start_or_last_periodic_checkpoint():
    s = account_savings([JOB], [FAIL], [])
    assert s["without_node_hours_lost"] == pytest.approx(4 * 4)          # 4 nodes × 4 h
    periodic = account_savings([{**JOB, "checkpoint_interval_s": 1.5 * H}], [FAIL], [])
    assert periodic["without_node_hours_lost"] == pytest.approx(4 * 1.0)  # last checkpoint at 3 h
    assert loss_reference(0.0, 4 * H, 1.5 * H) == 3 * H
    assert s["net"] == 0 and s["protected"] == [] and s["failures"][0]["job_id"] == "7"


def test_a_checkpoint_done_before_the_failure_leaves_only_the_time_since_it_plus_its_cost():
    s = account_savings([JOB], [FAIL], [_act("checkpoint", 4 * H - 600, 60.0)])
    assert s["by_kind"]["checkpoint"]["saved"] == pytest.approx(4 * (4 * H - 540) / H)
    assert s["by_kind"]["checkpoint"]["spent"] == pytest.approx(4 * 60 / H)
    assert s["failures"][0]["lost_with"] == pytest.approx(4 * 540 / H)    # the work after it
    assert s["net"] == pytest.approx(4 * (4 * H - 600) / H)               # = the work it kept
    assert s["protected"][0]["action_id"] == "checkpoint-13800"


def test_a_checkpoint_the_failure_interrupts_saves_and_costs_nothing():
    s = account_savings([JOB], [FAIL], [_act("checkpoint", 4 * H - 30, 60.0)])
    assert (s["saved"], s["spent"]) == (0.0, 0.0) and s["protected"] == []


def test_a_migration_off_the_failing_node_saves_the_job_and_one_off_another_node_only_costs():
    off = _act("migrate", 4 * H - 120, 10.0, nodes=["n2"], predicted_nodes=["n2"])
    s = account_savings([JOB], [FAIL], [off])
    assert s["saved"] == pytest.approx(16.0) and s["spent"] == pytest.approx(4 * 10 / H)
    wrong = _act("migrate", 4 * H - 120, 10.0, nodes=["n3"], predicted_nodes=["n3"])
    s = account_savings([JOB], [FAIL], [wrong])
    assert s["saved"] == 0.0 and s["spent"] == pytest.approx(4 * 10 / H)


def test_a_drain_keeps_later_jobs_off_the_failing_node():
    late = {"job_id": "9", "nodes": ["n5", "n6"], "start": 2 * H + 17, "end": 2 * H + 137}
    fail = {"node": "n5", "time": 2 * H + 137, "family": "memory"}
    drain = {"action_id": "d1", "kind": "drain", "job_id": None, "nodes": ["n5"], "time": 2 * H,
             "deadline": 2 * H + 150, "reason": {}}
    s = account_savings([late], [fail], [drain])
    assert s["by_kind"]["drain"]["saved"] == pytest.approx(2 * 120 / H)   # job 9's 2 nodes × 2 min
    assert s["by_kind"]["drain"]["spent"] == pytest.approx(137 / H)       # the node held until it failed
    assert s["protected"][0]["kind"] == "drain" and s["by_family"]["memory"]["saved"] > 0


def test_actions_no_failure_followed_are_costs_only():
    alarm = _act("checkpoint", 1 * H, 64.0)
    drain = {"action_id": "d2", "kind": "drain", "job_id": None, "nodes": ["n9"], "time": H, "deadline": H + 300,
             "reason": {}}
    s = account_savings([JOB], [], [alarm, drain], horizon_s=600.0)
    assert s["saved"] == 0.0
    assert s["by_kind"]["checkpoint"]["spent"] == pytest.approx(4 * 64 / H)
    assert s["by_kind"]["drain"]["spent"] == pytest.approx(900 / H)       # to the deadline + horizon
    assert s["net"] == pytest.approx(-(4 * 64 + 900) / H)
    assert {a["action_id"] for a in s["false_alarm_actions"]} == {"checkpoint-3600", "d2"}


def test_a_failure_long_after_the_deadline_is_not_the_actions_answer():
    s = account_savings([JOB], [FAIL], [_act("checkpoint", 1 * H, 60.0, deadline=1 * H + 300)], horizon_s=600.0)
    assert s["saved"] == 0.0 and s["false_alarm_actions"]


def test_canario_figures_and_intervals():
    s = account_savings([JOB], [FAIL], [_act("checkpoint", 4 * H - 600, 60.0)],
                        io_saved={"reschedule": 2.0}, io_spent={"probes": 5.0}, node_days=10.0)
    assert s["by_kind"]["probes"]["spent"] == 5.0 and s["by_kind"]["reschedule"]["saved"] == 2.0
    assert s["net"] == pytest.approx(4 * (4 * H - 600) / H - 3.0)
    lo, hi = s["ci95"]["net"]
    assert lo - 1e-9 <= s["net"] <= hi + 1e-9
    assert s["net_per_1000_node_days"] == pytest.approx(100.0 * s["net"])
    json.dumps(s)  # a report is plain JSON


def test_timeline_is_cumulative_in_event_time():
    acts = [_act("checkpoint", 1 * H, 64.0), _act("checkpoint", 4 * H - 600, 60.0)]
    s = account_savings([JOB], [FAIL], acts)
    times = [p["time"] for p in s["timeline"]]
    assert times == sorted(times)
    assert s["timeline"][-1]["saved"] == pytest.approx(s["saved"]) and s["timeline"][-1]["spent"] == pytest.approx(s["spent"])


def test_a_job_rescheduled_again_in_a_dry_run_counts_once(tmp_path):
    """A dry run leaves a replaced job running, so the worker asks again at each degraded window: the
    replacement's node-hours are those of its first ask, whatever the repeats."""
    from hpcguard.simulators.savings_report import io_figures

    (tmp_path / "jobscripts").mkdir()
    (tmp_path / "jobscripts" / "sensitivity.csv").write_text("job_id,app,io_sensitive\n1,ior,1\n2,lammps,0\n")
    (tmp_path / "degradation.csv").write_text("start,end,kind,severity,peak_slowdown\n1800,5400,short,severe,3.0\n")
    jobs = [{"job_id": "1", "nodes": ["n1", "n2"], "start": 0.0, "end": 7200.0},
            {"job_id": "2", "nodes": ["n3"], "start": 1900.0, "end": 5000.0}]

    def resched(t):
        return {"kind": "reschedule", "job_id": "1", "time": t, "reason": {"replacement_job_id": "2"}}

    once = io_figures(tmp_path, [resched(1900.0)], jobs)
    again = io_figures(tmp_path, [resched(t) for t in (1960.0, 1900.0, 2020.0)], jobs)
    assert once["saved"]["reschedule"] > 0 and again == once
