"""Align one node's samples onto its sampling grid (seed 000: 15 s) and keep the
feature window (seed 000: 4 min = 16 steps).

IPMI readings take the last value within a step; operating-system metrics (LDMS
samplers at their own rates) take the mean within the step.  Each source (IPMI, each
LDMS schema) keeps its own stream time: a step closes once every source heard from in
the last ``stale_s`` has passed the step's end plus ``lateness_s`` — sources arrive on
different topics and drift apart, and a silent source must not hold the node back.  A
sensor with no sample in a step stays NaN — missing values are marked, never invented;
samples for steps already emitted are counted in ``late_samples``.  State round-trips
through plain dicts so a Faust table can hold it.

Example
-------
>>> g = NodeGrid(grid_s=15, window_steps=2, lateness_s=0)
>>> g.add(0.0, {"cpu_temp": 40.0}, last_value=True)
[]
>>> g.add(15.0, {"cpu_temp": 42.0}, last_value=True)   # closes step 0
[0.0]
>>> g.add(30.0, {"cpu_temp": 44.0}, last_value=True)   # closes step 1: window complete
[15.0]
>>> g.window(15.0)[:, 0].tolist()
[40.0, 42.0]
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from hpcguard.models.features import CANONICAL_SENSORS

_INDEX = {name: i for i, name in enumerate(CANONICAL_SENSORS)}


class NodeGrid:
    def __init__(self, grid_s: float = 15.0, window_steps: int = 16, lateness_s: float = 30.0,
                 sensors: tuple[str, ...] = CANONICAL_SENSORS, stale_s: float = 300.0):
        self.grid_s = float(grid_s)
        self.window_steps = int(window_steps)
        self.lateness_s = float(lateness_s)
        self.stale_s = float(stale_s)
        self.late_samples = 0
        self._source_time: dict[str, float] = {}
        self.sensors = sensors
        self._index = {name: i for i, name in enumerate(sensors)}
        n = len(sensors)
        self._n = n
        # open steps: step index -> [sum[n], count[n], last[n]]
        self._open: dict[int, list[list[float]]] = {}
        self._closed: dict[int, list[float]] = {}  # step index -> row (NaN = missing)
        self.stream_time = -math.inf

    # -- ingest ---------------------------------------------------------------------
    def add(self, time: float, values: Mapping[str, float], last_value: bool, source: str = "") -> list[float]:
        """Add one sample from ``source``; return the start times of the steps it closed (in order)."""
        step = int(math.floor(time / self.grid_s))
        closed_late = step in self._closed or bool(self._closed and step < min(self._closed))
        if closed_late:
            self.late_samples += 1  # its step was already emitted
        else:
            acc = self._open.get(step)
            if acc is None:
                acc = [[0.0] * self._n, [0.0] * self._n, [math.nan] * self._n]
                self._open[step] = acc
            for name, value in values.items():
                i = self._index.get(name)
                if i is None or value is None or (isinstance(value, float) and math.isnan(value)):
                    continue
                if last_value:
                    acc[2][i] = float(value)
                else:
                    acc[0][i] += float(value)
                    acc[1][i] += 1.0
        self.stream_time = max(self.stream_time, time)
        self._source_time[source] = max(self._source_time.get(source, -math.inf), time)
        return self._close_due()

    def watermark(self) -> float:
        """The slowest live source's time: steps up to it have all their samples."""
        live = [t for t in self._source_time.values() if t >= self.stream_time - self.stale_s]
        return min(live) if live else self.stream_time

    def _close_due(self) -> list[float]:
        mark = self.watermark()
        due = sorted(s for s in self._open if (s + 1) * self.grid_s + self.lateness_s <= mark)
        for s in due:
            sums, counts, last = self._open.pop(s)
            row = [last[i] if not math.isnan(last[i]) else (sums[i] / counts[i] if counts[i] else math.nan)
                   for i in range(self._n)]
            self._closed[s] = row
        if due:
            newest = max(self._closed)
            for s in [s for s in self._closed if s <= newest - self.window_steps]:
                del self._closed[s]
        return [s * self.grid_s for s in due]

    # -- windows --------------------------------------------------------------------
    def window(self, step_time: float) -> np.ndarray:
        """The ``(window_steps, n_sensors)`` window ending with the step starting at ``step_time``."""
        last = int(round(step_time / self.grid_s))
        rows = [self._closed.get(s) for s in range(last - self.window_steps + 1, last + 1)]
        out = np.full((self.window_steps, self._n), np.nan)
        for k, row in enumerate(rows):
            if row is not None:
                out[k] = row
        return out

    def complete(self, step_time: float, min_present: float = 0.75) -> bool:
        """Whether enough steps of the window are present to judge it."""
        last = int(round(step_time / self.grid_s))
        present = sum(1 for s in range(last - self.window_steps + 1, last + 1) if s in self._closed)
        return present >= min_present * self.window_steps

    @property
    def size(self) -> int:
        return len(self._open) + len(self._closed)

    # -- state ----------------------------------------------------------------------
    def to_state(self) -> dict:
        return {"open": {str(k): v for k, v in self._open.items()},
                "closed": {str(k): v for k, v in self._closed.items()},
                "sources": dict(self._source_time), "late_samples": self.late_samples,
                "stream_time": self.stream_time if math.isfinite(self.stream_time) else None}

    def load_state(self, state: Mapping) -> "NodeGrid":
        self._open = {int(k): v for k, v in state.get("open", {}).items()}
        self._closed = {int(k): v for k, v in state.get("closed", {}).items()}
        self._source_time = {k: float(v) for k, v in state.get("sources", {}).items()}
        self.late_samples = int(state.get("late_samples", 0))
        st = state.get("stream_time")
        self.stream_time = -math.inf if st is None else float(st)
        return self
