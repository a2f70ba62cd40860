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


def stacked_failure_probabilities(nets: list[LeadNetwork], x: np.ndarray) -> np.ndarray:
    """Failure probability of every network, ``(N, len(nets))`` float64.

    ``x`` is ``(N, 70)`` (all networks see the same window) or ``(N, len(nets), 70)``
    (network ``i`` sees ``x[:, i]``).  Computed in float64 with numpy's own ``einsum``
    loops, not a BLAS matrix product: a row's result then never depends on how many
    rows share its call, so the worker (a few nodes at a time) computes exactly what the
    offline scan (thousands at once) computes.
    """
    x = np.asarray(x, dtype=float)
    w1 = np.stack([n.hidden.weight.detach().double().numpy() for n in nets])   # (K, H, D)
    b1 = np.stack([n.hidden.bias.detach().double().numpy() for n in nets])     # (K, H)
    w2 = np.stack([n.out.weight.detach().double().numpy() for n in nets])      # (K, 2, H)
    b2 = np.stack([n.out.bias.detach().double().numpy() for n in nets])        # (K, 2)
    if x.ndim == 2 and x.shape[1] == w1.shape[2]:
        h = np.tanh(np.einsum("nd,khd->nkh", x, w1) + b1)
    elif x.ndim == 3 and x.shape[1] == len(nets) and x.shape[2] == w1.shape[2]:
        h = np.tanh(np.einsum("nkd,khd->nkh", x, w1) + b1)
    else:
        raise ValueError(f"features must be (N, {w1.shape[2]}) or (N, {len(nets)}, {w1.shape[2]}), got {x.shape}")
    logits = np.einsum("nkh,kch->nkc", h, w2) + b2
    # softmax over 2 classes: p(failure) = sigmoid(l1 − l0)
    return 1.0 / (1.0 + np.exp(logits[..., 0] - logits[..., 1]))
