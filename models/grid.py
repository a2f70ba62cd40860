"""Align one node's samples onto its sampling grid (seed 000: 15 s) by event time.

IPMI readings take the last value within a step; operating-system metrics (LDMS
samplers at their own rates) take the mean within the step.  A sensor with no sample
in a step stays NaN — missing values are marked, never invented.  IPMI polls jitter:
:func:`poll_steps` moves a poll whose step an earlier poll took to the next step (within a
tolerance) instead of merging the two; the grid places a step's polls when it closes, the
offline loader (``connectors.recorded``) by the same function.

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
{'0': None, '2': ['closed'], '3': ['keys', 'open', 'polls']}
>>> bool(np.array_equal(copy.apply_delta(delta).window(30.0), g.window(30.0), equal_nan=True))
True
"""
from __future__ import annotations

import hashlib
import math
from typing import Collection, Mapping

import numpy as np

from hpcguard.models.features import CANONICAL_SENSORS

#: how far before a step's start a jittered poll may still take it (``worker.poll_tolerance_s``): a poll early by up
#: to the spread of its poller's jitter (±1.5 s, or Telegraf's ``collection_jitter`` up to 3 s) keeps a step of its
#: own; a second poll in mid-step (a faster poller, a retry) still merges instead of moving
POLL_TOLERANCE_S = 3.0
_NO_STEP = np.iinfo(np.int64).min // 4  # "no earlier poll": below any step, and +1 does not overflow


def poll_steps(times: np.ndarray, grid_s: float, tolerance_s: float, new_series: np.ndarray | None = None,
               last: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The grid step each poll takes: its own step, or the next one when its own is taken.

    Polls (IPMI readings of one node and source, each poll at one time) come once a step,
    but with jitter: two can fall into one step and leave the next empty.  Taken in time
    order, a poll takes the step its time falls in (``floor(t / grid_s)``) unless the
    previous poll already took that step (or a later one); then it *moves* to the step after
    the previous poll's when that step starts at most ``tolerance_s`` after the poll, else it
    *merges* into the previous poll's step (the later reading wins, as for last-value steps).
    A poll never moves back and never more than ``tolerance_s`` forward, so its step depends
    only on its own time and the polls before it: the streaming grid decides it when the
    step closes, the offline loader for the whole recording, with the same result.

    Parameters
    ----------
    times
        Poll times (seconds), ascending within each series, one entry per poll.
    grid_s, tolerance_s
        Step length, and how far before a step's start a poll may still take it
        (``0 <= tolerance_s < grid_s / 2``: a poll stays nearer its step than the one after).
    new_series
        ``True`` where a new series (node, source) starts; default: one series.
    last
        The step the first series' previous poll took (polls decided earlier), if any.

    Returns
    -------
    steps, moved, merged
        Step per poll; whether it moved to a later step than its own; whether it shares
        its step with the poll before it.

    Example
    -------
    >>> steps, moved, merged = poll_steps(np.array([0.5, 14.2, 29.8, 46.0, 52.0]), 15.0, 3.0)
    >>> steps.tolist(), moved.tolist(), merged.tolist()   # 14.2 and 29.8 came early; 52.0 is a second poll
    ([0, 1, 2, 3, 3], [False, True, True, False, False], [False, False, False, False, True])
    >>> poll_steps(np.array([44.5]), 15.0, 3.0, last=2)[0].tolist()   # step 2 was taken by an earlier call
    [3]
    """
    if not 0.0 <= tolerance_s < grid_s / 2:
        raise ValueError(f"poll tolerance {tolerance_s} s must be in [0, grid_s / 2) = [0, {grid_s / 2})")
    t = np.asarray(times, float)
    own = np.floor(t / grid_s).astype(np.int64)
    latest = np.floor((t + tolerance_s) / grid_s).astype(np.int64)  # the last step a poll may take
    starts = np.zeros(t.size, bool) if new_series is None else np.asarray(new_series, bool).copy()
    if t.size:
        starts[0] = True
    before = np.full(t.size, _NO_STEP, np.int64)  # the step each series' poll before the first one took
    if last is not None and t.size:
        before[0] = int(last)
    steps = own.copy()  # most polls keep their own step: only collisions and what follows them change

    def previous(i: np.ndarray) -> np.ndarray:
        return np.where(starts[i], before[i], steps[np.maximum(i - 1, 0)])

    # rounds of a sequential rule: a poll's step changes only when the one before it changed (or collided);
    # the steps only grow, so the rounds stop at the rule's result, after as many rounds as the longest chain
    todo = np.flatnonzero(own <= previous(np.arange(t.size)))
    while todo.size:
        prev = previous(todo)
        new = np.maximum(own[todo], np.minimum(prev + 1, np.maximum(latest[todo], prev)))
        changed = todo[new != steps[todo]]
        steps[todo] = new
        todo = changed + 1
        todo = todo[todo < t.size]
        todo = todo[~starts[todo]]
    prev = previous(np.arange(t.size))
    return steps, steps != own, steps == prev


def place_readings(series: np.ndarray, times: np.ndarray, grid_s: float, tolerance_s: float,
                   n_series: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`poll_steps` for readings in any order: a poll is a series' readings at one time.

    ``series`` are ids ``0..n_series-1`` (a node's polls of one source).  Returns the step of
    every reading and, per series, ``[polls, moved, merged]``: what the offline loader (and
    the dry run) place as the streaming grid does, each series' polls in time order.

    >>> steps, counts = place_readings(np.array([0, 1, 0, 0, 0]), np.array([14.2, 3.0, 0.5, 14.2, 29.8]), 15.0, 3.0)
    >>> steps.tolist(), counts.tolist()     # node 0's poll at 14.2 (two readings) and at 29.8 came early
    ([1, 0, 0, 1, 2], [[3, 2, 0], [1, 0, 0]])
    """
    series = np.asarray(series, np.int64)
    times = np.asarray(times, float)
    n_series = int(series.max()) + 1 if n_series is None and series.size else int(n_series or 0)
    order = np.lexsort((times, series))
    s_sorted, t_sorted = series[order], times[order]
    new_poll = np.ones(order.size, bool)
    new_poll[1:] = (s_sorted[1:] != s_sorted[:-1]) | (t_sorted[1:] != t_sorted[:-1])
    poll_series = s_sorted[new_poll]
    new_series = np.ones(poll_series.size, bool)
    new_series[1:] = poll_series[1:] != poll_series[:-1]
    steps, moved, merged = poll_steps(t_sorted[new_poll], grid_s, tolerance_s, new_series)
    out = np.empty(order.size, np.int64)
    out[order] = steps[np.cumsum(new_poll) - 1]
    counts = np.stack([np.bincount(poll_series, minlength=n_series), np.bincount(poll_series, moved, n_series),
                       np.bincount(poll_series, merged, n_series)], axis=1).astype(np.int64)
    return out, counts


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
    poll_tolerance_s
        Last-value samples are polls: :func:`poll_steps` places them, with this tolerance,
        when their step closes (``poll_counts`` counts them per source: polls, moved, merged).
    """

    def __init__(self, grid_s: float = 15.0, window_steps: int = 16, lateness_s: float = 30.0,
                 sensors: tuple[str, ...] = CANONICAL_SENSORS, idle_s: float = 60.0, keep_steps: int = 0,
                 sources: tuple[str, ...] = (), poll_tolerance_s: float = POLL_TOLERANCE_S):
        if not 0.0 <= poll_tolerance_s < grid_s / 2:
            raise ValueError(f"poll tolerance {poll_tolerance_s} s must be in [0, grid_s / 2) = [0, {grid_s / 2})")
        self.grid_s = float(grid_s)
        self.poll_tolerance_s = float(poll_tolerance_s)
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
        # polls (last-value samples) wait in their own open step until it closes: only then are all the polls
        # before them known, which decide their step (poll_steps); own step -> [(source, time, row)]
        self._polls: dict[int, list[tuple[str, float, np.ndarray]]] = {}
        self._poll_last: dict[str, int] = {}  # source -> step its newest placed poll took
        self.poll_counts: dict[str, list[int]] = {}  # source -> [polls placed, moved, merged]
        self._closed_until = -math.inf  # steps starting before this are closed
        self._clock: dict[str, float] = {s: -math.inf for s in sources}  # source -> newest event time
        self._seen: dict[str, float] = {}  # source -> processing time of its last record
        self.late_samples = 0
        self.steps_closed = 0
        self.present = np.zeros(self._n)  # per sensor: closed steps with a value (coverage)
        self._changed: set[int] = set()  # steps opened, updated, closed or dropped since the last take_delta
        # open step -> digests of the samples it holds: a record the broker stored twice (a producer's retry
        # after a broker crash writes it again at a new offset) must not count twice in the step's mean
        self._keys: dict[int, set[str]] = {}
        self.duplicate_samples = 0

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
        idx = [self._index[k] for k, v in values.items() if k in self._index and v is not None and math.isfinite(v)]
        if idx:
            vals = np.array([float(values[self.sensors[i]]) for i in idx])
            key = _sample_key(source, time, idx, vals)
            held = self._keys.setdefault(step, set())
            if key in held:
                self.duplicate_samples += 1
                return []  # the same sample again: nothing changes, nothing closes
            held.add(key)
        acc = self._open.get(step)
        if acc is None:
            acc = self._open[step] = np.array([np.zeros(self._n), np.zeros(self._n), np.full(self._n, np.nan)])
        self._changed.add(step)
        if idx:
            if last_value:
                row = np.full(self._n, np.nan)
                row[idx] = vals
                self._polls.setdefault(step, []).append((source, float(time), row))
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
        end = math.floor(mark / self.grid_s)  # steps before this one end by the mark
        first = math.floor(self._closed_until / self.grid_s) if math.isfinite(self._closed_until) else None
        if first is not None and end <= first:
            return []
        self._place_polls(_before(self._polls, first, end))
        due = _before(self._open, first, end)
        for s in due:
            sums, counts, last = self._open.pop(s)
            self._keys.pop(s, None)
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

    def _place_polls(self, steps: list[int]) -> None:
        """Put the polls waiting in ``steps`` (closing now) into the steps :func:`poll_steps` gives them.

        Every poll before them is placed already (a later one for a closed step is late), so the rule
        sees what the offline loader sees, whatever the arrival order and batching."""
        polls: dict[str, list[tuple[float, np.ndarray]]] = {}
        for s in steps:
            for source, t, row in self._polls.pop(s):
                polls.setdefault(source, []).append((t, row))
        for source, items in polls.items():
            counts = self.poll_counts.setdefault(source, [0, 0, 0])
            last = self._poll_last.get(source)
            own = math.floor(items[0][0] / self.grid_s)
            if len(items) == 1 and (last is None or own > last):  # the usual case: no collision, its own step
                step_of, counts[0] = {items[0][0]: own}, counts[0] + 1
            else:
                items.sort(key=lambda p: p[0])  # time order (stable: one poll's samples keep their arrival order)
                times = np.unique([t for t, _ in items])  # one poll per time
                placed, moved, merged = poll_steps(times, self.grid_s, self.poll_tolerance_s, last=last)
                counts[0] += int(times.size)
                counts[1] += int(moved.sum())
                counts[2] += int(merged.sum())
                step_of = dict(zip(times.tolist(), placed.tolist()))
            self._poll_last[source] = max(step_of.values())
            for t, row in items:  # the later reading wins within a step, as offline
                s = step_of[t]
                acc = self._open.get(s)
                if acc is None:  # moved into a step no sample opened yet
                    acc = self._open[s] = np.array([np.zeros(self._n), np.zeros(self._n), np.full(self._n, np.nan)])
                ok = ~np.isnan(row)
                acc[2, ok] = row[ok]
                self._changed.add(s)

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

    def held_until(self) -> float | None:
        """End of the newest step holding a sample that is still open (``None``: none).  A node that
        stopped reporting keeps its last steps open (its watermark trails its newest sample by the
        lateness) until it reports again: they are part of its history, not yet judged."""
        held = [k for k, acc in self._open.items() if acc[1].any() or k in self._polls]
        return (max(held) + 1) * self.grid_s if held else None

    @property
    def size(self) -> int:
        return len(self._open) + len(self._closed)

    # -- state ----------------------------------------------------------------------
    def _header(self) -> dict:
        return {"sources": {k: v for k, v in self._clock.items() if math.isfinite(v)},
                "poll_last": dict(self._poll_last), "poll_counts": {k: list(v) for k, v in self.poll_counts.items()},
                "late_samples": self.late_samples,
                "closed_until": self._closed_until if math.isfinite(self._closed_until) else None,
                "steps_closed": self.steps_closed, "present": self.present.tolist()}

    def _load_header(self, state: Mapping) -> None:
        self._clock.update({k: float(v) for k, v in state.get("sources", {}).items()})
        self.late_samples = int(state.get("late_samples", 0))
        self._poll_last.update({k: int(v) for k, v in state.get("poll_last", {}).items()})
        self.poll_counts.update({k: [int(x) for x in v] for k, v in state.get("poll_counts", {}).items()})
        cu = state.get("closed_until")
        self._closed_until = -math.inf if cu is None else float(cu)
        self.steps_closed = int(state.get("steps_closed", 0))
        self.present = np.array(state.get("present") or np.zeros(self._n), dtype=float)

    def to_state(self) -> dict:
        """Plain-dict state (JSON-safe); processing-time idleness restarts on load."""
        return {"open": {str(k): v.tolist() for k, v in self._open.items()},
                "polls": {str(k): _polls_state(v) for k, v in self._polls.items()},
                "keys": {str(k): sorted(v) for k, v in self._keys.items() if v},
                "closed": {str(k): v.tolist() for k, v in self._closed.items()}, **self._header()}

    def load_state(self, state: Mapping) -> "NodeGrid":
        self._open = {int(k): np.array(v, dtype=float) for k, v in state.get("open", {}).items()}
        self._polls = {int(k): _polls_of(v, self._n) for k, v in state.get("polls", {}).items()}
        self._keys = {int(k): set(v) for k, v in state.get("keys", {}).items()}
        self._closed = {int(k): np.array(v, dtype=float) for k, v in state.get("closed", {}).items()}
        self._load_header(state)
        self._seen = {}
        self._changed = set()
        return self

    def take_delta(self) -> dict:
        """What changed since the last call (JSON-safe): the clocks and counters, and per changed
        step its ``open`` accumulators (and the ``polls`` waiting in it), its ``closed`` row, or
        ``None`` once it left the grid."""
        steps: dict[str, dict | None] = {}
        for s in sorted(self._changed):
            acc, row = self._open.get(s), self._closed.get(s)
            steps[str(s)] = {"open": acc.tolist()} if acc is not None else {"closed": row.tolist()} \
                if row is not None else None
            if s in self._polls:
                steps[str(s)]["polls"] = _polls_state(self._polls[s])
            if acc is not None and self._keys.get(s):
                steps[str(s)]["keys"] = sorted(self._keys[s])
        self._changed = set()
        return {**self._header(), "steps": steps}

    def apply_delta(self, delta: Mapping) -> "NodeGrid":
        """Bring a grid loaded from an earlier state forward by a :meth:`take_delta` result."""
        for key, value in delta.get("steps", {}).items():
            s = int(key)
            self._open.pop(s, None)
            self._closed.pop(s, None)
            self._polls.pop(s, None)
            self._keys.pop(s, None)
            if value is not None and "open" in value:
                self._open[s] = np.array(value["open"], dtype=float)
                if value.get("keys"):
                    self._keys[s] = set(value["keys"])
                if value.get("polls"):
                    self._polls[s] = _polls_of(value["polls"], self._n)
            elif value is not None:
                self._closed[s] = np.array(value["closed"], dtype=float)
        self._load_header(delta)
        return self


def _sample_key(source: str, time: float, idx: list[int], vals: np.ndarray) -> str:
    """A sample's digest: its source, time, sensors and values (an exact copy has the same one)."""
    raw = f"{source}|{time!r}|{idx}|".encode() + vals.tobytes()
    return hashlib.blake2b(raw, digest_size=8).hexdigest()


def _before(steps: Mapping[int, object], first: int | None, end: int) -> list[int]:
    """The keys of ``steps`` before ``end``, in order; walks the steps from ``first`` (the first step not
    closed) when that is shorter than scanning every key (hundreds stay open while one source is far behind)."""
    if first is not None and 0 <= end - first <= len(steps):
        return [s for s in range(first, end) if s in steps]
    return sorted(s for s in steps if s < end)


def _polls_state(polls: list[tuple[str, float, np.ndarray]]) -> list:
    """``[[source, time, sensor indices, values], ...]``: the sensors a poll has (strict JSON, no NaN)."""
    out = []
    for source, t, row in polls:
        idx = np.flatnonzero(~np.isnan(row))
        out.append([source, t, idx.tolist(), row[idx].tolist()])
    return out


def _polls_of(state: list, n: int) -> list[tuple[str, float, np.ndarray]]:
    out = []
    for source, t, idx, vals in state:
        row = np.full(n, np.nan)
        row[idx] = vals
        out.append((str(source), float(t), row))
    return out
