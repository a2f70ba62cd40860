"""The lead-time networks of the failure ensemble (seed 000 §4.2.3).

Six feed-forward classifiers, one per lead time 2, 3, 4, 5, 6 and 7 minutes, each
70 inputs (seven statistics × ten sensors of a 4-minute window, normalised) → 52
``tanh`` hidden units → 2 softmax outputs (ok, failure).  Every network has its own
random initialisation (seeded) and its own training set (windows ending its lead
time before a failure).

Example
-------
>>> import torch
>>> torch.manual_seed(0) and None
>>> nets = make_networks(seed=0)
>>> [n.lead_minutes for n in nets]
[2, 3, 4, 5, 6, 7]
>>> p = nets[0].failure_probability(torch.zeros(3, 70))
>>> tuple(p.shape)
(3,)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn

LEAD_MINUTES: tuple[int, ...] = (2, 3, 4, 5, 6, 7)
N_INPUTS = 70
N_HIDDEN = 52
N_CLASSES = 2  # column 0 = ok, column 1 = failure


class LeadNetwork(nn.Module):
    """70 → 52 tanh → 2 softmax classifier for one lead time.

    ``forward`` returns logits (train with cross-entropy); ``probabilities`` the softmax.
    """

    def __init__(self, lead_minutes: int, n_inputs: int = N_INPUTS, n_hidden: int = N_HIDDEN):
        super().__init__()
        self.lead_minutes = int(lead_minutes)
        self.hidden = nn.Linear(n_inputs, n_hidden)
        self.out = nn.Linear(n_hidden, N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.hidden(x)))

    def probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """``(N, 2)`` softmax (ok, failure); rows sum to 1."""
        return torch.softmax(self.forward(x), dim=-1)

    def failure_probability(self, x: torch.Tensor) -> torch.Tensor:
        """``(N,)`` probability of the failure class."""
        return self.probabilities(x)[..., 1]


def make_networks(seed: int = 0, leads: tuple[int, ...] = LEAD_MINUTES) -> list[LeadNetwork]:
    """One freshly initialised network per lead, each from its own seed (``seed + i``)."""
    nets = []
    for i, lead in enumerate(leads):
        torch.manual_seed(seed * 1000 + i)
        nets.append(LeadNetwork(lead))
    return nets


# Rows per matrix product at inference: a batch is computed in blocks of exactly this many rows (the
# last one padded with zeros), because a BLAS product rounds a row differently with the number of
# rows it multiplies; with every product the same shape, a row's result never depends on its batch.
BLOCK_ROWS = 256


class StackedNetworks(NamedTuple):
    """The networks' weights as inference reads them: float32, every hidden layer side by side.

    The two softmax outputs of a network only matter through their difference (``p(failure) =
    sigmoid(l1 − l0)``), so the output layers are one block-diagonal ``(K·H, K)`` matrix of
    failure − ok weights.  Build once per set of weights (:meth:`from_networks`) and reuse.
    """

    hidden_weight: np.ndarray   # (D, K·H) float32: network k's hidden layer in columns k·H … (k + 1)·H − 1
    hidden_bias: np.ndarray     # (K·H,) float32
    logit_weight: np.ndarray    # (K·H, K) float32: failure − ok output weights, network k's in column k
    logit_bias: np.ndarray      # (K,) float64: failure − ok output bias

    @classmethod
    def from_networks(cls, nets: list[LeadNetwork]) -> "StackedNetworks":
        """Fuse ``nets`` (lead order)."""
        hidden_weight = np.concatenate([n.hidden.weight.detach().numpy().T for n in nets], axis=1)
        hidden_bias = np.concatenate([n.hidden.bias.detach().numpy() for n in nets])
        out_weight = [n.out.weight.detach().double().numpy() for n in nets]
        out_bias = [n.out.bias.detach().double().numpy() for n in nets]
        n_hidden = hidden_bias.size // len(nets)
        logit_weight = np.zeros((hidden_bias.size, len(nets)), np.float32)
        for k, w in enumerate(out_weight):
            logit_weight[k * n_hidden:(k + 1) * n_hidden, k] = w[1] - w[0]
        return cls(np.ascontiguousarray(hidden_weight, np.float32), hidden_bias.astype(np.float32), logit_weight,
                   np.array([b[1] - b[0] for b in out_bias]))

    def failure_probabilities(self, x: np.ndarray) -> np.ndarray:
        """Failure probability of every network, ``(N, K)`` float64, from ``(N, D)`` inputs (all
        networks read the same row) or ``(N, K, D)`` (network ``k`` reads ``x[:, k]``).

        The hidden layers are float32 matrix products of ``BLOCK_ROWS`` rows at a time, so a
        row's result is the same bits in any batch: the worker (a few nodes at a time) computes
        exactly what the offline scan (thousands at once) computes.
        """
        n_nets, (n_inputs, width) = self.logit_bias.size, self.hidden_weight.shape
        z = np.asarray(x, dtype=np.float32)
        per_network = z.ndim == 3
        if z.shape[1:] not in ((n_inputs,), (n_nets, n_inputs)):
            raise ValueError(f"features must be (N, {n_inputs}) or (N, {n_nets}, {n_inputs}), got {z.shape}")
        n_hidden = width // n_nets
        logits = np.empty((len(z), n_nets), np.float32)
        hidden = np.empty((BLOCK_ROWS, width), np.float32)
        for start in range(0, len(z), BLOCK_ROWS):
            rows = z[start:start + BLOCK_ROWS]
            n_rows = len(rows)
            if n_rows < BLOCK_ROWS:
                rows = np.concatenate([rows, np.zeros((BLOCK_ROWS - n_rows, *z.shape[1:]), np.float32)])
            for k in range(n_nets):   # one product per network, whichever input it reads: the same bits
                cols = slice(k * n_hidden, (k + 1) * n_hidden)
                hidden[:, cols] = (rows[:, k] if per_network else rows) @ self.hidden_weight[:, cols]
            hidden += self.hidden_bias
            np.tanh(hidden, out=hidden)
            logits[start:start + n_rows] = (hidden @ self.logit_weight)[:n_rows]
        return 1.0 / (1.0 + np.exp(-(logits.astype(float) + self.logit_bias)))
