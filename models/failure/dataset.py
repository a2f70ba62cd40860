"""Training and evaluation samples of the failure ensemble from a sensor grid.

An *event* is a reference time ``T`` on one node with six feature vectors, one per
lead ``L`` in 2..7 minutes: the seven statistics of the 4-minute window (16 steps of
15 s) that ends ``L`` minutes before ``T`` (seed 000 §4.2.3, Fig. 4.4).  For a failure
event ``T`` is the failure time (label 1); for an ok event ``T`` is a time of healthy
operation (label 0).  Network ``i`` is trained on column ``i``; the voter on the six
networks' outputs of the same event.

Healthy reference times are those whose 7+4-minute history and ``T`` itself are not
within ``exclude_before_s`` before a failure of the node and not within
``downtime_s`` after one.  Ok events are drawn ``ok_ratio`` per failure (seed 000:
10:1) without replacement, seeded.

Missing samples (NaN) are handled in two steps: the window statistics ignore missing
samples (``window_features``); a feature that is still NaN (a sensor absent for the
whole window) is imputed with the training median of that feature, learned by
``learn_imputation`` and stored with the model.  Events whose windows have fewer than
``min_present`` present samples overall are dropped.

Example
-------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> values = rng.normal(size=(4, 2000, 10))
>>> ev = build_events(values, t0=0.0, grid_s=15.0, failure_nodes=[1], failure_times=[20000.0],
...                   ok_ratio=10, seed=0)
>>> ev.features.shape, int(ev.labels.sum())
((11, 6, 70), 1)
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from hpcguard.models.failure.networks import LEAD_MINUTES
from hpcguard.models.features import CANONICAL_SENSORS, window_features

WINDOW_STEPS = 16  # 4 minutes of 15 s samples


@dataclass
class Events:
    """``features (N, len(leads), 70)``, ``labels (N,)`` (1 = failure), ``nodes (N,)``, ``times (N,)``."""

    features: np.ndarray
    labels: np.ndarray
    nodes: np.ndarray
    times: np.ndarray

    def subset(self, idx: np.ndarray) -> "Events":
        return Events(self.features[idx], self.labels[idx], self.nodes[idx], self.times[idx])


def _check_grid(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    if v.ndim != 3 or v.shape[2] != len(CANONICAL_SENSORS):
        raise ValueError(f"values must be (nodes, steps, {len(CANONICAL_SENSORS)}), got shape {v.shape}")
    return v


def lead_offsets(leads: tuple[int, ...], grid_s: float) -> np.ndarray:
    """Steps between a window's end and the reference time, per lead."""
    off = np.asarray(leads, dtype=float) * 60.0 / grid_s
    if np.any(off != np.round(off)):
        raise ValueError(f"lead times {leads} min are not whole multiples of the {grid_s} s grid")
    return off.astype(int)


def event_features(values: np.ndarray, nodes: np.ndarray, ref_steps: np.ndarray, grid_s: float,
                   leads: tuple[int, ...] = LEAD_MINUTES, window_steps: int = WINDOW_STEPS,
                   chunk: int = 4096) -> np.ndarray:
    """``(N, len(leads), S*7)`` features of windows ending ``lead`` before each reference step.

    A window ending at step ``e`` (exclusive) covers steps ``e − window_steps .. e − 1``.
    """
    v = _check_grid(values)
    ends = np.asarray(ref_steps, int)[:, None] - lead_offsets(leads, grid_s)[None, :]   # (N, K)
    if ends.size and (ends.min() < window_steps or ends.max() > v.shape[1]):
        raise ValueError("reference time too close to the start or end of the recording for the windows")
    if ends.shape[0] == 0:
        return np.zeros((0, len(leads), v.shape[2] * 7))
    idx = ends[..., None] - window_steps + np.arange(window_steps)                     # (N, K, T)
    nodes = np.asarray(nodes, int)
    out = np.empty((len(nodes), len(leads), v.shape[2] * 7))
    for a in range(0, len(nodes), chunk):  # bounded memory: chunk × K × T × S samples at a time
        out[a:a + chunk] = window_features(v[nodes[a:a + chunk, None, None], idx[a:a + chunk]])
    return out


def healthy_mask(n_nodes: int, n_steps: int, t0: float, grid_s: float, failure_nodes, failure_times,
                 exclude_before_s: float = 900.0, downtime_s: float = 1800.0) -> np.ndarray:
    """``(nodes, steps)`` True where a step is healthy operation (not near a failure)."""
    mask = np.ones((n_nodes, n_steps), bool)
    fn = np.asarray(failure_nodes, int)
    fs = (np.asarray(failure_times, float) - t0) / grid_s
    lo = np.clip(np.floor(fs - exclude_before_s / grid_s).astype(int), 0, n_steps)
    hi = np.clip(np.ceil(fs + downtime_s / grid_s).astype(int) + 1, 0, n_steps)
    for node, a, b in zip(fn, lo, hi):  # one slice per failure (few), not per sample
        mask[node, a:b] = False
    return mask


def build_events(values: np.ndarray, t0: float, grid_s: float, failure_nodes, failure_times,
                 leads: tuple[int, ...] = LEAD_MINUTES, window_steps: int = WINDOW_STEPS,
                 ok_ratio: float = 10.0, exclude_before_s: float = 900.0, downtime_s: float = 1800.0,
                 min_present: float = 0.5, seed: int = 0, max_ok: int | None = None) -> Events:
    """Failure events (one per failure) and ``ok_ratio`` ok events per failure.

    ``max_ok`` caps the ok events (default ``ok_ratio × failures``); ``ok_ratio=inf``
    with ``max_ok=None`` takes every eligible healthy step (evaluation of fpr).
    """
    v = _check_grid(values)
    n_nodes, n_steps, _ = v.shape
    fn = np.asarray(failure_nodes, int).ravel()
    ft = np.asarray(failure_times, float).ravel()
    if fn.size != ft.size:
        raise ValueError("failure_nodes and failure_times differ in length")
    if fn.size and (fn.min() < 0 or fn.max() >= n_nodes):
        raise ValueError(f"failure node index outside 0..{n_nodes - 1}")
    history = int(lead_offsets(leads, grid_s).max()) + window_steps
    f_steps = np.floor((ft - t0) / grid_s).astype(int)
    usable = (f_steps >= history) & (f_steps <= n_steps)
    fn, ft, f_steps = fn[usable], ft[usable], f_steps[usable]

    healthy = healthy_mask(n_nodes, n_steps, t0, grid_s, fn, ft, exclude_before_s, downtime_s)
    # a reference step is eligible when its whole history [T − history, T] is healthy
    run = np.cumsum(np.pad(~healthy, ((0, 0), (1, 0))), axis=1)   # unhealthy steps before index
    steps = np.arange(history, n_steps)
    clean = (run[:, steps + 1] - run[:, steps - history]) == 0   # (nodes, candidate steps)
    cand_nodes, cand_idx = np.nonzero(clean)
    cand_steps = steps[cand_idx]
    rng = np.random.default_rng(seed)
    want = len(fn) * ok_ratio if max_ok is None else max_ok
    if np.isfinite(want) and want < cand_steps.size:
        pick = rng.choice(cand_steps.size, size=int(round(want)), replace=False)
        cand_nodes, cand_steps = cand_nodes[pick], cand_steps[pick]

    nodes = np.concatenate([fn, cand_nodes]).astype(int)
    ref = np.concatenate([f_steps, cand_steps]).astype(int)
    labels = np.concatenate([np.ones(len(fn), np.int8), np.zeros(len(cand_steps), np.int8)])
    feats = event_features(v, nodes, ref, grid_s, leads, window_steps)
    # drop events whose windows are mostly missing
    present = (~np.isnan(feats.reshape(len(feats), len(leads), -1, 7)[..., 0])).mean(axis=(1, 2)) if len(feats) \
        else np.zeros(0)
    keep = present >= min_present
    return Events(feats[keep], labels[keep], nodes[keep], (t0 + ref * grid_s)[keep])


def learn_imputation(features: np.ndarray) -> np.ndarray:
    """Per-feature training median (last axis), NaN-free (0 where a feature is never present)."""
    f = np.asarray(features, dtype=float).reshape(-1, np.shape(features)[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a feature never present → NaN → 0 below
        med = np.nanmedian(f, axis=0)
    return np.where(np.isnan(med), 0.0, med)


def impute(features: np.ndarray, medians: np.ndarray) -> np.ndarray:
    """Replace NaN features by the stored training medians."""
    f = np.asarray(features, dtype=float)
    return np.where(np.isnan(f), np.broadcast_to(medians, f.shape), f)


def stream_windows(values: np.ndarray, window_steps: int = WINDOW_STEPS) -> np.ndarray:
    """Every window of every node as the online agent sees it: ``(nodes, steps − T + 1, T, S)`` view.

    Window ``j`` covers steps ``j .. j + T − 1`` and is available at the end of step
    ``j + T − 1``.
    """
    v = _check_grid(values)
    return np.lib.stride_tricks.sliding_window_view(v, window_steps, axis=1).transpose(0, 1, 3, 2)


def event_windows(values: np.ndarray, nodes, ref_times, t0: float, grid_s: float, lead_minutes: float = 2,
                  window_steps: int = WINDOW_STEPS) -> np.ndarray:
    """Raw ``(N, T, S)`` windows ending ``lead_minutes`` before each reference time (for window-based
    detectors such as the baseline)."""
    v = _check_grid(values)
    ends = np.floor((np.asarray(ref_times, float) - t0) / grid_s).astype(int) - int(round(lead_minutes * 60 / grid_s))
    if ends.size and (ends.min() < window_steps or ends.max() > v.shape[1]):
        raise ValueError("reference time too close to the start or end of the recording for the windows")
    idx = ends[:, None] - window_steps + np.arange(window_steps)
    return v[np.asarray(nodes, int)[:, None], idx]
