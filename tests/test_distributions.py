"""Weibull/exponential maximum-likelihood fits (models/distributions.py)."""
import numpy as np
import pytest
from scipy.special import gamma

from hpcguard.models.distributions import fit_exponential, fit_weibull


def test_weibull_fit_recovers_parameters_and_mtbf():
    rng = np.random.default_rng(5)
    gaps = 6.6 * rng.weibull(0.8, size=5000)
    fit = fit_weibull(gaps)
    assert fit.shape == pytest.approx(0.8, abs=0.03)
    assert fit.scale_h == pytest.approx(6.6, rel=0.05)
    assert fit.mtbf_h == pytest.approx(fit.scale_h * gamma(1 + 1 / fit.shape))
    assert fit.n == 5000 and fit.ks_pvalue > 0.01


def test_exponential_fit_and_weibull_preferred_for_weibull_data():
    rng = np.random.default_rng(6)
    gaps = 10.0 * rng.weibull(0.6, size=3000)
    ex, wb = fit_exponential(gaps), fit_weibull(gaps)
    assert ex.mtbf_h == pytest.approx(gaps.mean())
    assert wb.loglik > ex.loglik + 10
    assert ex.ks_pvalue < 1e-6


@pytest.mark.parametrize("bad", [[1.0, 2.0], [1.0, 0.0, 3.0], [1.0, np.nan, 2.0, 3.0]])
def test_bad_gaps_rejected(bad):
    with pytest.raises(ValueError):
        fit_weibull(bad)
