"""Feature sets of the failure ensemble: a node's own sensor history → network inputs.

A :class:`FeatureSet` is a name, the number of 15 s grid steps of one node's history
it needs (``history_steps``) and a vectorised ``transform(windows (N, history_steps,
10)) -> (N, 70)``.  Features are a function of that per-node history only, so the
streaming worker (any partition) computes exactly what the offline scan computes.
``FEATURE_SETS`` registers:

* ``paper`` — seed 000 Tab. 4.2 × Tab. 4.3: seven statistics per sensor over the last
  4 minutes (16 steps) — median, minimum, standard deviation, sum, variance, maximum,
  mean.  Missing samples are NaN and are ignored; a sensor with no sample in the window
  yields NaN features (imputed by the model with training medians).
* ``site`` — the same 70-input shape, but every sensor is measured against the node's
  own trailing baseline (the 40 minutes before the last 4-minute window), so per-node
  and per-fan baselines, hardware generations and units drop out: see
  :func:`baseline_features`.
* ``robust`` — 160 inputs: every sensor against the median and MAD of the node's own
  20-minute trailing baseline (a scale floor of 1 % of the level keeps flat sensors
  quiet), plus the sensor's level (percent sensors: the percentage itself, so a memory
  leak toward 100 % differs from a job's usual footprint; others: the relative change
  from the baseline median), the largest single-poll jump, the window's pace (change
  per minute in the sensor's own units), its curve (whether the change speeds up),
  for percent sensors the minutes until 100 % at that pace, and the window's shape (how
  far it travels beyond its net change, how far it strays from a quadratic, how often
  it reverses, whether its spikes bunch toward the end): see :func:`robust_features`.
* ``conv`` — learned: the ``robust`` history as a sequence (:func:`sequence_inputs`: every
  step's robust z, missing mask and percentage level) through a small convolutional
  encoder fitted on the training failures (``models.failure.encoder``), whose 144 pooled
  outputs are the networks' inputs.  It is not in ``FEATURE_SETS``: each model carries
  its own, built by ``models.failure.encoder.encoder_feature_set``.
* ``trees`` — learned: gradient-boosted trees fitted on the ``robust`` statistics of the
  training events (``models.failure.trees``); their log-odds is each network's one input.
  Not in ``FEATURE_SETS`` either: built by ``models.failure.trees.trees_feature_set``.

Example
-------
>>> import numpy as np
>>> w = np.arange(16 * 10, dtype=float).reshape(16, 10)   # 16 steps × 10 sensors
>>> window_features(w).shape
(70,)
>>> float(window_features(w)[0])   # median of sensor 0
75.0
>>> FEATURE_SETS["site"](np.ones((3, FEATURE_SETS["site"].history_steps, 10))).shape
(3, 70)
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

CANONICAL_SENSORS: tuple[str, ...] = (
    "cpu_temp", "cpu_fan_rpm", "cpu_voltage", "psu_temp", "load_1min",
    "cpu_user", "disk_usage", "mem_usage", "bytes_in", "bytes_out",
)
IO_METRICS: tuple[str, ...] = ("io_read_bytes", "io_write_bytes")
STATISTICS: tuple[str, ...] = ("median", "min", "std", "sum", "var", "max", "mean")
IO_STATISTICS: tuple[str, ...] = ("min", "max", "median", "mean", "var", "std")  # seed 004 §4.2

FEATURE_NAMES: tuple[str, ...] = tuple(f"{s}.{st}" for s in CANONICAL_SENSORS for st in STATISTICS)
BASELINE_STATISTICS: tuple[str, ...] = ("z_mean", "z_last", "z_max", "z_min", "z_slope", "spike_excess", "missing")
ROBUST_STATISTICS: tuple[str, ...] = ("z_mean", "z_last", "z_max", "z_min", "z_rise", "spike_excess", "level",
                                       "jump", "pace", "curve", "full_in", "wiggle", "wave", "reversals",
                                       "spike_trend", "missing")
PERCENT_SENSORS = np.isin(CANONICAL_SENSORS, ("cpu_user", "disk_usage", "mem_usage"))
WINDOW_STEPS = 16          # the 4-minute window of seed 000
BASELINE_STEPS = 160       # 40 minutes of trailing baseline before it (site feature set)
ROBUST_BASELINE_STEPS = 80  # 20 minutes of trailing baseline (robust feature set)
SCALE_FLOOR = 0.01         # robust set: a baseline scale is at least 1 % of the sensor's level
Z_CLIP = 20.0              # a reading 20 baseline scales away is already unmistakable
SPIKE_Z = 4.0
FULL_IN_MINUTES = 100.0  # robust set: "full in" is capped here (a flat or falling percent sensor)


def last_level(windows: np.ndarray, sensor: str) -> np.ndarray:
    """The newest present value of ``sensor`` in each ``(N, steps, S)`` window (NaN when none):
    what a node's collector said last, e.g. ``mem_usage`` (meminfo's memory in use, %),
    which sizes a job's checkpoint.

    >>> w = np.full((2, 3, len(CANONICAL_SENSORS)), np.nan)
    >>> w[0, :2, 7] = [40.0, 55.0]
    >>> last_level(w, "mem_usage")
    array([55., nan])
    """
    col = np.asarray(windows, dtype=float)[:, :, CANONICAL_SENSORS.index(sensor)]
    present = ~np.isnan(col)
    last = col.shape[1] - 1 - np.argmax(present[:, ::-1], axis=1)
    return np.where(present.any(axis=1), col[np.arange(col.shape[0]), last], np.nan)


def memory_in_use(windows: np.ndarray) -> list[float | None]:
    """Per window, the node's memory in use (%) last reported, ``None`` when unknown: the
    ``mem_usage_percent`` a prediction carries for the decision policy (the worker and the
    offline path both call this, so their actions agree).

    >>> w = np.full((2, 3, len(CANONICAL_SENSORS)), np.nan); w[1, 0, 7] = 12.5
    >>> memory_in_use(w)
    [None, 12.5]
    """
    w = np.asarray(windows, dtype=float)
    if w.ndim != 3 or w.shape[2] != len(CANONICAL_SENSORS):
        return [None] * len(w)
    return [None if np.isnan(x) else round(float(x), 3) for x in last_level(w, "mem_usage")]


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


def baseline_features(windows: np.ndarray, window_steps: int = WINDOW_STEPS) -> np.ndarray:
    """Seven per-sensor features of the last ``window_steps`` relative to the trailing baseline.

    The baseline is every step before the last window.  With ``z = (x − mean_b) / scale_b``
    and ``scale_b = std_b + 0.1 % |mean_b| + 1e-3`` (the floor keeps a flat sensor from
    turning rounding into huge z), per sensor:

    ``z_mean, z_last`` (mean of the last two steps), ``z_max, z_min``, ``z_slope`` (least
    squares, per minute), ``spike_excess`` (share of window steps with ``|z| > 4`` minus
    that share in the baseline: intermittent spikes that grow in frequency), ``missing``
    (share of window steps without a value: an explicit mask).  z values are clipped to
    ±20; a z feature with no value to compute it from is 0 ("no evidence"), and the
    ``missing`` column says so.

    >>> import numpy as np
    >>> h = np.full((1, 176, 10), 50.0)
    >>> h[0, :, 0] += np.random.default_rng(0).normal(0, 1, 176)
    >>> h[0, -16:, 0] += np.linspace(0, 8, 16)          # a ramp in the last 4 minutes
    >>> f = baseline_features(h).reshape(10, 7)
    >>> bool(f[0, 4] > 1.0), float(f[1, 0]), float(f[0, 6])
    (True, 0.0, 0.0)
    """
    x = np.asarray(windows, dtype=float)
    if x.ndim < 2 or x.shape[-2] <= window_steps:
        raise ValueError(f"windows must have more than {window_steps} steps of history, got shape {x.shape}")
    base, win = x[..., :-window_steps, :], x[..., -window_steps:, :]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN sensor → NaN → 0 below, masked
        mean_b = np.nanmean(base, axis=-2, keepdims=True)
        scale = np.nanstd(base, axis=-2, keepdims=True) + 1e-3 * np.abs(mean_b) + 1e-3
        z = np.clip((win - mean_b) / scale, -Z_CLIP, Z_CLIP)
        zb = (base - mean_b) / scale
        present = ~np.isnan(z)
        n = present.sum(axis=-2)
        t = np.arange(window_steps, dtype=float)[:, None] * (15.0 / 60.0)           # minutes
        tc = np.where(present, t - np.nansum(np.where(present, t, np.nan), axis=-2, keepdims=True)
                      / np.maximum(n, 1)[..., None, :], 0.0)
        zc = np.where(present, z - np.nanmean(z, axis=-2, keepdims=True), 0.0)
        slope = (tc * zc).sum(axis=-2) / np.maximum((tc * tc).sum(axis=-2), 1e-9)
        spikes_w = (np.abs(z) > SPIKE_Z).sum(axis=-2) / np.maximum(n, 1)
        spikes_b = (np.abs(zb) > SPIKE_Z).sum(axis=-2) / np.maximum((~np.isnan(zb)).sum(axis=-2), 1)
        stats = np.stack([
            np.nanmean(z, axis=-2),
            np.nanmean(z[..., -2:, :], axis=-2),
            np.nanmax(z, axis=-2),
            np.nanmin(z, axis=-2),
            np.clip(slope, -Z_CLIP, Z_CLIP),
            spikes_w - spikes_b,
            1.0 - n / window_steps,
        ], axis=-1)                                                                 # (..., S, 7)
    stats[..., :6] = np.nan_to_num(stats[..., :6], nan=0.0)
    return stats.reshape(*stats.shape[:-2], -1)


def _robust_baseline(base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median and scale ``max(1.4826 MAD, 1 % |median| + 1e-3)`` of a baseline, per sensor (axis −2)."""
    med = np.nanmedian(base, axis=-2)
    scale = np.maximum(1.4826 * np.nanmedian(np.abs(base - med[..., None, :]), axis=-2),
                       SCALE_FLOOR * np.abs(med) + 1e-3)
    return med, scale


def _hold_last(values: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each entry along axis −2 replaced by the latest present one up to it; and where one was."""
    latest = np.maximum.accumulate(np.where(present, np.arange(values.shape[-2])[:, None], -1), axis=-2)
    return np.take_along_axis(values, np.maximum(latest, 0), axis=-2), latest >= 0


def _shape(win: np.ndarray, med: np.ndarray, scale: np.ndarray, base: np.ndarray, floor: np.ndarray,
           window_steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``wiggle``, ``wave`` and ``reversals`` of :func:`robust_features`.

    A lost poll holds the reading before it (the window's median before the first reading),
    so it adds no step of its own: no travel, no reversal.
    """
    x, any_seen = _hold_last(win, ~np.isnan(win))
    x = np.where(any_seen, x, np.nanmedian(win, axis=-2, keepdims=True))
    step = np.diff(x, axis=-2)
    base_step = np.maximum(np.nanmean(np.abs(np.diff(base, axis=-2)), axis=-2), floor)
    travel = np.abs(step).sum(axis=-2) - np.abs(x[..., -1, :] - x[..., 0, :])
    wiggle = np.log1p(np.clip(travel / (base_step * (window_steps - 1)), 0, 1e3))
    z = np.clip((x - med[..., None, :]) / scale[..., None, :], -Z_CLIP, Z_CLIP)
    t = np.linspace(-1.0, 1.0, window_steps)
    design = np.stack([np.ones(window_steps), t, t * t], axis=1)
    projection = design @ np.linalg.pinv(design)
    fit = np.zeros_like(z)
    for j in range(window_steps):   # one fixed order of sums: a node alone gets its row of a batch exactly
        fit += projection[:, j, None] * z[..., j, None, :]
    residual = z - fit
    wave = np.sqrt((residual ** 2).mean(axis=-2))
    # the sign of the latest large step at each step (0 before the first): a reversal is a change of it
    sign = np.where(np.abs(step) > 2 * base_step[..., None, :], np.sign(step), 0.0)
    held, any_large = _hold_last(sign, sign != 0)
    held = held * any_large
    reversals = (held[..., 1:, :] * held[..., :-1, :] < 0).sum(axis=-2)
    return wiggle, wave, reversals


def robust_features(windows: np.ndarray, window_steps: int = WINDOW_STEPS) -> np.ndarray:
    """Sixteen per-sensor features of the last ``window_steps`` against a robust trailing baseline.

    With the baseline's median ``m`` and scale ``s = max(1.4826 MAD, 1 % |m| + 1e-3)``
    (a median/MAD baseline is not dragged by one job start inside it), ``z = (x − m) / s``
    clipped to ±20, per sensor:

    ``z_mean``, ``z_last`` (mean of the last two steps), ``z_max``, ``z_min``, ``z_rise``
    (``z_last`` minus the mean z of the window's first minute), ``spike_excess`` (share
    of window steps with ``|z| > 4`` minus that share in the baseline), ``level`` (percent
    sensors — cpu_user, disk_usage, mem_usage — the last value / 100; other sensors the
    relative change of the last value from ``m``, clipped to ±5), ``jump``
    (``log1p`` of the largest single-step change in the window over the baseline's median
    single-step change: single-poll droops), ``pace`` (the last minute's mean minus the
    first minute's, per minute, in the sensor's own units: percent sensors in points / 100,
    others relative to ``m``, clipped to ±5; the z statistics saturate at ±20 scales, so a
    leak creeping up 4 points a minute and a job filling RAM 16 a minute would read alike),
    ``curve`` (the change between the window's last two minutes' means minus the change between
    its first two, in the same units as ``pace``, clipped to ±5: a leak speeds up toward 100 %
    while a job fills RAM at an even pace and levels off), ``full_in`` (percent sensors: minutes
    until 100 % at the window's pace, ``(1 − level) / pace``, capped at 100, which is also its
    value when the sensor is flat, falling or unknown; other sensors 0),
    four of the window's shape, which tell an oscillation or a growing rate of single-poll
    spikes from a rise that falls back (a PSU warming with a job, a few droops at a constant
    rate): ``wiggle`` (``log1p`` of the distance the window travels beyond its net change,
    ``Σ|Δx| − |x_last − x_first|``, over the baseline's mean single-step change times the
    window's steps), ``wave`` (root-mean-square of ``z`` about the least-squares quadratic
    through the window's ``z``: a rise, a fall or a hump fit a quadratic, a period or more of
    an oscillation does not), ``reversals`` (sign changes between successive steps larger than
    twice the baseline's mean single-step change), ``spike_trend`` (steps with ``|z| > 4`` in
    the window's second half minus its first), and
    ``missing`` (share of window steps without a value).  The shape features read a lost
    poll as the reading before it.  Features with nothing to compute
    them from are 0 (``full_in`` its cap) and ``missing`` says so.

    >>> import numpy as np
    >>> h = np.full((1, 96, 10), 50.0)
    >>> h[0, :, :] += np.random.default_rng(0).normal(0, 0.5, (96, 10))
    >>> h[0, -16:, 7] = np.linspace(50, 98, 16)        # memory climbing toward 100 %
    >>> f = robust_features(h).reshape(10, 16)
    >>> bool(f[7, 1] == 20.0), round(float(f[7, 6]), 2), bool(abs(f[0, 1]) < 4)
    (True, 0.96, True)
    >>> round(float(f[7, 10]), 2), float(f[5, 10]), float(f[0, 10])   # full_in: memory, flat cpu_user, a temperature
    (0.28, 100.0, 0.0)
    >>> h[0, -16:, 3] += 6 * np.sin(np.arange(16) * np.pi / 4)       # a PSU oscillating with a 2-minute period
    >>> f = robust_features(h).reshape(10, 16)
    >>> [[round(float(v), 1) for v in f[k, 11:14]] for k in (3, 0)]   # wiggle, wave, reversals: PSU, a quiet sensor
    [[1.6, 7.5, 3.0], [0.6, 0.7, 0.0]]
    """
    x = np.asarray(windows, dtype=float)
    if x.ndim < 2 or x.shape[-2] <= window_steps + 1:
        raise ValueError(f"windows must have more than {window_steps + 1} steps of history, got shape {x.shape}")
    base, win = x[..., :-window_steps, :], x[..., -window_steps:, :]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN sensor → NaN → 0 below, masked
        med, scale = _robust_baseline(base)                                           # (..., S)
        floor = SCALE_FLOOR * np.abs(med) + 1e-3
        z = np.clip((win - med[..., None, :]) / scale[..., None, :], -Z_CLIP, Z_CLIP)
        zb = (base - med[..., None, :]) / scale[..., None, :]
        n = (~np.isnan(z)).sum(axis=-2)
        z_last = np.nanmean(z[..., -2:, :], axis=-2)
        spikes = np.abs(z) > SPIKE_Z
        spikes_w = spikes.sum(axis=-2) / np.maximum(n, 1)
        spikes_b = (np.abs(zb) > SPIKE_Z).sum(axis=-2) / np.maximum((~np.isnan(zb)).sum(axis=-2), 1)
        last = np.nanmean(win[..., -2:, :], axis=-2)
        unit = np.where(PERCENT_SENSORS, 100.0, np.abs(med) + 1e-3)   # a percent sensor's points / 100, else m
        level = np.where(PERCENT_SENSORS, last / unit, np.clip((last - med) / unit, -5, 5))
        step_scale = np.maximum(1.4826 * np.nanmedian(np.abs(np.diff(base, axis=-2)), axis=-2), floor)
        jump = np.log1p(np.clip(np.nanmax(np.abs(np.diff(win, axis=-2)), axis=-2) / step_scale, 0, 1e3))
        # the means of the window's first two and last two minutes; pace, the change per minute in the
        # sensor's own units, does not saturate as z does, so a slow climb and a fast one differ
        minute = [np.nanmean(win[..., a:a + 4, :], axis=-2) for a in (0, 4, window_steps - 8, window_steps - 4)]
        pace = np.clip((minute[3] - minute[0]) / unit / ((window_steps - 4) / 4.0), -5, 5)
        curve = np.clip(((minute[3] - minute[2]) - (minute[1] - minute[0])) / unit, -5, 5)
        full_in = np.clip((1.0 - last / 100.0) / np.maximum(pace, 1e-4), 0.0, FULL_IN_MINUTES)
        # an unknown level or pace is no sign of filling up: read as the cap, and ``missing`` says why
        full_in = np.where(PERCENT_SENSORS, np.where(np.isnan(full_in), FULL_IN_MINUTES, full_in), 0.0)
        wiggle, wave, reversals = _shape(win, med, scale, base, floor, window_steps)
        half = window_steps // 2
        spike_trend = spikes[..., half:, :].sum(axis=-2) - spikes[..., :half, :].sum(axis=-2)
        stats = np.stack([
            np.nanmean(z, axis=-2), z_last, np.nanmax(z, axis=-2), np.nanmin(z, axis=-2),
            np.clip(z_last - np.nanmean(z[..., :4, :], axis=-2), -2 * Z_CLIP, 2 * Z_CLIP),
            spikes_w - spikes_b, level, jump, pace, curve, full_in, wiggle, wave, reversals, spike_trend,
            1.0 - n / window_steps,
        ], axis=-1)                                                                     # (..., S, 16)
    stats = np.nan_to_num(stats, nan=0.0)
    return stats.reshape(*stats.shape[:-2], -1)


SEQUENCE_CHANNELS: tuple[str, ...] = (tuple(f"{s}.z" for s in CANONICAL_SENSORS)
                                      + tuple(f"{s}.missing" for s in CANONICAL_SENSORS)
                                      + tuple(f"{s}.level" for s in np.array(CANONICAL_SENSORS)[PERCENT_SENSORS]))


def sequence_inputs(windows: np.ndarray, window_steps: int = WINDOW_STEPS) -> np.ndarray:
    """A node history as a sequence of channels ``(N, 23, T)`` for a convolutional encoder.

    The baseline is every step before the last ``window_steps``; with its median ``m`` and
    scale ``s`` as in :func:`robust_features`, per step: ``z = clip((x − m) / s, ±20) / 5``
    of every sensor (0 where missing), the missing mask of every sensor, and the percent
    sensors' level ``x / 100`` (0 where missing): :data:`SEQUENCE_CHANNELS`.  A sensor with
    no baseline value has ``z = 0`` and only its mask speaks.

    >>> import numpy as np
    >>> h = np.full((1, 96, 10), 50.0)
    >>> h[0, :, :] += np.random.default_rng(0).normal(0, 0.5, (96, 10))
    >>> h[0, -16:, 7] = np.linspace(50, 98, 16)        # memory climbing toward 100 %
    >>> h[0, -3:, 1] = np.nan                            # fan readings lost
    >>> x = sequence_inputs(h)
    >>> x.shape, float(x[0, 7, -1]), float(x[0, 11, -1]), round(float(x[0, 22, -1]), 2)
    ((1, 23, 96), 4.0, 1.0, 0.98)
    """
    x = np.asarray(windows, dtype=float)
    if x.ndim != 3 or x.shape[1] <= window_steps + 1 or x.shape[2] != len(CANONICAL_SENSORS):
        raise ValueError(f"windows must be (N, > {window_steps + 1}, {len(CANONICAL_SENSORS)}), got shape {x.shape}")
    base = x[:, :-window_steps, :]
    missing = np.isnan(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN sensor → NaN → 0 below, masked
        med, scale = _robust_baseline(base)                                           # (N, S)
        z = np.clip((x - med[:, None, :]) / scale[:, None, :], -Z_CLIP, Z_CLIP) / 5.0
    z = np.nan_to_num(np.where(missing, 0.0, z), nan=0.0)
    level = np.where(missing[..., PERCENT_SENSORS], 0.0, x[..., PERCENT_SENSORS] / 100.0)
    return np.concatenate([z, missing, level], axis=2).transpose(0, 2, 1).astype(np.float32)


@dataclass(frozen=True)
class FeatureSet:
    """A named transform of ``(N, history_steps, S)`` per-node histories into network inputs.

    ``statistics`` name the features per sensor; a learned set whose features are not per
    sensor gives their full names in ``names`` instead.
    """

    name: str
    history_steps: int
    transform: Callable[[np.ndarray], np.ndarray]
    statistics: tuple[str, ...]
    description: str
    names: tuple[str, ...] | None = None

    @property
    def feature_names(self) -> tuple[str, ...]:
        if self.names is not None:
            return self.names
        return tuple(f"{s}.{st}" for s in CANONICAL_SENSORS for st in self.statistics)

    def __call__(self, windows: np.ndarray) -> np.ndarray:
        x = np.asarray(windows, dtype=float)
        if x.shape[-2:] != (self.history_steps, len(CANONICAL_SENSORS)):
            raise ValueError(f"feature set {self.name!r} needs windows (..., {self.history_steps}, "
                             f"{len(CANONICAL_SENSORS)}), got shape {x.shape}")
        return self.transform(x)


FEATURE_SETS: dict[str, FeatureSet] = {
    "paper": FeatureSet("paper", WINDOW_STEPS, window_features, STATISTICS,
                        "seed 000: seven statistics per sensor over the last 4 minutes"),
    "site": FeatureSet("site", BASELINE_STEPS + WINDOW_STEPS, baseline_features, BASELINE_STATISTICS,
                       "per-sensor z against the node's own 40-minute trailing baseline, slope, spikes, "
                       "missing mask over the last 4 minutes"),
    "robust": FeatureSet("robust", ROBUST_BASELINE_STEPS + WINDOW_STEPS, robust_features, ROBUST_STATISTICS,
                         "per-sensor robust z (median/MAD of the node's own 20-minute trailing baseline), rise, "
                         "spikes, level, largest single-poll jump, pace, curve, minutes to full, missing mask "
                         "over the last 4 minutes"),
}


LEARNED_FEATURE_SETS: dict[str, int] = {"conv": ROBUST_BASELINE_STEPS + WINDOW_STEPS,   # name -> history steps
                                         "trees": ROBUST_BASELINE_STEPS + WINDOW_STEPS}


def feature_set(name: str) -> FeatureSet:
    """The registered feature set ``name`` (clear error otherwise)."""
    try:
        return FEATURE_SETS[name]
    except KeyError:
        if name in LEARNED_FEATURE_SETS:
            raise ValueError(f"feature set {name!r} is learned with each model (models.failure.encoder, "
                             "models.failure.trees), not registered") from None
        raise ValueError(f"unknown feature set {name!r} (known: "
                         f"{', '.join([*FEATURE_SETS, *LEARNED_FEATURE_SETS])})") from None


def history_steps_of(name: str) -> int:
    """Grid steps of history the feature set ``name`` (registered or learned) needs."""
    return LEARNED_FEATURE_SETS[name] if name in LEARNED_FEATURE_SETS else feature_set(name).history_steps
