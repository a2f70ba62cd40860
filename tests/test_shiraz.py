"""Shiraz (seed 002): Eqs. 2–16 and Tab. 2 switch points."""
import numpy as np
import pytest
from scipy.special import gamma

from hpcguard.models.shiraz import failure_count, oci, shiraz

HEAVY = 0.5  # seed 002 Tab. 2: the heavy application's checkpoint takes 30 min


@pytest.mark.parametrize("factor, model_k", [(5, 6), (25, 13), (100, 26), (1000, 81)])
def test_tab_2_exascale_switch_points(factor, model_k):
    # seed 002 Tab. 2, exascale (MTBF 5 h, beta 0.6, 1000 h): model switch points 6, 13, 26, 81
    r = shiraz(5.0, HEAVY, HEAVY / factor)
    assert r.k == model_k
    assert r.region[0] <= r.k <= r.region[1]
    assert r.gain_light_h >= 0 and r.gain_heavy_h >= 0


@pytest.mark.parametrize("factor, model_k", [(5, 12), (25, 26), (100, 51), (1000, 161)])
def test_tab_2_petascale_switch_points(factor, model_k):
    # seed 002 Tab. 2, petascale (MTBF 20 h): model 12, 26, 51, 161 (simulation 11, 24, 51, 161).
    # Our model gives 12*, 25, 51, 160: within 1 of the published model. (*) For 5x no
    # integer k lets both gain (k = inf, Eq. 16); the balance point is 12.
    r = shiraz(20.0, HEAVY, HEAVY / factor)
    assert abs(r.k_balanced - model_k) <= 1
    if r.k is not None:
        assert abs(r.k - model_k) <= 1


def test_fig_10_region_contains_optimum():
    # seed 002 Fig. 10: exascale 100x, region 24..28, k = 26
    r = shiraz(5.0, HEAVY, HEAVY / 100)
    assert r.k == 26 and 24 <= r.region[0] and r.region[1] <= 28


def test_failure_counts_eq_2_and_3():
    m, beta, total = 5.0, 0.6, 1000.0
    lam = m / gamma(1 + 1 / beta)
    assert failure_count(0.0, total, m, beta, total) == pytest.approx(total / m * (1 - np.exp(-(total / lam) ** beta)))
    # segments partition the total
    edges = np.linspace(0, 50, 11)
    assert failure_count(edges[:-1], edges[1:], m, beta, total).sum() == pytest.approx(
        failure_count(0.0, 50.0, m, beta, total))
    assert oci(5.0, 0.5) == pytest.approx(np.sqrt(5.0) - 0.5)  # Eq. 1


def test_gains_move_in_opposite_directions_and_shiraz_plus_cuts_io():
    a, b = shiraz(5.0, HEAVY, 0.005, max_k=20), shiraz(5.0, HEAVY, 0.005, max_k=40)
    assert b.k == 26 and a.k is None  # region unreachable below 25
    r = shiraz(5.0, HEAVY, 0.005, stretch_factors=(2, 4))
    red = [p["io_reduction"] for p in r.shiraz_plus]
    assert 0 < red[0] < red[1] < 1
    with pytest.raises(ValueError):
        shiraz(5.0, 0.01, 0.5)
