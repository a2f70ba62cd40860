"""Rates and deltas of cumulative counters (LDMS ``lustre_client``, ``procstat``, ``procnetdev``).

A step between consecutive samples of one counter (one key) yields a value only when
it is trustworthy; otherwise NaN with a flag, never an invented number:

``first``         no previous sample of the key
``out_of_order``  time did not increase (duplicate or late sample)
``gap``           more than ``max_gap_s`` since the previous sample
``reset``         the counter decreased (reboot, wrap)
``ok``            a rate / delta

The latest sample always becomes the reference for the next one.  The vectorised
functions and the streaming :class:`CounterRate` implement the same rules.

Example
-------
>>> import numpy as np
>>> rates, flags = counter_rates(np.array([0., 1., 2., 10.]), np.array([0., 5., 3., 7.]), max_gap_s=5)
>>> rates.tolist()[1], [FLAGS[f] for f in flags]
(5.0, ['first', 'ok', 'reset', 'gap'])
>>> c = CounterRate(max_gap_s=5)
>>> [c.update_one("n1", t, v) for t, v in [(0, 0), (1, 5), (2, 3), (10, 7)]]
[None, 5.0, None, None]
>>> c.stats["reset"], c.stats["gap"]
(1, 1)
"""
from __future__ import annotations

from typing import Hashable

import numpy as np

FLAGS: tuple[str, ...] = ("ok", "first", "out_of_order", "gap", "reset")
OK, FIRST, OUT_OF_ORDER, GAP, RESET = range(len(FLAGS))


def counter_deltas(times: np.ndarray, values: np.ndarray, max_gap_s: float,
                   keys: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Deltas between consecutive samples of each key.

    Parameters
    ----------
    times
        ``(n,)`` sample times (s), in arrival order within each key.
    values
        ``(n,)`` or ``(n, k)`` cumulative counter values (``k`` counters sharing times).
    max_gap_s
        Longest trusted interval between two samples.
    keys
        ``(n,)`` key per sample (node id); ``None`` = one key.  Samples of different
        keys may interleave; the order within a key is the array order.

    Returns
    -------
    deltas, dt, flags
        ``deltas`` like ``values`` (NaN unless flag ``ok``), ``dt`` ``(n,)`` seconds
        since the key's previous sample (NaN for ``first``), ``flags`` int8 codes
        into :data:`FLAGS` shaped like ``values``.
    """
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    n = t.shape[0]
    v2 = v.reshape(n, -1)
    order = np.arange(n) if keys is None else np.argsort(np.asarray(keys), kind="stable")
    ts, vs = t[order], v2[order]
    first = np.ones(n, dtype=bool)
    if keys is not None and n:
        ks = np.asarray(keys)[order]
        first[1:] = ks[1:] != ks[:-1]
    else:
        first[1:] = False
    dt = np.full(n, np.nan)
    dv = np.full(v2.shape, np.nan)
    dt[1:] = ts[1:] - ts[:-1]
    dv[1:] = vs[1:] - vs[:-1]
    dt[first] = np.nan
    flags = np.full(v2.shape, OK, dtype=np.int8)
    flags[(dv < 0)] = RESET
    flags[(dt > max_gap_s)] = GAP
    flags[(dt <= 0)] = OUT_OF_ORDER
    flags[first] = FIRST
    flags[np.isnan(dv) & (flags == OK)] = RESET  # a NaN counter value: no trusted delta
    dv[flags != OK] = np.nan
    out_dv = np.empty_like(dv)
    out_dt = np.empty_like(dt)
    out_fl = np.empty_like(flags)
    out_dv[order], out_dt[order], out_fl[order] = dv, dt, flags
    return out_dv.reshape(v.shape), out_dt, out_fl.reshape(v.shape)


def counter_rates(times: np.ndarray, values: np.ndarray, max_gap_s: float,
                  keys: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-second rates of cumulative counters; see :func:`counter_deltas`.

    Returns ``(rates, flags)``: rates NaN where the flag is not ``ok``.
    """
    dv, dt, flags = counter_deltas(times, values, max_gap_s, keys)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = dv / (dt if dv.ndim == 1 else dt[:, None])
    return rates, flags


def flag_counts(flags: np.ndarray) -> dict[str, int]:
    """``{flag name: count}`` of a flags array."""
    counts = np.bincount(np.asarray(flags, dtype=np.int64).ravel(), minlength=len(FLAGS))
    return {name: int(c) for name, c in zip(FLAGS, counts)}


class CounterRate:
    """Streaming counterpart of :func:`counter_rates`, one state per key.

    Parameters
    ----------
    max_gap_s
        Longest trusted interval between two samples of a key.

    ``stats`` counts every flag of :data:`FLAGS`.
    """

    def __init__(self, max_gap_s: float):
        self.max_gap_s = float(max_gap_s)
        self._last: dict[Hashable, tuple[float, float]] = {}
        self.stats: dict[str, int] = {name: 0 for name in FLAGS}

    def delta_one(self, key: Hashable, time: float, value: float) -> tuple[float, float] | None:
        """``(delta, dt)`` since the key's previous sample, or ``None`` (flag counted)."""
        prev = self._last.get(key)
        self._last[key] = (time, value)
        if prev is None:
            flag = FIRST
        else:
            dt, dv = time - prev[0], value - prev[1]
            if dt <= 0:
                flag = OUT_OF_ORDER
            elif dt > self.max_gap_s:
                flag = GAP
            elif dv < 0 or dv != dv:
                flag = RESET
            else:
                self.stats["ok"] += 1
                return dv, dt
        self.stats[FLAGS[flag]] += 1
        return None

    def update_one(self, key: Hashable, time: float, value: float) -> float | None:
        """Rate since the key's previous sample, or ``None`` (first sample, reset, gap...)."""
        step = self.delta_one(key, time, value)
        return None if step is None else step[0] / step[1]

    def forget(self, key: Hashable) -> None:
        self._last.pop(key, None)

    def __len__(self) -> int:
        return len(self._last)
