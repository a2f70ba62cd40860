"""IO-aware actions (seed 004 Fig. 5.1) and node-hour accounting (§4.6)."""
import numpy as np
import pytest

from hpcguard.models.canario.accounting import SlowdownWaste, cumulative_probe_cost, replacement_node_hours
from hpcguard.models.canario.decisions import io_aware_actions

STATE = {"degraded": True, "probability": 0.8, "window_end": 3600.0, "features": {"read_mean": 1e8}}


def test_delay_io_sensitive_queue_heads_until_first_resistant():
    queue = [{"job_id": "1", "num_nodes": 2, "sensitivity": 0.9}, {"job_id": "2", "num_nodes": 2, "sensitivity": 0.7},
             {"job_id": "3", "num_nodes": 2, "sensitivity": 0.1}, {"job_id": "4", "num_nodes": 2, "sensitivity": 0.9}]
    acts = io_aware_actions(STATE, queue, [], now=3600.0)
    assert [(a["kind"], a["job_id"]) for a in acts] == [("delay", "1"), ("delay", "2")]
    a = acts[0]
    assert a["source"] == "canario"
    assert a["reason"]["probability"] == 0.8 and a["reason"]["features"] == {"read_mean": 1e8}
    assert a["reason"]["predicted_sensitivity"] == 0.9
    # already delayed jobs are not delayed again; the same trigger gives the same id
    again = io_aware_actions(STATE, queue, [], now=3600.0, delayed={"1"})
    assert [a["job_id"] for a in again] == ["2"] and again[0]["action_id"] == acts[1]["action_id"]


def test_io_limit_delays_head():
    queue = [{"job_id": "1", "num_nodes": 1, "sensitivity": 0.1, "predicted_io": 5e9}]
    acts = io_aware_actions(STATE, queue, [], now=0.0, system_io=8e9, io_limit=1e10)
    assert acts[0]["kind"] == "delay" and acts[0]["reason"]["branch"] == "queue-head-io-limit"


def test_release_when_degradation_ends():
    queue = [{"job_id": "1", "num_nodes": 1, "sensitivity": 0.9}, {"job_id": "2", "num_nodes": 1, "sensitivity": 0.9}]
    acts = io_aware_actions({"degraded": False, "probability": 0.1}, queue, [], now=10.0, delayed={"2"})
    assert [(a["kind"], a["job_id"]) for a in acts] == [("release", "2")]
    assert io_aware_actions({"degraded": False}, queue, [], now=10.0) == []


def test_replace_young_sensitive_jobs_smallest_used_node_hours_first():
    now = 10 * 3600.0
    running = [  # used node-hours: a 8, b 2, c 1 (but ran > half its expected runtime), d resistant
        {"job_id": "a", "nodes": ["n1", "n2", "n3", "n4"], "start": now - 7200, "expected_runtime_s": 36000, "sensitivity": 0.9},
        {"job_id": "b", "nodes": ["n5", "n6"], "start": now - 3600, "expected_runtime_s": 36000, "sensitivity": 0.8},
        {"job_id": "c", "nodes": ["n7"], "start": now - 3600, "expected_runtime_s": 4000, "sensitivity": 0.9},
        {"job_id": "d", "nodes": ["n8"], "start": now - 60, "expected_runtime_s": 36000, "sensitivity": 0.1},
    ]
    queue = [{"job_id": "q1", "num_nodes": 1, "sensitivity": 0.2}, {"job_id": "q2", "num_nodes": 4, "sensitivity": 0.3},
             {"job_id": "q3", "num_nodes": 1, "sensitivity": 0.95}]
    acts = [a for a in io_aware_actions(STATE, queue, running, now=now) if a["kind"] == "reschedule"]
    assert [(a["job_id"], a["reason"]["replacement_job_id"]) for a in acts] == [("b", "q1"), ("a", "q2")]
    assert acts[0]["nodes"] == ["n5", "n6"] and acts[0]["reason"]["used_node_hours"] == pytest.approx(2.0)
    # no resistant job waiting → nothing to replace
    assert not [a for a in io_aware_actions(STATE, queue[2:], running, now=now) if a["kind"] == "reschedule"]


def test_slowdown_waste_and_section_4_6_accounting():
    s = np.ones(4 * 3600)
    s[3600:7200] = 3.0                                     # 1 h of 3× slower IO
    w = SlowdownWaste(s)
    # f = 0.5: rate 1/(0.5 + 1.5) = 0.5 → half of each node-hour is wasted
    assert w.node_hours([0], [4 * 3600], [0.5], [2])[0] == pytest.approx(1.0)
    acc = replacement_node_hours(w, t=np.array([3600.0, 3600.0]), job_start=np.array([0.0, 1800.0]),
                                 job_end=np.array([7200.0, 7200.0]), job_f=np.array([0.5, 0.0]),
                                 job_nodes=np.array([2, 4]), job_sensitive=np.array([True, False]),
                                 repl_runtime=np.array([3600.0, 3600.0]), repl_f=np.array([0.0, 0.5]),
                                 repl_nodes=np.array([2, 1]), repl_sensitive=np.array([False, True]))
    np.testing.assert_allclose(acc["gain"], [1.0, 0.0])            # #1: waste avoided
    np.testing.assert_allclose(acc["false_positive"], [0.0, 2.0])  # #2: 4 nodes × 0.5 h lost
    np.testing.assert_allclose(acc["false_negative"], [0.0, 0.5])  # #3: sensitive replacement wastes
    np.testing.assert_allclose(acc["recovered"], [1.0, -2.5])


def test_cumulative_probe_cost():
    cost = cumulative_probe_cost(np.array([0.0, 100.0, 250.0]), np.array([90.0, 200.0]), np.array([1800.0, 3600.0]))
    np.testing.assert_allclose(cost, [0.0, 0.5, 1.5])
