"""Maximum-likelihood failure inter-arrival distributions (Weibull, exponential) with fit tests.

>>> import numpy as np
>>> gaps = 10.0 * np.random.default_rng(0).weibull(0.7, size=2000)
>>> fit = fit_weibull(gaps)
>>> round(fit.shape, 1), fit.n
(0.7, 2000)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats
from scipy.special import gamma as gamma_fn

__all__ = ["WeibullFit", "ExponentialFit", "fit_weibull", "fit_exponential"]


@dataclass(frozen=True)
class WeibullFit:
    """Weibull MLE: ``shape`` (w), ``scale_h`` (lambda), ``mtbf_h = lambda Gamma(1 + 1/w)``;
    Kolmogorov–Smirnov statistic/p-value (parameters estimated from the same data, so the
    p-value is optimistic) and the maximised log-likelihood."""

    shape: float
    scale_h: float
    mtbf_h: float
    n: int
    ks_stat: float
    ks_pvalue: float
    loglik: float

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ExponentialFit:
    """Exponential MLE (``mtbf_h`` = sample mean) with the same goodness-of-fit fields."""

    mtbf_h: float
    n: int
    ks_stat: float
    ks_pvalue: float
    loglik: float

    def to_dict(self) -> dict:
        return asdict(self)


def _gaps(gaps_h) -> np.ndarray:
    x = np.asarray(gaps_h, dtype=float).ravel()
    if x.size < 3:
        raise ValueError(f"need at least 3 inter-arrival times, got {x.size}")
    if not np.all(np.isfinite(x)) or np.any(x <= 0):
        raise ValueError("inter-arrival times must be finite and > 0 (drop zero gaps first)")
    return x


def fit_weibull(gaps_h) -> WeibullFit:
    """Two-parameter Weibull (location 0) by maximum likelihood (scipy)."""
    x = _gaps(gaps_h)
    shape, _, scale = stats.weibull_min.fit(x, floc=0.0)
    ks = stats.kstest(x, "weibull_min", args=(shape, 0.0, scale))
    loglik = float(np.sum(stats.weibull_min.logpdf(x, shape, 0.0, scale)))
    return WeibullFit(float(shape), float(scale), float(scale * gamma_fn(1.0 + 1.0 / shape)), int(x.size),
                      float(ks.statistic), float(ks.pvalue), loglik)


def fit_exponential(gaps_h) -> ExponentialFit:
    """Exponential by maximum likelihood (the mean)."""
    x = _gaps(gaps_h)
    mean = float(x.mean())
    ks = stats.kstest(x, "expon", args=(0.0, mean))
    loglik = float(np.sum(stats.expon.logpdf(x, 0.0, mean)))
    return ExponentialFit(mean, int(x.size), float(ks.statistic), float(ks.pvalue), loglik)
