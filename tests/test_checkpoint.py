"""Checkpoint intervals: seed 000 ch. 3 (Eqs. 3.1–3.14, Algorithm 1), Young/Daly, seed 003 Eq. 5.10."""
import math

import numpy as np
import pytest
from scipy import integrate, stats

from hpcguard.models import checkpoint as ck
from hpcguard.models.units import parse_duration

M, TC, W = 24.0, 0.5, 0.8  # seed 000 §3.4.1: MTBF 24 h, t_c half an hour, Weibull w = 0.8


@pytest.mark.parametrize("runtime_h, published_p", [(18.99, 0.60), (6.59, 0.33), (22.51, 0.65), (116.54, 0.98)])
def test_failure_probabilities_of_figs_3_4_to_3_7(runtime_h, published_p):
    # seed 000 Figs. 3.4–3.7: runtimes 18.99 h, 6.59 h, 22.51 h, 116.54 h fail with 60/33/65/98 %
    p = ck.failure_cdf(runtime_h, M, W)
    assert p == pytest.approx(published_p, abs=0.006)


def test_truncated_mean_and_cdf_match_numerical_integration():
    for w in (0.6, 0.8, 1.0, 1.7):
        dist = stats.weibull_min(w, scale=ck.weibull_scale(M, w))
        for t in (0.3, 7.0, 50.0):
            mu, _ = integrate.quad(lambda x: x * dist.pdf(x), 0, t)
            assert ck.truncated_mean(t, M, w) == pytest.approx(mu, rel=1e-7)
            assert ck.failure_cdf(t, M, w) == pytest.approx(dist.cdf(t), rel=1e-10)
    # Poisson closed form of Eq. 3.12 (corrected bracket)
    t = 10.0
    assert ck.truncated_mean(t, M, 1.0) == pytest.approx(M * (1 - (t / M + 1) * math.exp(-t / M)))


def _cost_by_quadrature(t_u, t, t_c, m, w):
    """E[C] of Eq. 3.5 by integrating C_fail (Eq. 3.6b) piecewise and adding the success term."""
    dist = stats.weibull_min(w, scale=ck.weibull_scale(m, w))
    tau = t_u - t_c
    edges = np.append(np.arange(0.0, t, t_u), t)
    fail = sum(integrate.quad(lambda x, i=i: (x - i * tau) * dist.pdf(x), a, b)[0]
               for i, (a, b) in enumerate(zip(edges[:-1], edges[1:])))
    return fail + math.floor(t / t_u) * t_c * (1 - dist.cdf(t))


def test_eq_3_8_equals_direct_integration_of_the_cost_function():
    t_u = np.array([0.75, 1.9, 4.75, 9.0, 20.0])
    fast = ck.expected_cost(t_u, 18.99, TC, M, W)
    slow = [_cost_by_quadrature(u, 18.99, TC, M, W) for u in t_u]
    np.testing.assert_allclose(fast, slow, rtol=1e-6)


@pytest.mark.parametrize("runtime_h", [18.99, 6.59, 22.51])
def test_monte_carlo_cost_eq_3_1_agrees_with_eq_3_8(runtime_h):
    for tau in (1.0, 3.3):
        expected = ck.expected_cost([tau + TC], runtime_h, TC, M, W)[0]
        sim = ck.simulate_cost(tau, runtime_h, TC, M, shape=W, n_runs=40_000, seed=11)
        assert abs(sim["cost_h"] - expected) < 4 * sim["stderr_h"], (sim, expected)
        assert sim["failure_fraction"] == pytest.approx(ck.failure_cdf(runtime_h, M, W), abs=0.01)


def test_aware_interval_is_the_grid_minimum_and_beats_daly_in_simulation():
    r = ck.aware_interval(18.99, TC, M, shape=W)
    grid = np.arange(31, int((18.99 - TC) * 60) + 1) / 60.0
    costs = ck.expected_cost(grid, 18.99, TC, M, W)
    assert r.expected_cost_h == pytest.approx(costs.min())
    assert r.interval_h + TC == pytest.approx(grid[np.argmin(costs)])
    daly = ck.daly_interval(M, TC)
    sim_aware = ck.simulate_cost(r.interval_h, 18.99, TC, M, W, n_runs=40_000, seed=3)
    sim_daly = ck.simulate_cost(daly, 18.99, TC, M, W, n_runs=40_000, seed=3)  # same failures
    assert sim_aware["cost_h"] <= sim_daly["cost_h"]


def test_no_checkpoint_recommended_when_cheapest():
    r = ck.aware_interval(1.0, TC, M, shape=W)
    assert r.no_checkpoint and math.isnan(r.interval_h)
    assert r.expected_cost_h == pytest.approx(ck.truncated_mean(1.0, M, W))
    # seed 000 Fig. 3.5 (33 % job, 6.59 h): checkpointing barely beats never checkpointing
    r33 = ck.aware_interval(6.59, TC, M, shape=W)
    assert r33.expected_cost_h <= r33.no_checkpoint_cost_h
    assert r33.no_checkpoint_cost_h - r33.expected_cost_h < 0.01 * r33.no_checkpoint_cost_h


def test_aware_interval_approaches_daly_as_failure_probability_goes_to_one():
    # Poisson failures; the longer the job, the closer P(t) is to 1 and tau to Daly's
    gaps = []
    for t in (30.0, 120.0, 600.0):
        r = ck.aware_interval(t, TC, M, poisson=True)
        gaps.append(abs(r.interval_h - ck.daly_interval(M, TC)))
    assert r.failure_probability > 0.999999
    assert gaps[-1] <= 2.0 / 60.0  # within two minutes of grid resolution
    assert gaps[-1] <= gaps[0]


def test_young_and_daly_formulas():
    assert ck.young_interval(24.0, 0.5) == pytest.approx(math.sqrt(24.0))
    d, m = 0.5, 24.0
    x = d / (2 * m)
    assert ck.daly_interval(m, d) == pytest.approx(math.sqrt(2 * d * m) * (1 + math.sqrt(x) / 3 + x / 9) - d)
    assert ck.daly_interval(1.0, 3.0) == 1.0  # d >= 2M branch
    with pytest.raises(ValueError):
        ck.young_interval(-1.0, 0.5)


def test_mtbf_scaling_eq_3_14_and_batch_matches_single():
    assert ck.scale_mtbf(24.0, 64, 1024) == pytest.approx(384.0)
    runtimes, nodes = [5.0, 18.99, 40.0], [16, 512, 1024]
    batch = ck.aware_intervals_batch(runtimes, TC, 5.71, shape=W, nodes=nodes, system_nodes=2000)
    for t, n, b in zip(runtimes, nodes, batch):
        one = ck.aware_interval(t, TC, 5.71, shape=W, nodes=n, system_nodes=2000)
        assert repr(b) == repr(one)  # nan-safe equality
        assert b.mtbf_h == pytest.approx(5.71 * 2000 / n)


def test_multilevel_interval_eq_5_10():
    bb, pfs, m, sigma = 0.02, 0.1, 10.0, 0.44
    expected = math.sqrt(2 * bb / ((1 / m) * (1 - sigma)) + 2 * pfs * bb)
    assert ck.multilevel_interval(m, bb, pfs, sigma) == pytest.approx(expected)
    assert ck.multilevel_interval(m, bb, pfs, 0.6) > ck.multilevel_interval(m, bb, pfs, 0.0)
    with pytest.raises(ValueError):
        ck.multilevel_interval(m, bb, pfs, 1.0)


def test_parse_duration():
    assert parse_duration("30m") == 0.5
    assert parse_duration("1d") == 24.0
    assert parse_duration("18s") == pytest.approx(0.005)
    assert parse_duration("18.99h") == 18.99 and parse_duration("2") == 2.0
    for bad in ("", "5x", "-1h", "h", "nan"):
        with pytest.raises(ValueError):
            parse_duration(bad)
