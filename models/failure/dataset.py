"""Training and evaluation samples of the failure ensemble from a sensor grid.

An *event* is a reference time ``T`` on one node with six feature vectors, one per
lead ``L`` in 2..7 minutes: the feature set (``models.features.FEATURE_SETS``) of the
node's history ending ``L`` minutes before ``T`` — for the paper's set the 4-minute
window (16 steps of 15 s), for the site set that window plus its trailing baseline
(seed 000 §4.2.3, Fig. 4.4).  For a failure event ``T`` is the failure time (label 1);
for an ok event ``T`` is a time of healthy operation (label 0).  Network ``i`` is
trained on column ``i``; the voter on the six networks' outputs of the same event.

Healthy reference times are those whose whole history and ``T`` itself are not
within ``exclude_before_s`` before a failure of the node and not within
``downtime_s`` after one.  Ok events are drawn ``ok_ratio`` per failure (seed 000:
10:1) without replacement, seeded; *hard negatives* are extra ok events placed on
benign look-alike anomalies (``look_alikes``), so the networks learn what is not a
precursor.

Missing samples (NaN): the paper's statistics ignore missing samples; a feature that
is still NaN (a sensor absent for the whole window) is imputed with the training
median of that feature (``learn_imputation``, stored with the model).  The site set
carries explicit missing masks instead.  Events whose 4-minute windows hold fewer than
``min_present`` of their samples are dropped.

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
from hpcguard.models.features import CANONICAL_SENSORS, FEATURE_SETS, WINDOW_STEPS, FeatureSet


@dataclass
class Events:
    """``features (N, len(leads), F)``, ``labels (N,)`` (1 = failure), ``nodes (N,)``, ``times (N,)``,
    ``hard (N,)`` (True for an ok event placed on a benign look-alike anomaly), ``node_steps (N,)``
    (how many of the history's node-steps an ok event was drawn to stand for: the eligible steps
    over the draws, or a look-alike window's steps over its hard negatives; 1 for a failure),
    ``source (N,)`` (which history an event comes from, where several share node numbers and
    times; 0 unless set)."""

    features: np.ndarray
    labels: np.ndarray
    nodes: np.ndarray
    times: np.ndarray
    hard: np.ndarray | None = None
    node_steps: np.ndarray | None = None
    source: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.hard is None:
            self.hard = np.zeros(len(self.labels), bool)
        if self.node_steps is None:
            self.node_steps = np.ones(len(self.labels))
        if self.source is None:
            self.source = np.zeros(len(self.labels), np.int64)

    def subset(self, idx: np.ndarray) -> "Events":
        return Events(self.features[idx], self.labels[idx], self.nodes[idx], self.times[idx], self.hard[idx],
                      self.node_steps[idx], self.source[idx])

    @staticmethod
    def concat(parts: list["Events"]) -> "Events":
        """One ``Events`` of several (e.g. one per data directory)."""
        return Events(*(np.concatenate([getattr(p, f) for p in parts])
                        for f in ("features", "labels", "nodes", "times", "hard", "node_steps", "source")))


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
                   leads: tuple[int, ...] = LEAD_MINUTES, features: FeatureSet = FEATURE_SETS["paper"],
                   budget: int = 4_000_000) -> np.ndarray:
    """``(N, len(leads), F)`` features of the histories ending ``lead`` before each reference step.

    A history ending at step ``e`` (exclusive) covers steps ``e − history_steps .. e − 1``;
    ``budget`` bounds the samples cut at a time (memory).
    """
    v = _check_grid(values)
    hist = features.history_steps
    ends = np.asarray(ref_steps, int)[:, None] - lead_offsets(leads, grid_s)[None, :]   # (N, K)
    if ends.size and (ends.min() < hist or ends.max() > v.shape[1]):
        raise ValueError("reference time too close to the start or end of the recording for the windows")
    n_feat = len(features.feature_names)
    if ends.shape[0] == 0:
        return np.zeros((0, len(leads), n_feat))
    idx = ends[..., None] - hist + np.arange(hist)                                       # (N, K, T)
    nodes = np.asarray(nodes, int)
    out = np.empty((len(nodes), len(leads), n_feat))
    chunk = max(1, budget // (len(leads) * hist * v.shape[2]))
    for a in range(0, len(nodes), chunk):
        out[a:a + chunk] = features(v[nodes[a:a + chunk, None, None], idx[a:a + chunk]])
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
                 leads: tuple[int, ...] = LEAD_MINUTES, features: FeatureSet = FEATURE_SETS["paper"],
                 ok_ratio: float = 10.0, exclude_before_s: float = 900.0, downtime_s: float = 1800.0,
                 min_present: float = 0.5, seed: int = 0, max_ok: int | None = None,
                 look_alikes: tuple | None = None, per_look_alike: int = 3, ok_after: float | None = None) -> Events:
    """Failure events (one per failure) and ``ok_ratio`` ok events per failure.

    ``max_ok`` caps the ok events (default ``ok_ratio × failures``); ``ok_ratio=inf``
    with ``max_ok=None`` takes every eligible healthy step (evaluation of fpr).
    ``look_alikes = (node indices, start times, end times)`` of benign anomalies adds
    ``per_look_alike`` hard-negative ok events per anomaly, with reference times drawn
    uniformly in ``[start + 2 min, end + 7 min]`` so that the lead windows overlap it.
    ``ok_after`` draws ok events only at or after that time (the voter's period of a
    time-based split).
    """
    v = _check_grid(values)
    n_nodes, n_steps, n_sensors = v.shape
    fn = np.asarray(failure_nodes, int).ravel()
    ft = np.asarray(failure_times, float).ravel()
    if fn.size != ft.size:
        raise ValueError("failure_nodes and failure_times differ in length")
    if fn.size and (fn.min() < 0 or fn.max() >= n_nodes):
        raise ValueError(f"failure node index outside 0..{n_nodes - 1}")
    offsets = lead_offsets(leads, grid_s)
    history = int(offsets.max()) + features.history_steps
    f_steps = np.floor((ft - t0) / grid_s).astype(int)
    usable = (f_steps >= history) & (f_steps <= n_steps)
    fn, ft, f_steps = fn[usable], ft[usable], f_steps[usable]

    healthy = healthy_mask(n_nodes, n_steps, t0, grid_s, fn, ft, exclude_before_s, downtime_s)
    # a reference step is eligible when its whole history [T − history, T] is healthy
    run = np.cumsum(np.pad(~healthy, ((0, 0), (1, 0))), axis=1)   # unhealthy steps before index
    steps = np.arange(history, n_steps)
    clean = (run[:, steps + 1] - run[:, steps - history]) == 0   # (nodes, candidate steps)
    if ok_after is not None:
        clean = clean & (t0 + steps * grid_s >= ok_after)[None, :]
    cand_nodes, cand_idx = np.nonzero(clean)
    cand_steps = steps[cand_idx]
    rng = np.random.default_rng(seed)
    want = len(fn) * ok_ratio if max_ok is None else max_ok
    eligible = cand_steps.size
    if np.isfinite(want) and want < cand_steps.size:
        pick = rng.choice(cand_steps.size, size=int(round(want)), replace=False)
        cand_nodes, cand_steps = cand_nodes[pick], cand_steps[pick]
    hard_nodes, hard_steps, hard_span = np.zeros(0, int), np.zeros(0, int), np.zeros(0)
    if look_alikes is not None and len(look_alikes[0]):
        an, a0, a1 = (np.asarray(a) for a in look_alikes)
        an = np.repeat(an.astype(int), per_look_alike)
        lo = np.repeat(a0.astype(float) + 120.0, per_look_alike)
        hi = np.repeat(np.maximum(a1.astype(float), a0.astype(float)) + 420.0, per_look_alike)
        hs = np.floor((lo + rng.random(lo.size) * (hi - lo) - t0) / grid_s).astype(int)
        inside = (an >= 0) & (an < n_nodes) & (hs >= history) & (hs < n_steps)
        span = (hi - lo) / grid_s / per_look_alike   # the window's node-steps each draw stands for
        an, hs, span = an[inside], hs[inside], span[inside]
        ok = clean[an, hs - history]
        hard_nodes, hard_steps, hard_span = an[ok], hs[ok], span[ok]

    nodes = np.concatenate([fn, cand_nodes, hard_nodes]).astype(int)
    ref = np.concatenate([f_steps, cand_steps, hard_steps]).astype(int)
    labels = np.concatenate([np.ones(len(fn), np.int8), np.zeros(len(cand_steps) + len(hard_steps), np.int8)])
    hard = np.concatenate([np.zeros(len(fn) + len(cand_steps), bool), np.ones(len(hard_steps), bool)])
    node_steps = np.concatenate([np.ones(len(fn)), np.full(len(cand_steps), eligible / max(len(cand_steps), 1)),
                                 hard_span])
    # drop events whose 4-minute windows are mostly missing (counted from the grid, any feature set)
    seen = np.pad(np.cumsum((~np.isnan(v)).sum(axis=2), axis=1), ((0, 0), (1, 0)))   # (nodes, steps + 1)
    ends = ref[:, None] - offsets[None, :]
    present = (seen[nodes[:, None], ends] - seen[nodes[:, None], ends - WINDOW_STEPS]).mean(axis=1) \
        / (WINDOW_STEPS * n_sensors) if len(ref) else np.zeros(0)
    keep = present >= min_present
    nodes, ref, labels, hard, node_steps = nodes[keep], ref[keep], labels[keep], hard[keep], node_steps[keep]
    feats = event_features(v, nodes, ref, grid_s, leads, features)
    return Events(feats, labels, nodes, t0 + ref * grid_s, hard, node_steps)


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
