"""Voting over the lead-time networks (seed 000 §4.2.3, Figs. 4.4 and 4.5).

* **Unanimous voting** — the networks classify in sequence; the first negative stops
  the sequence with a final "no failure"; a failure is predicted only when all of the
  first ``n_networks`` classify positive.  The vectorised equivalent is a cumulative
  product of the per-network decisions.
* **Learned voting** — an LSTM reads the networks' failure probabilities as a sequence
  (one network per time step, 1 input per step, 6 steps), has 4 hidden units and a
  2-class output; its decision threshold is chosen on the ROC curve of a validation
  split (``choose_threshold``).

Example
-------
>>> import numpy as np
>>> p = np.array([[0.9, 0.8, 0.2], [0.9, 0.9, 0.9], [0.1, 0.9, 0.9]])
>>> unanimous_vote(p, 2).tolist(), unanimous_vote(p, 3).tolist()
([True, True, False], [False, True, False])
>>> networks_evaluated(p, 3).tolist()          # sequence stops at the first negative
[3, 3, 1]
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn


def _decisions(probs: np.ndarray, n_networks: int, threshold: float) -> np.ndarray:
    p = np.asarray(probs, dtype=float)
    if p.ndim != 2:
        raise ValueError(f"probs must be (N, networks), got shape {p.shape}")
    if not 1 <= int(n_networks) <= p.shape[1]:
        raise ValueError(f"n_networks must be in 1..{p.shape[1]}, got {n_networks}")
    return p[:, : int(n_networks)] > threshold


def unanimous_vote(probs: np.ndarray, n_networks: int, threshold: float = 0.5) -> np.ndarray:
    """Final prediction of the sequential all-agree vote over the first ``n_networks`` columns.

    ``threshold=0.5`` is the paper's *argmax* of the two softmax outputs.
    """
    return _decisions(probs, n_networks, threshold).all(axis=1)


def networks_evaluated(probs: np.ndarray, n_networks: int, threshold: float = 0.5) -> np.ndarray:
    """How many networks the sequence ran before stopping (first negative included)."""
    d = _decisions(probs, n_networks, threshold)
    positives_before_stop = np.cumprod(d, axis=1).sum(axis=1)
    return np.minimum(positives_before_stop + 1, d.shape[1])


class LstmVoter(nn.Module):
    """LSTM vote: the networks' failure probabilities in sequence → 4 hidden → 2 outputs.

    >>> v = LstmVoter()
    >>> tuple(v.failure_probability(torch.rand(5, 6)).shape)
    (5,)
    """

    def __init__(self, n_hidden: int = 4):
        super().__init__()
        self.lstm = nn.LSTM(input_size=1, hidden_size=n_hidden, batch_first=True)
        self.out = nn.Linear(n_hidden, 2)

    def forward(self, probs: torch.Tensor) -> torch.Tensor:
        """Logits ``(N, 2)`` from ``(N, K)`` network probabilities (K steps)."""
        _, (h, _) = self.lstm(probs.unsqueeze(-1))
        return self.out(h[-1])

    def failure_probability(self, probs: torch.Tensor) -> torch.Tensor:
        logits = self.forward(probs)
        return torch.sigmoid(logits[:, 1] - logits[:, 0])

    def vote(self, probs: np.ndarray) -> np.ndarray:
        """``(N,)`` float64 failure probability of ``(N, K)`` network probabilities, computed
        with numpy (:meth:`VoterWeights.vote`) so that a row's result never depends on its
        batch-mates: what inference and the threshold's choice use.

        >>> v = LstmVoter()
        >>> p = np.random.default_rng(0).random((50, 6))
        >>> bool(np.array_equal(v.vote(p)[7:8], v.vote(p[7:8])))
        True
        >>> with torch.no_grad():
        ...     bool(np.allclose(v.vote(p), v.failure_probability(torch.as_tensor(p, dtype=torch.float32)), atol=1e-6))
        True
        """
        return VoterWeights.from_voter(self).vote(probs)


class VoterWeights(NamedTuple):
    """An :class:`LstmVoter`'s weights as inference reads them (float32, gates in PyTorch's order:
    input, forget, cell, output), with the rows of the three sigmoid gates halved (exact in binary
    floating point): ``sigmoid(x) = (1 + tanh(x / 2)) / 2``, so one ``tanh`` serves all four gates.
    Build once per set of weights (:meth:`from_voter`) and reuse.
    """

    input_weight: np.ndarray    # (4H, 1) float32
    hidden_weight: np.ndarray   # (4H, H) float32
    bias: np.ndarray            # (4H, 1) float32: input-to-hidden + hidden-to-hidden bias
    logit_weight: np.ndarray    # (H,) float64: failure − ok output weights
    logit_bias: float           # failure − ok output bias

    @classmethod
    def from_voter(cls, voter: LstmVoter) -> "VoterWeights":
        """The weights of ``voter`` (a one-layer LSTM with a 1-input step)."""
        lstm = voter.lstm
        n_hidden = lstm.hidden_size
        halve = np.full(4 * n_hidden, 0.5)
        halve[2 * n_hidden:3 * n_hidden] = 1.0   # the cell gate is a tanh already
        w_ih = lstm.weight_ih_l0.detach().double().numpy()
        w_hh = lstm.weight_hh_l0.detach().double().numpy()
        bias = (lstm.bias_ih_l0.detach().double() + lstm.bias_hh_l0.detach().double()).numpy()
        out_weight = voter.out.weight.detach().double().numpy()
        out_bias = voter.out.bias.detach().double().numpy()
        return cls((w_ih * halve[:, None]).astype(np.float32), (w_hh * halve[:, None]).astype(np.float32),
                   (bias * halve).astype(np.float32)[:, None], out_weight[1] - out_weight[0],
                   float(out_bias[1] - out_bias[0]))

    def vote(self, probs: np.ndarray) -> np.ndarray:
        """``(N,)`` float64 failure probability of ``(N, K)`` network probabilities (K steps).

        The state is kept as ``(gates, N)`` float32 rows and every step is elementwise (no
        matrix product: the recurrence's ``H`` terms are summed one by one), so a row's result
        is the same bits in any batch.  The output's sigmoid is float64.
        """
        p = np.asarray(probs, dtype=float)
        if p.ndim != 2:
            raise ValueError(f"probs must be (N, networks), got shape {p.shape}")
        steps = np.ascontiguousarray(p.T, dtype=np.float32)      # (K, N)
        n_hidden = self.hidden_weight.shape[1]
        h = np.zeros((n_hidden, len(p)), np.float32)
        c = np.zeros_like(h)
        gates = np.empty((4 * n_hidden, len(p)), np.float32)
        term = np.empty_like(gates)
        i, f, g, o = (gates[k * n_hidden:(k + 1) * n_hidden] for k in range(4))
        for x in steps:
            np.multiply(self.input_weight, x, out=gates)
            gates += self.bias
            for j in range(n_hidden):
                np.multiply(self.hidden_weight[:, j:j + 1], h[j], out=term)
                gates += term
            np.tanh(gates, out=gates)
            for sigmoid in (i, f, o):   # (1 + tanh(x / 2)) / 2
                sigmoid *= 0.5
                sigmoid += 0.5
            c *= f
            i *= g
            c += i
            h = np.tanh(c)
            h *= o
        hidden = h.astype(float)
        logit = self.logit_bias + sum(w * row for w, row in zip(self.logit_weight, hidden))
        return 1.0 / (1.0 + np.exp(-logit))


def choose_threshold(y_true, scores, target_fpr: float | None = None, sample_weight=None,
                     confidence: float | None = None, clusters=None, histories=None) -> dict[str, float]:
    """Decision threshold from the ROC curve of a validation set.

    ``target_fpr=None`` follows seed 000 (Fig. 4.11c): among the ROC points at the lowest
    false-positive step (the smallest non-zero fpr; fpr = 0 points included) take the
    one with the highest tpr — on ties the lower fpr.  With a ``target_fpr`` the highest
    tpr among points with fpr ≤ target is taken (``target_met``); when the validation set
    cannot resolve the target, the strictest finite threshold (``target_met`` false).  A sample is positive when
    ``score >= threshold``; ``sample_weight`` weighs the events in the rates (see :func:`roc`).

    ``confidence`` (with a ``target_fpr``) makes the target a ceiling kept with that confidence:
    a point counts only when the one-sided exact upper bound of its fpr
    (:func:`~hpcguard.models.metrics.rate_upper_bound`, on the healthy events' Kish effective
    number) is ≤ target, so a threshold resting on one or two false positives is not taken
    for the target's (its bound, ``fpr_upper``, is reported either way, at 95 % without a
    confidence, with the effective number it rests on, ``ok_effective``).  ``clusters`` (one id per
    event; the healthy events' are read) makes that bound count episodes: at each point the
    effective number is divided by the design effect of the false positives over it
    (:func:`~hpcguard.models.metrics.design_effects`, reported as ``fpr_design_effect``), since
    false positives that come in runs on one node vary as a count of runs.  ``histories`` (one id
    per event: which recording it comes from) divides it by the spread of the histories' own rates
    (:func:`~hpcguard.models.metrics.history_design_effects`; the larger of the two effects counts),
    so a rate that rests on one history's episode is not taken for the others'.

    >>> y = [0, 0, 0, 0, 1, 1, 1]
    >>> s = [0.1, 0.2, 0.3, 0.8, 0.7, 0.9, 0.95]
    >>> t = choose_threshold(y, s)
    >>> (t["threshold"], round(t["tpr"], 3), t["fpr"])
    (0.7, 1.0, 0.25)
    >>> rng = np.random.default_rng(0)
    >>> y = np.r_[np.zeros(100_000), np.ones(200)]
    >>> s = np.r_[rng.normal(0, 1, 100_000), rng.normal(3.5, 1, 200)]
    >>> point = choose_threshold(y, s, target_fpr=2e-4)
    >>> kept = choose_threshold(y, s, target_fpr=2e-4, confidence=0.95)
    >>> round(point["fpr"] * 1e4, 1), round(point["fpr_upper"] * 1e4, 1)    # 17 of 100,000: up to 2.5e-4
    (1.7, 2.5)
    >>> round(kept["fpr"] * 1e4, 1), kept["fpr_upper"] <= 2e-4, kept["threshold"] > point["threshold"]
    (1.2, True, True)
    >>> s[:100_000] = np.repeat(rng.normal(0, 1, 20_000), 5)      # healthy events in runs of five alike
    >>> runs = np.r_[np.repeat(np.arange(20_000), 5), np.full(200, -1)]
    >>> alone = choose_threshold(y, s, target_fpr=5e-4, confidence=0.95)
    >>> counted = choose_threshold(y, s, target_fpr=5e-4, confidence=0.95, clusters=runs)
    >>> round(alone["fpr"] * 1e4, 1), round(counted["fpr"] * 1e4, 1), counted["fpr_design_effect"]  # 35 events: 7 runs
    (3.5, 2.0, 5.0)
    >>> s = np.r_[rng.normal(0, 1, 100_000), rng.normal(3.5, 1, 200)]
    >>> s[:5] += 4.0                                   # one history's episode: five high in its first draws
    >>> four = np.r_[np.repeat(np.arange(4), 25_000), np.full(200, -1)]
    >>> pooled = choose_threshold(y, s, target_fpr=2e-4, confidence=0.95)
    >>> spread = choose_threshold(y, s, target_fpr=2e-4, confidence=0.95, histories=four)
    >>> spread["threshold"] > pooled["threshold"], spread["fpr_design_effect"] > 1.5
    (True, True)
    """
    from hpcguard.models.metrics import (design_effects, effective_count, history_design_effects,
                                         rate_upper_bound, roc)

    curve = roc(y_true, scores, sample_weight)
    fpr, tpr, thr = curve["fpr"], curve["tpr"], curve["thresholds"]
    finite = np.isfinite(thr)
    negative = np.asarray(y_true).ravel() == 0
    w_neg = (np.ones(int(negative.sum())) if sample_weight is None
             else np.asarray(sample_weight, dtype=float).ravel()[negative])
    n_eff = effective_count(w_neg)
    kept = confidence is not None and target_fpr is not None
    effect = np.ones(thr.size)
    s_neg = np.asarray(scores, dtype=float).ravel()[negative]
    if clusters is not None:
        effect = design_effects(s_neg, w_neg, np.asarray(clusters).ravel()[negative], thr)
    if histories is not None:
        effect = np.maximum(effect, history_design_effects(s_neg, w_neg, np.asarray(histories).ravel()[negative],
                                                           thr))
    trials = n_eff / effect
    bound = rate_upper_bound(fpr * trials, trials, confidence) if kept else None   # every point's, to choose by
    if target_fpr is None:
        if confidence is not None:
            raise ValueError("a confidence keeps a target_fpr: give one")
        positive = fpr[fpr > 0]
        limit = positive.min() if positive.size else 0.0
    else:
        if not 0 <= target_fpr <= 1:
            raise ValueError(f"target_fpr must be in [0, 1], got {target_fpr}")
        if confidence is not None and not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        limit = float(target_fpr)
    ok = finite & ((bound <= limit + 1e-15) if kept else (fpr <= limit + 1e-15))
    met = bool(ok.any())
    if not met:  # too few healthy validation events for the target: take the strictest finite threshold
        if not finite.any():
            raise ValueError("no finite ROC threshold (empty validation scores)")
        ok = finite & (fpr <= fpr[finite].min() + 1e-15)
    idx = np.flatnonzero(ok)
    best = idx[np.lexsort((fpr[idx], -tpr[idx]))[0]]
    return {"threshold": float(thr[best]), "tpr": float(tpr[best]), "fpr": float(fpr[best]),
            "fpr_upper": float(bound[best] if kept else rate_upper_bound(fpr[best] * trials[best], trials[best],
                                                                         0.95)),
            "fpr_design_effect": round(float(effect[best]), 3),
            "ok_effective": round(n_eff, 1), "auc": curve["auc"], "target_fpr": target_fpr,
            "confidence": confidence, "target_met": met}
