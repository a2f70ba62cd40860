"""Baseline node-failure detector: per-sensor thresholds learned from healthy
operation, with persistence over consecutive windows.

It is the honest yardstick the failure ensemble (``models.failure``) must beat: for
each sensor, the window's minimum, mean and maximum are compared with robust bounds
learned on windows from healthy operation (quantiles widened by a margin of the
inter-quantile range).  A node is warned when the ``persistence`` consecutive windows
ending at the newest step all break a bound.  Persistence is read from the history
itself (``history_steps = window_steps + persistence − 1``), never from a streak kept
between calls: a restarted or second worker decides exactly as the first.

Example
-------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> healthy = rng.normal(50, 1, size=(500, 16, 10))
>>> det = BaselineDetector(persistence=2).learn_many(healthy)
>>> hot = healthy[:3].copy(); hot[:, -4:, 0] += 30          # CPU temperature spike
>>> det.score_many(hot).round(2).tolist()[0] > 1.0
True
>>> history = np.concatenate([healthy[0], hot[0]])[-det.history_steps:]  # 17 steps
>>> hot_now = history.copy(); hot_now[:-1, 0] = 50.0; hot_now[-1, 0] = 90.0  # only the newest step is hot
>>> det.history_steps, det.predict_one(hot_now), det.predict_one(history)
(17, False, True)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hpcguard.models.features import CANONICAL_SENSORS

NAME = "baseline-threshold"


@dataclass
class BaselineDetector:
    """Robust per-sensor bounds plus persistence.

    Parameters
    ----------
    quantile
        Lower/upper quantile of healthy window statistics that bound normal.
    margin
        Bounds are widened by ``margin × (q_hi − q_lo)`` on each side.
    persistence
        Consecutive out-of-bound windows needed for a warning.
    """

    quantile: float = 0.001
    margin: float = 0.25
    persistence: int = 2
    sensors: tuple[str, ...] = CANONICAL_SENSORS
    window_steps: int = 16
    low_: np.ndarray | None = None
    high_: np.ndarray | None = None

    @property
    def history_steps(self) -> int:
        """Steps of node history one decision reads: ``persistence`` windows ending one step apart."""
        return self.window_steps + self.persistence - 1

    def learn_many(self, windows: np.ndarray) -> "BaselineDetector":
        """Learn bounds from healthy windows ``(N, T, S)`` (NaN allowed); ``T`` becomes ``window_steps``."""
        windows = np.asarray(windows, float)
        self.window_steps = int(windows.shape[1])
        stats = _window_stats(windows)  # (N, S, 3)
        lo = np.nanquantile(stats, self.quantile, axis=0)
        hi = np.nanquantile(stats, 1 - self.quantile, axis=0)
        spread = np.maximum(hi - lo, 1e-9)
        self.low_, self.high_ = lo - self.margin * spread, hi + self.margin * spread
        return self

    def score_many(self, windows: np.ndarray) -> np.ndarray:
        """Largest bound violation of each window's newest ``window_steps``, in units of the healthy spread
        (0 = inside)."""
        if self.low_ is None:
            raise RuntimeError("BaselineDetector has not learned bounds yet: call learn_many first")
        stats = _window_stats(np.asarray(windows, float)[:, -self.window_steps:])
        spread = np.maximum(self.high_ - self.low_, 1e-9)
        excess = np.maximum(self.low_ - stats, stats - self.high_) / spread
        excess = np.where(np.isnan(excess), 0.0, excess)
        return np.maximum(excess.reshape(len(stats), -1).max(axis=1), 0.0)

    def violations(self, window: np.ndarray) -> list[str]:
        """Names of the sensors whose statistics leave the healthy bounds in ``window``."""
        stats = _window_stats(np.asarray(window, float)[None, -self.window_steps:])[0]
        out = (stats < self.low_) | (stats > self.high_)
        return [self.sensors[i] for i in np.flatnonzero(out.any(axis=1))]

    def predict_many(self, histories: np.ndarray) -> np.ndarray:
        """Warn flags for histories ``(N, history_steps, S)``: the last ``persistence`` windows all break a bound."""
        h = np.asarray(histories, float)
        if h.ndim != 3 or h.shape[1] < self.history_steps:
            raise ValueError(f"histories must be (N, >= {self.history_steps}, S), got shape {h.shape}")
        warn = np.ones(len(h), bool)
        for back in range(self.persistence):  # persistence is small (2-3): one vectorised pass per window
            end = h.shape[1] - back
            warn &= self.score_many(h[:, end - self.window_steps:end]) > 0
        return warn

    def predict_one(self, history: np.ndarray) -> bool:
        return bool(self.predict_many(np.asarray(history)[None])[0])

    def to_state(self) -> dict:
        return {"name": NAME, "quantile": self.quantile, "margin": self.margin, "persistence": self.persistence,
                "sensors": list(self.sensors), "window_steps": self.window_steps, "low": self.low_.tolist(), "high": self.high_.tolist()}

    @classmethod
    def from_state(cls, state: dict) -> "BaselineDetector":
        det = cls(quantile=state["quantile"], margin=state["margin"], persistence=state["persistence"],
                  sensors=tuple(state["sensors"]), window_steps=int(state.get("window_steps", 16)))
        det.low_, det.high_ = np.asarray(state["low"], float), np.asarray(state["high"], float)
        return det


def _window_stats(windows: np.ndarray) -> np.ndarray:
    """(N, T, S) → (N, S, 3): min, mean, max per sensor, NaN-aware."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.stack([np.nanmin(windows, axis=1), np.nanmean(windows, axis=1), np.nanmax(windows, axis=1)],
                        axis=-1)


def healthy_windows(values: np.ndarray, failure_steps: list[tuple[int, int]], window_steps: int = 16,
                    exclude_steps: int = 60, stride: int = 4) -> np.ndarray:
    """Windows ``(N, window_steps, S)`` from a grid ``values[n_nodes, n_steps, S]`` that
    end at least ``exclude_steps`` before any failure of their node and contain data.

    ``failure_steps`` lists ``(node_index, step_index)`` of failures.
    """
    from numpy.lib.stride_tricks import sliding_window_view

    n_nodes, n_steps, _ = values.shape
    if n_steps < window_steps:
        return np.empty((0, window_steps, values.shape[2]))
    ends = np.arange(window_steps - 1, n_steps, stride)
    keep = np.ones((n_nodes, len(ends)), bool)
    for node, step in failure_steps:  # one pass per failure, not per sample
        keep[node] &= ~((ends > step - exclude_steps) & (ends < step + exclude_steps))
    views = sliding_window_view(values, window_steps, axis=1)  # (nodes, n_windows, S, T)
    views = views[:, ends - window_steps + 1]
    out = np.moveaxis(views[keep], -1, 1)  # (N, T, S)
    present = ~np.isnan(out).all(axis=(1, 2))
    return out[present]
