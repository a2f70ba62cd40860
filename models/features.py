"""Window feature statistics (seed 000, Tab. 4.2 sensors × Tab. 4.3 statistics).

Seven statistics per sensor over a window of samples on the node's 15 s grid —
median, minimum, standard deviation, sum, variance, maximum, mean — give the 70
inputs of each lead-time network.  Missing samples are NaN and are ignored by every
statistic; a sensor with no sample at all in the window yields NaN features.

Example
-------
>>> import numpy as np
>>> w = np.arange(16 * 10, dtype=float).reshape(16, 10)   # 16 steps × 10 sensors
>>> window_features(w).shape
(70,)
>>> float(window_features(w)[0])   # median of sensor 0
75.0
"""
from __future__ import annotations

import warnings

import numpy as np

CANONICAL_SENSORS: tuple[str, ...] = (
    "cpu_temp", "cpu_fan_rpm", "cpu_voltage", "psu_temp", "load_1min",
    "cpu_user", "disk_usage", "mem_usage", "bytes_in", "bytes_out",
)
IO_METRICS: tuple[str, ...] = ("io_read_bytes", "io_write_bytes")
STATISTICS: tuple[str, ...] = ("median", "min", "std", "sum", "var", "max", "mean")
IO_STATISTICS: tuple[str, ...] = ("min", "max", "median", "mean", "var", "std")  # seed 004 §4.2

FEATURE_NAMES: tuple[str, ...] = tuple(f"{s}.{st}" for s in CANONICAL_SENSORS for st in STATISTICS)


def window_features(windows: np.ndarray) -> np.ndarray:
    """Seven statistics per sensor, sensor-major.

    Parameters
    ----------
    windows
        ``(..., T, S)`` samples: any leading batch axes (nodes, windows), ``T`` time
        steps, ``S`` sensors; NaN marks a missing sample.

    Returns
    -------
    ``(..., S * 7)`` features ordered ``[s0.median, s0.min, ..., s0.mean, s1.median, ...]``.
    Population statistics (ddof=0); ``sum`` is over present samples.
    """
    x = np.asarray(windows, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN sensor → NaN feature, by design
        stats = np.stack([
            np.nanmedian(x, axis=-2),
            np.nanmin(x, axis=-2),
            np.nanstd(x, axis=-2),
            np.where(np.isnan(x).all(axis=-2), np.nan, np.nansum(x, axis=-2)),
            np.nanvar(x, axis=-2),
            np.nanmax(x, axis=-2),
            np.nanmean(x, axis=-2),
        ], axis=-1)  # (..., S, 7)
    return stats.reshape(*stats.shape[:-2], -1)


def io_window_features(read: np.ndarray, write: np.ndarray) -> dict[str, float]:
    """CanarIO observation-window features of 1 s read and write rates (seed 004 §4.2).

    >>> io_window_features(np.array([1.0, 3.0]), np.array([2.0, 2.0]))["read_mean"]
    2.0
    """
    out: dict[str, float] = {}
    for name, series in (("read", np.asarray(read, float)), ("write", np.asarray(write, float))):
        s = series[~np.isnan(series)]
        if s.size == 0:
            out.update({f"{name}_{st}": float("nan") for st in IO_STATISTICS})
            continue
        out.update({
            f"{name}_min": float(s.min()), f"{name}_max": float(s.max()),
            f"{name}_median": float(np.median(s)), f"{name}_mean": float(s.mean()),
            f"{name}_var": float(s.var()), f"{name}_std": float(s.std()),
        })
    return out
