"""The learned ``conv`` feature set: a convolutional encoder of a node's 24-minute history.

The six lead-time networks read features; on the site profiles the far tail (fpr 2e-4)
is bounded by what nine statistics per sensor keep of a window (docs/results.md, "A
learned convolutional front-end").  This encoder reads the whole ``robust`` history
as a sequence instead (:func:`models.features.sequence_inputs`: 23 channels × 96 steps
of 15 s) through three 1-D convolutions (kernel 5, dilations 1, 2, 4: a receptive
field of 29 steps, about 7 minutes), and pools each of its 48 output channels three
ways: the maximum over the last 6 minutes, the mean over the history and the last
step.  Those 144 values are the networks' inputs.

It is fitted once per model, before the networks, on the failure and healthy events of
the networks' period (``OK_PER_FAILURE`` healthy events per failure, ``PER_LOOK_ALIKE`` on
each benign look-alike), each seen through the history of one of the six leads, drawn, so
that every lead network reads inputs the encoder was fitted for; a logistic head is then
dropped: the networks, the LSTM voter and its threshold are trained on its outputs as on
any feature set, and the voter's period is new to it.

Example
-------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> h = rng.normal(50, 0.5, (200, 96, 10))
>>> y = (np.arange(200) < 40).astype(np.int8)
>>> h[:40, -16:, 3] += np.linspace(0, 6, 16)       # PSU temperature climbing before failures
>>> enc, report = fit_encoder(h, y, seed=0, epochs=12)
>>> fs = encoder_feature_set(enc)
>>> fs.name, fs.history_steps, fs(h[:3]).shape
('conv', 96, (3, 144))
>>> report["train_auc"] > 0.9
True
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from hpcguard.models.features import LEARNED_FEATURE_SETS, SEQUENCE_CHANNELS, FeatureSet, sequence_inputs

HISTORY_STEPS = LEARNED_FEATURE_SETS["conv"]
# healthy events per failure and hard negatives per look-alike the encoder is fitted on: twice the
# networks' draw (docs/results.md measured the encoder's far tail with this one)
OK_PER_FAILURE, PER_LOOK_ALIKE = 20, 6
CHANNELS = (32, 48, 48)
KERNEL = 5
RECENT_STEPS = 24  # the max-pool's span: the last 6 minutes
POOLS = ("recent_max", "mean", "last")


class SequenceEncoder(nn.Module):
    """Three dilated 1-D convolutions over ``(N, 23, T)`` sequences, pooled to ``(N, 144)``."""

    def __init__(self, in_channels: int = len(SEQUENCE_CHANNELS), channels: tuple[int, ...] = CHANNELS):
        super().__init__()
        layers: list[nn.Module] = []
        prev = in_channels
        for i, c in enumerate(channels):
            layers += [nn.Conv1d(prev, c, KERNEL, padding=(KERNEL // 2) * 2 ** i, dilation=2 ** i), nn.ReLU()]
            prev = c
        self.conv = nn.Sequential(*layers)
        self.head = nn.Linear(prev * len(POOLS), 1)   # fitting only: the networks replace it
        self.channels = tuple(channels)

    @property
    def architecture(self) -> dict[str, Any]:
        """What a model manifest records of it (``channels`` rebuilds it)."""
        return {"channels": list(self.channels), "kernel": KERNEL,
                "dilations": [2 ** i for i in range(len(self.channels))]}

    @property
    def n_outputs(self) -> int:
        return self.channels[-1] * len(POOLS)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return _pool(self.conv(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(x)).squeeze(1)

    def features(self, windows: np.ndarray, batch: int = 2048) -> np.ndarray:
        """``(N, 144)`` encoder outputs of ``(N, 96, 10)`` node histories (NaN = missing).

        Computed in float64 from the float32 weights: float32 convolutions round differently
        with the batch size, and the worker (a few nodes at a time) must compute exactly
        what the offline scan (thousands at once) computes.
        """
        w = np.asarray(windows, dtype=float)
        out = np.empty((len(w), self.n_outputs))
        with torch.no_grad():
            for a in range(0, len(w), batch):
                h = torch.from_numpy(sequence_inputs(w[a:a + batch])).double()
                for layer in self.conv:
                    if isinstance(layer, nn.Conv1d):
                        h = F.conv1d(h, layer.weight.double(), layer.bias.double(), padding=layer.padding,
                                     dilation=layer.dilation)
                    else:
                        h = torch.relu(h)
                out[a:a + batch] = _pool(h).numpy()
        return out


def _pool(h: torch.Tensor) -> torch.Tensor:
    """``(N, C, T)`` → ``(N, 3C)``: max over the last 6 minutes, mean, last step."""
    return torch.cat([h[..., -RECENT_STEPS:].amax(-1), h.mean(-1), h[..., -1]], dim=1)


# the history itself, flattened (96 x 10 values, as many as its names): the encoder's training input
RAW_HISTORY = FeatureSet("history", HISTORY_STEPS, lambda w: w.reshape(*w.shape[:-2], -1),
                         tuple(f"t{i}" for i in range(HISTORY_STEPS)), "the history itself")


def encoder_feature_set(encoder: SequenceEncoder) -> FeatureSet:
    """The ``conv`` :class:`FeatureSet` of a fitted encoder (what a model's networks read)."""
    names = tuple(f"conv{c}.{pool}" for pool in POOLS for c in range(encoder.channels[-1]))

    def transform(windows: np.ndarray) -> np.ndarray:
        w = np.asarray(windows, dtype=float)
        flat = w.reshape(-1, *w.shape[-2:])
        return encoder.features(flat).reshape(*w.shape[:-2], encoder.n_outputs)

    return FeatureSet("conv", HISTORY_STEPS, transform, POOLS, "a convolutional encoder of the robust history "
                      "(23 channels x 96 steps), fitted with the model: 144 pooled outputs", names=names)


def fit_encoder(windows: np.ndarray, labels: np.ndarray, seed: int = 0, epochs: int = 14, batch: int = 512,
                lr: float = 3e-3, progress: Callable[[str], None] | None = None
                ) -> tuple[SequenceEncoder, dict[str, Any]]:
    """Fit a :class:`SequenceEncoder` (with its logistic head) on ``(N, 96, 10)`` histories.

    Mini-batch AdamW with a one-cycle learning rate, the failure class weighted by the
    square root of the class ratio; seeded (weights and batch order).
    """
    from sklearn.metrics import roc_auc_score

    y = np.asarray(labels).astype(np.float32)
    if len(y) != len(windows) or y.sum() < 2 or (y == 0).sum() < 2:
        raise ValueError(f"the encoder needs failures and healthy events: {int(y.sum())} failures, "
                         f"{int((y == 0).sum())} healthy of {len(y)}")
    x = torch.from_numpy(sequence_inputs(np.asarray(windows, dtype=float)))
    yt = torch.from_numpy(y)
    torch.manual_seed(seed)
    enc = SequenceEncoder()
    opt = torch.optim.AdamW(enc.parameters(), lr=lr / 3, weight_decay=1e-4)
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(float(np.sqrt((y == 0).sum() / y.sum()))))
    steps = max(1, (len(y) + batch - 1) // batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=epochs * steps)
    order = torch.Generator().manual_seed(seed)
    losses = []
    for epoch in range(epochs):
        enc.train()
        perm = torch.randperm(len(y), generator=order)
        total = 0.0
        for a in range(0, len(y), batch):
            b = perm[a:a + batch]
            opt.zero_grad()
            loss = loss_fn(enc(x[b]), yt[b])
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(b)
        losses.append(total / len(y))
        if progress:
            progress(f"encoder epoch {epoch + 1}/{epochs}: loss {losses[-1]:.4f}")
    enc.eval()
    with torch.no_grad():
        scores = torch.cat([enc(x[a:a + 4096]) for a in range(0, len(y), 4096)]).numpy()
    return enc, {"events": int(len(y)), "failures": int(y.sum()), "epochs": epochs, "loss": losses,
                 "train_auc": float(roc_auc_score(y, scores))}
