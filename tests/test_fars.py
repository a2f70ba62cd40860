"""FARS (seed 001): spare pool, f_i, gains of Eqs. 2–4, knapsack of Eq. 5, residual rule §4.4."""
import itertools

import numpy as np
import pytest

from hpcguard.models import fars


def _brute(weights, values, cap):
    best = 0.0
    for r in range(len(weights) + 1):
        for combo in itertools.combinations(range(len(weights)), r):
            if sum(weights[i] for i in combo) <= cap:
                best = max(best, sum(values[i] for i in combo))
    return best


def test_knapsack_matches_brute_force_on_random_instances():
    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(1, 9))
        w = rng.integers(0, 7, size=n).tolist()
        v = rng.uniform(-1, 10, size=n).round(3).tolist()
        cap = int(rng.integers(0, 15))
        chosen, value = fars.knapsack(w, v, cap)
        assert value == pytest.approx(_brute(w, v, cap))
        assert sum(w[i] for i in chosen) <= cap
        assert sum(v[i] for i in chosen) == pytest.approx(value)


def test_spare_pool_fig_2_example():
    # seed 001 Fig. 2: idle n4, n5; n4 is needed for the queue head's EASY reservation -> pool {n5}
    # (j4 needs 3 nodes; 2 more are expected free at t=50, so one idle node must wait for it)
    assert fars.spare_pool({"n4", "n5"}, set(), head_size=3, releases=[(50.0, 2)]) == ["n5"]
    assert fars.spare_pool({"n1", "n4", "n5"}, {"n1"}) == ["n4", "n5"]
    assert fars.spare_pool({"n1", "n4", "n5"}, {"n1"}, head_size=2) == []          # the head starts now on both
    assert fars.spare_pool({"n4", "n5"}, set(), head_size=9, releases=[(50.0, 2)]) == []  # never fits: hold all


def test_easy_extra_nodes_follows_release_order_not_input_order():
    assert fars.easy_extra_nodes(1, 4, [(90.0, 5), (10.0, 2), (40.0, 1)]) == 0   # 1+2+1 = 4 at t=40
    assert fars.easy_extra_nodes(1, 4, [(90.0, 5), (10.0, 4)]) == 1
    with pytest.raises(ValueError):
        fars.easy_extra_nodes(-1, 2)


def test_job_failure_probability_and_gains():
    f = fars.job_failure_probability(0.3, 3)
    assert f == pytest.approx(1 - 0.7 ** 3)
    kw = dict(f=f, nodes=32, hours_since_checkpoint=2.0, runtime_h=8.0, interval_h=0.5, overhead_h=0.1)
    assert fars.gains("sul-d", **kw) == pytest.approx(f * 32 * (2.0 + 0.25 - 0.1))  # Eq. 2
    assert fars.gains("jfr-d", **kw) == pytest.approx(f)  # Eq. 3
    assert fars.gains("fsd-d", **kw, requeue_h=1.0, restart_h=0.2) == pytest.approx(
        f * (2.0 + 0.25 + 1.0 + 0.2 - 0.1) / 8.0)  # Eq. 4
    with pytest.raises(ValueError):
        fars.gains("nope", **kw)


JOBS = [
    {"id": "big", "nodes": 128, "suspicious_nodes": 3, "hours_since_checkpoint": 4.0, "runtime_h": 20},
    {"id": "mid", "nodes": 16, "suspicious_nodes": 1, "hours_since_checkpoint": 1.0, "runtime_h": 2},
    {"id": "small", "nodes": 2, "suspicious_nodes": 1, "hours_since_checkpoint": 0.5, "runtime_h": 1},
]


def test_strategies_prefer_their_objective():
    sul = fars.select_jobs(JOBS, 3, "sul-d", 0.5, 0.5, 0.1)
    jfr = fars.select_jobs(JOBS, 3, "jfr-d", 0.5, 0.5, 0.1)
    assert sul.selected == ["big"]            # most service units at risk
    assert set(jfr.selected) >= {"mid", "small"}  # as many jobs as possible
    assert jfr.spare_used <= 3


def test_residual_rule_section_4_4():
    # 2 spare nodes, the knapsack picks "mid" (1 node); R = 1 left, no job fits:
    jobs = [JOBS[0], JOBS[1]]
    sel = fars.select_jobs(jobs, 2, "sul-d", 0.5, 0.5, 0.1)
    assert sel.residual == "big" and sel.selected == ["big", "mid"] and sel.spare_used == 2
    f_res = fars.job_failure_probability(0.5, 3 - 1)
    v_mid = fars.gains("sul-d", fars.job_failure_probability(0.5, 1), 16, 1.0, 2, 0.5, 0.1)
    assert sel.gain == pytest.approx(v_mid + fars.gains("sul-d", f_res, 128, 4.0, 20, 0.5, 0.1))


def test_bad_jobs_rejected():
    with pytest.raises(ValueError, match="lacks"):
        fars.select_jobs([{"id": "x", "nodes": 4}], 2, "sul-d", 0.5, 0.5, 0.1)
    with pytest.raises(ValueError, match="suspicious_nodes"):
        fars.select_jobs([{**JOBS[1], "suspicious_nodes": 99}], 2, "sul-d", 0.5, 0.5, 0.1)
