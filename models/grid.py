"""Align one node's samples onto its sampling grid (seed 000: 15 s) by event time.

IPMI readings take the last value within a step; operating-system metrics (LDMS
samplers at their own rates) take the mean within the step.  A sensor with no sample
in a step stays NaN — missing values are marked, never invented.

Event time, not arrival order, decides what a step holds:

* each source (IPMI, each LDMS schema) has its own clock, the newest event time it sent;
* the node's **watermark** is the slowest *live* source's clock minus ``lateness_s``;
  a step closes once the watermark passes its end;
* a source is *idle* when it sent nothing for ``idle_s`` of **processing** time (the
  caller's ``now``, wall seconds); idle sources do not hold the node back (if every
  source is idle, the newest clock is the watermark).  A source is never judged by how
  far it lags another source in event time.  Sources in ``hold`` (their whole input
  stream is not flowing — a consumer backlog, not a silent sampler) never count as idle.
  ``sources`` names the sources expected
  before any of their records arrived (one that never speaks goes idle like any other);
* a sample for a step that is already closed raises :class:`LateSample` — the caller
  dead-letters it with reason ``late``; it is never silently dropped.

Without ``now`` (offline), every source counts as live: the result is then a function
of the samples alone.  The grid keeps the ``keep_steps`` closed steps before the oldest
step a call closed (the predictor's history of every step it returns), and state
round-trips through plain dicts so a Faust table can hold it: whole (:meth:`to_state`) or
as the steps changed since the last call (:meth:`take_delta` / :meth:`apply_delta`), so a
changelog write costs what a batch changed, not what the grid holds — a source far behind
another keeps hundreds of steps open.

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
>>> try:
...     g.add(3.0, {"cpu_temp": 1.0}, last_value=True)
... except LateSample as exc:
...     print(exc)
sample at 3.0 is behind the node's watermark (steps before 30.0 are closed)
>>> copy = NodeGrid(grid_s=15, window_steps=2, lateness_s=0).load_state(g.to_state())
>>> sorted(g.take_delta()["steps"])     # steps changed since the start (or the last take)
['0', '1', '2']
>>> g.add(45.0, {"cpu_temp": 46.0}, last_value=True)
[30.0]
>>> delta = g.take_delta()
>>> {k: v and sorted(v) for k, v in delta["steps"].items()}     # step 0 left the kept history
{'0': None, '2': ['closed'], '3': ['open']}
>>> bool(np.array_equal(copy.apply_delta(delta).window(30.0), g.window(30.0), equal_nan=True))
True
"""
from __future__ import annotations

import math
from typing import Collection, Mapping

import numpy as np

from hpcguard.models.features import CANONICAL_SENSORS


class LateSample(ValueError):
    """A sample for a step that was already closed (and published)."""

    kind = "late"


class NodeGrid:
    """One node's open and closed grid steps, with per-source event-time clocks.

    Parameters
    ----------
    grid_s
        Step length in seconds.
    window_steps
        Steps in a feature window (:meth:`window` default).
    lateness_s
        How far the watermark trails the slowest live source.
    idle_s
        Processing-time seconds without a record after which a source is idle.
    keep_steps
        Closed steps kept (at least ``window_steps``; the predictor's ``history_steps``).
    sources
        Sources expected from the start (e.g. ``ipmi``, ``ldms:meminfo``); others join
        when their first record arrives.
    """

    def __init__(self, grid_s: float = 15.0, window_steps: int = 16, lateness_s: float = 30.0,
                 sensors: tuple[str, ...] = CANONICAL_SENSORS, idle_s: float = 60.0, keep_steps: int = 0,
                 sources: tuple[str, ...] = ()):
        self.grid_s = float(grid_s)
        self.window_steps = int(window_steps)
        self.keep_steps = max(int(keep_steps), self.window_steps)
        self.lateness_s = float(lateness_s)
        self.idle_s = float(idle_s)
        self.sensors = sensors
        self._index = {name: i for i, name in enumerate(sensors)}
        self._n = len(sensors)
        # open steps: step index -> [sum[n], count[n], last[n]]
        self._open: dict[int, np.ndarray] = {}
        self._closed: dict[int, np.ndarray] = {}  # step index -> row (NaN = missing)
        self._closed_until = -math.inf  # steps starting before this are closed
        self._clock: dict[str, float] = {s: -math.inf for s in sources}  # source -> newest event time
        self._seen: dict[str, float] = {}  # source -> processing time of its last record
        self.late_samples = 0
        self.steps_closed = 0
        self.present = np.zeros(self._n)  # per sensor: closed steps with a value (coverage)
        self._changed: set[int] = set()  # steps opened, updated, closed or dropped since the last take_delta

    # -- ingest ---------------------------------------------------------------------
    def add(self, time: float, values: Mapping[str, float], last_value: bool, source: str = "",
            now: float | None = None, hold: Collection[str] = ()) -> list[float]:
        """Add one sample from ``source``; return the start times of the steps it closed (in order).

        Raises :class:`LateSample` when the sample's step is already closed.
        """
        if not math.isfinite(time):
            raise ValueError(f"sample time {time!r} is not finite")
        step = int(math.floor(time / self.grid_s))
        if step * self.grid_s < self._closed_until:
            self.late_samples += 1
            raise LateSample(f"sample at {time} is behind the node's watermark "
                             f"(steps before {self._closed_until} are closed)")
        acc = self._open.get(step)
        if acc is None:
            acc = self._open[step] = np.array([np.zeros(self._n), np.zeros(self._n), np.full(self._n, np.nan)])
        idx = [self._index[k] for k, v in values.items() if k in self._index and v is not None and math.isfinite(v)]
        self._changed.add(step)
        if idx:
            vals = np.array([float(values[self.sensors[i]]) for i in idx])
            if last_value:
                acc[2, idx] = vals
            else:
                acc[0, idx] += vals
                acc[1, idx] += 1.0
        self._clock[source] = max(self._clock.get(source, -math.inf), time)
        if now is not None:
            self._seen[source] = now
        return self._close_due(now, hold)

    def advance(self, now: float, hold: Collection[str] = ()) -> list[float]:
        """Close the steps freed by sources that went idle by processing time ``now``."""
        return self._close_due(now, hold)

    def live_sources(self, now: float | None = None, hold: Collection[str] = ()) -> list[str]:
        """The sources that still hold the watermark back: not idle by processing time ``now``."""
        # an expected source's idle clock starts with the node's first processing time
        return [s for s in self._clock
                if now is None or s in hold or now - self._seen.setdefault(s, now) < self.idle_s]

    def watermark(self, now: float | None = None, hold: Collection[str] = ()) -> float:
        """Slowest live source's clock minus the lateness (``-inf`` before any sample)."""
        if not self._clock:
            return -math.inf
        live = [self._clock[s] for s in self.live_sources(now, hold)]
        return (min(live) if live else max(self._clock.values())) - self.lateness_s

    def _close_due(self, now: float | None, hold: Collection[str] = ()) -> list[float]:
        mark = self.watermark(now, hold)
        if not self._open or not math.isfinite(mark):
            return []
        # the open steps that end by the watermark; walk the steps the watermark passed when that is
        # shorter than scanning every open step (hundreds stay open while one source is far behind)
        end = math.floor(mark / self.grid_s)  # steps before this one end by the mark
        first = math.floor(self._closed_until / self.grid_s) if math.isfinite(self._closed_until) else None
        if first is not None and 0 <= end - first <= len(self._open):
            due = [s for s in range(first, end) if s in self._open]
        else:
            due = sorted(s for s in self._open if s < end)
        for s in due:
            sums, counts, last = self._open.pop(s)
            with np.errstate(invalid="ignore", divide="ignore"):
                row = np.where(np.isnan(last), np.where(counts > 0, sums / counts, np.nan), last)
            self._closed[s] = row
            self.present += ~np.isnan(row)
        if due:
            self._changed.update(due)
            self.steps_closed += len(due)
            self._closed_until = max(self._closed_until, (due[-1] + 1) * self.grid_s)
            # keep the history of the *oldest* step closed now: one call may close many (a node back after
            # a silence), and the caller takes each of their windows after this call
            for s in [s for s in self._closed if s <= due[0] - self.keep_steps]:
                del self._closed[s]
                self._changed.add(s)
        return [s * self.grid_s for s in due]

    # -- windows --------------------------------------------------------------------
    def window(self, step_time: float, steps: int = 0) -> np.ndarray:
        """The ``(steps, n_sensors)`` window ending with the step starting at ``step_time``."""
        steps = steps or self.window_steps
        last = int(round(step_time / self.grid_s))
        out = np.full((steps, self._n), np.nan)
        for k, s in enumerate(range(last - steps + 1, last + 1)):
            row = self._closed.get(s)
            if row is not None:
                out[k] = row
        return out

    def complete(self, step_time: float, min_present: float = 0.75, steps: int = 0) -> bool:
        """Whether enough steps of the window are present to judge it."""
        steps = steps or self.window_steps
        last = int(round(step_time / self.grid_s))
        present = sum(1 for s in range(last - steps + 1, last + 1) if s in self._closed)
        return present >= min_present * steps

    @property
    def size(self) -> int:
        return len(self._open) + len(self._closed)

    # -- state ----------------------------------------------------------------------
    def _header(self) -> dict:
        return {"sources": {k: v for k, v in self._clock.items() if math.isfinite(v)},
                "late_samples": self.late_samples,
                "closed_until": self._closed_until if math.isfinite(self._closed_until) else None,
                "steps_closed": self.steps_closed, "present": self.present.tolist()}

    def _load_header(self, state: Mapping) -> None:
        self._clock.update({k: float(v) for k, v in state.get("sources", {}).items()})
        self.late_samples = int(state.get("late_samples", 0))
        cu = state.get("closed_until")
        self._closed_until = -math.inf if cu is None else float(cu)
        self.steps_closed = int(state.get("steps_closed", 0))
        self.present = np.array(state.get("present") or np.zeros(self._n), dtype=float)

    def to_state(self) -> dict:
        """Plain-dict state (JSON-safe); processing-time idleness restarts on load."""
        return {"open": {str(k): v.tolist() for k, v in self._open.items()},
                "closed": {str(k): v.tolist() for k, v in self._closed.items()}, **self._header()}

    def load_state(self, state: Mapping) -> "NodeGrid":
        self._open = {int(k): np.array(v, dtype=float) for k, v in state.get("open", {}).items()}
        self._closed = {int(k): np.array(v, dtype=float) for k, v in state.get("closed", {}).items()}
        self._load_header(state)
        self._seen = {}
        self._changed = set()
        return self

    def take_delta(self) -> dict:
        """What changed since the last call (JSON-safe): the clocks and counters, and per changed
        step its ``open`` accumulators, its ``closed`` row, or ``None`` once it left the grid."""
        steps: dict[str, dict | None] = {}
        for s in sorted(self._changed):
            acc, row = self._open.get(s), self._closed.get(s)
            steps[str(s)] = {"open": acc.tolist()} if acc is not None else {"closed": row.tolist()} \
                if row is not None else None
        self._changed = set()
        return {**self._header(), "steps": steps}

    def apply_delta(self, delta: Mapping) -> "NodeGrid":
        """Bring a grid loaded from an earlier state forward by a :meth:`take_delta` result."""
        for key, value in delta.get("steps", {}).items():
            s = int(key)
            self._open.pop(s, None)
            self._closed.pop(s, None)
            if value is not None and "open" in value:
                self._open[s] = np.array(value["open"], dtype=float)
            elif value is not None:
                self._closed[s] = np.array(value["closed"], dtype=float)
        self._load_header(delta)
        return self
