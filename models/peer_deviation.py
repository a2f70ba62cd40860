"""A label-free score: how far a node is from its own recent past *and* from its peers (issue 57).

A failure physics nobody listed still leaves one general clue: the node behaves unlike its own
past and unlike the nodes that share its hardware. Per sensor and step:

* ``z_self`` — the reading against the node's exponentially weighted mean and variance of the
  steps before it (half-life ``halflife_steps``; the first ``warmup_steps`` score nothing; each
  mean update clipped at ``clip`` standard deviations and the variance learnt from inliers only,
  so a drift is not learnt as normal at once);
* ``z_peer`` — the reading against the median and MAD of its peer group at the same step
  (1.4826 × MAD, floored at ``rel_floor`` of the median's size so a quantised sensor's zero MAD
  does not divide by zero);
* the sensor's deviation is ``min(z_self, z_peer)`` (unlike both), the node's score the largest
  over sensors, averaged over the last ``smooth_steps`` steps (a lone spike is not a trend).

:func:`vote_of` maps a score into (0, 1) monotonically, so the budget controller
(:mod:`hpcguard.models.budget`) and the online scoring take it as they take the ensemble's vote.
Offline and vectorised over nodes and sensors; the loop runs over steps only. Not wired into the
worker: on six randomised sites it warned 3 of 226 precursor failures within the budget
(``benchmarks/label_free_sites.py``, docs/research/2026-12-06-label-free-deviation-score.md); it
needs load-conditioned and job-aware peers first.

Example
-------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> x = 40.0 + rng.normal(0.0, 0.5, (8, 400, 1))
>>> x[3, 300:, 0] += np.linspace(0.0, 12.0, 100)      # node 3 heats up unlike its peers
>>> s = deviation_scores(x, halflife_steps=60, warmup_steps=60)
>>> int(np.nanargmax(s[:, -1])), bool(s[3, -1] > 5 * np.nanmax(s[np.arange(8) != 3, -1]))
(3, True)
"""
from __future__ import annotations

import warnings

import numpy as np


def deviation_scores(values: np.ndarray, groups=None, halflife_steps: float = 240.0, warmup_steps: int = 240,
                     smooth_steps: int = 4, rel_floor: float = 0.002, clip: float = 3.0) -> np.ndarray:
    """Scores ``(nodes, steps)`` of ``values (nodes, steps, sensors)`` (NaN = missing); NaN where a node
    has no reading or is still warming up. ``groups``: a peer-group label per node (None: one group)."""
    v = np.asarray(values, dtype=float)
    n, t, s = v.shape
    z_peer = np.full(v.shape, np.nan)
    labels = np.zeros(n, int) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: missing readings are expected
        for g in np.unique(labels):
            members = labels == g
            if members.sum() < 3:  # no peers to speak of: the node's own past decides
                z_peer[members] = np.inf
                continue
            block = v[members]
            med = np.nanmedian(block, axis=0)
            mad = 1.4826 * np.nanmedian(np.abs(block - med), axis=0)
            scale = np.maximum(mad, rel_floor * (np.abs(med) + 1.0))
            z_peer[members] = np.abs(block - med) / scale
        z_self = np.full(v.shape, np.nan)
        alpha = 1.0 - 0.5 ** (1.0 / float(halflife_steps))
        mean = np.full((n, s), np.nan)
        var = np.zeros((n, s))
        seen = np.zeros((n, s), int)
        for k in range(t):  # over steps only: every node and sensor at once
            x = v[:, k]
            ok = ~np.isnan(x)
            sd = np.sqrt(var) + rel_floor * (np.abs(mean) + 1.0)
            z = np.abs(x - mean) / sd
            z_self[:, k] = np.where(ok & (seen >= warmup_steps), z, np.nan)
            first = ok & np.isnan(mean)
            mean = np.where(first, x, mean)
            # why clipped: a deviation the node is in the middle of must not become its new normal at once
            d = np.where(ok, x - mean, 0.0)
            inlier = ok & ((seen < warmup_steps) | (np.abs(d) <= clip * sd))
            mean = mean + alpha * np.where(seen >= warmup_steps, np.clip(d, -clip * sd, clip * sd), d)
            var = np.where(inlier, (1.0 - alpha) * (var + alpha * d * d), var)
            seen += ok
        dev = np.fmin(z_self, z_peer)
        dev = np.where(np.isnan(z_self), np.nan, dev)
        score = np.nanmax(dev, axis=2)
    if smooth_steps > 1:
        filled = np.nan_to_num(score, nan=0.0)
        count = (~np.isnan(score)).astype(float)
        c1 = np.cumsum(filled, axis=1)
        c2 = np.cumsum(count, axis=1)
        pad = np.zeros((n, smooth_steps))
        c1 = np.concatenate([pad, c1], axis=1)
        c2 = np.concatenate([pad, c2], axis=1)
        num = c1[:, smooth_steps:] - c1[:, :-smooth_steps]
        den = c2[:, smooth_steps:] - c2[:, :-smooth_steps]
        with np.errstate(invalid="ignore", divide="ignore"):
            score = np.where(np.isnan(score), np.nan, num / den)
    return score


def vote_of(score: np.ndarray, scale: float = 10.0) -> np.ndarray:
    """A score as a vote in (0, 1): ``score / (score + scale)``, monotone; NaN stays NaN.

    >>> vote_of(np.array([0.0, 10.0, np.nan])).tolist()[:2]
    [0.0, 0.5]
    """
    s = np.asarray(score, float)
    return s / (s + float(scale))

