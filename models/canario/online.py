"""CanarIO's online state (seed 004), fed by event time: system IO windows, probes,
late labels, the detector, job sensitivity and the Fig. 5.1 decisions.

* :class:`SystemIoWindows` — sums the nodes' 1 s IO rates into the system aggregate and
  closes 1-minute observation windows once the IO watermark passes them.  The
  watermark is the slowest live node's newest sample time minus ``lateness_s``; a node
  is idle after ``idle_s`` of processing time (the caller's ``now``) without a sample,
  never while the caller says its input has a backlog (``hold``).
  Samples for closed windows are counted as late and returned, never used silently.
* :class:`CanarioState` — probe tracking, late window labels, the online detector, the
  job-sensitivity classifier (each job's script scored once, when a decision first sees
  the job) and the decisions; the running jobs and the queue at a window's end come from
  the job timeline (``models.jobs.JobTimeline``), so they are those of the window's event
  time.

Example
-------
>>> import numpy as np
>>> w = SystemIoWindows(lateness_s=0)
>>> closed, late = w.add_many(["n1"] * 61, np.arange(61.0), np.full(61, 1e9), np.full(61, 2e9))
>>> [(end, round(f["read_mean"])) for end, f in closed], late
([(60.0, 1000000000)], [])
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from hpcguard.models.canario.decisions import io_aware_actions
from hpcguard.models.canario.detector import WINDOW_S, IoDegradationDetector, LateLabeler
from hpcguard.models.canario.prionn import JobSensitivityClassifier
from hpcguard.models.canario.probes import ProbeTracker
from hpcguard.models.features import io_window_features


class SystemIoWindows:
    """System-aggregate 1 s read/write rates → closed 1-minute windows with their features.

    ``nodes``: nodes expected from the start (the site's inventory); each holds the
    watermark back until it sends or goes idle, so a node whose samples reach this worker
    later than others' (another worker normalizes it) is waited for, not judged late.
    """

    def __init__(self, window_s: float = WINDOW_S, lateness_s: float = 5.0, idle_s: float = 60.0,
                 nodes: Sequence[str] = ()) -> None:
        self.window_s = window_s
        self.lateness_s = lateness_s
        self.idle_s = idle_s
        self._seconds: dict[int, list[float]] = {}
        self._clock: dict[str, float] = {str(n): -math.inf for n in nodes}  # node -> newest sample time
        self._seen: dict[str, float] = {}  # node -> processing time of its last sample
        self._closed_until = -math.inf
        self.late_samples = 0
        self._changed: set[int] = set()  # seconds added to or closed since the last take_delta
        self._changed_nodes: set[str] = set()  # nodes whose clock moved since then

    def add_many(self, nodes: Sequence[str], times: np.ndarray, reads: np.ndarray, writes: np.ndarray,
                 now: float | None = None, hold: bool = False) -> tuple[list[tuple[float, dict]], list[int]]:
        """Add a batch of node rates; return the windows it closed and the indices of late samples.

        ``hold``: the input still has unread records (a consumer backlog): no node is judged idle."""
        times, reads, writes = (np.asarray(a, dtype=float) for a in (times, reads, writes))
        if not (np.isfinite(times).all() and np.isfinite(reads).all() and np.isfinite(writes).all()):
            raise ValueError("non-finite IO sample in the batch")
        judge = None if hold else now  # the processing time idleness is judged at
        late = times < self._closed_before(list(nodes), times, judge)
        secs = np.floor(times[~late]).astype(np.int64)
        uniq, inv = np.unique(secs, return_inverse=True)
        r_sum = np.bincount(inv, weights=reads[~late], minlength=uniq.size)
        w_sum = np.bincount(inv, weights=writes[~late], minlength=uniq.size)
        for s, r, w in zip(uniq.tolist(), r_sum.tolist(), w_sum.tolist()):
            acc = self._seconds.setdefault(s, [0.0, 0.0])
            acc[0] += r
            acc[1] += w
        self._changed.update(uniq.tolist())
        for node, t in zip(nodes, times.tolist()):
            if t > self._clock.get(node, -math.inf):
                self._clock[node] = t
                self._changed_nodes.add(node)
            if now is not None:
                self._seen[node] = now
        self.late_samples += int(late.sum())
        return self._close(judge), np.flatnonzero(late).tolist()

    def _closed_before(self, nodes: list[str], times: np.ndarray, now: float | None) -> np.ndarray:
        """Per sample, where the closed windows end when it arrives (as if the batch came one by one)."""
        uniq, inv = np.unique(np.asarray(nodes, dtype=object), return_inverse=True)
        clocks = np.full((uniq.size, times.size), -np.inf)
        clocks[inv, np.arange(times.size)] = times
        clocks[:, 0] = np.maximum(clocks[:, 0], [self._clock.get(u, -np.inf) for u in uniq])
        running = np.maximum.accumulate(clocks, axis=1)
        # a node not heard from yet does not hold the watermark, unless it is expected (``nodes``)
        unknown = np.array([u not in self._clock for u in uniq.tolist()])
        running[unknown[:, None] & (running == -np.inf)] = np.inf
        in_batch = set(uniq.tolist())
        others = [t for n, t in self._clock.items() if n not in in_batch
                  and (now is None or now - self._seen.get(n, now) < self.idle_s)]
        after = np.minimum(running.min(axis=0), min(others, default=np.inf)) - self.lateness_s
        marks = np.concatenate([[self.watermark(now)], after[:-1]])
        with np.errstate(invalid="ignore"):
            ends = np.where(np.isfinite(marks), np.floor(marks / self.window_s) * self.window_s, -np.inf)
        return np.maximum(self._closed_until, np.maximum.accumulate(ends))

    def add_sample(self, node: str, time: float, read_rate: float, write_rate: float,
                   now: float | None = None) -> list[tuple[float, dict]]:
        """Add one node's rates at ``time``; return windows closed by this sample."""
        return self.add_many([node], [time], [read_rate], [write_rate], now)[0]

    def advance(self, now: float, hold: bool = False) -> list[tuple[float, dict]]:
        """Close the windows freed by nodes that went idle by processing time ``now`` (none while ``hold``)."""
        return [] if hold else self._close(now)

    def live_nodes(self, now: float | None = None, hold: bool = False) -> list[str]:
        """The nodes that still hold the IO watermark back: not idle by processing time ``now`` (all while ``hold``)."""
        return [n for n in self._clock if now is None or hold or now - self._seen.setdefault(n, now) < self.idle_s]

    def watermark(self, now: float | None = None) -> float:
        if not self._clock:
            return -math.inf
        live = [self._clock[n] for n in self.live_nodes(now)]
        return (min(live) if live else max(self._clock.values())) - self.lateness_s

    def _close(self, now: float | None) -> list[tuple[float, dict]]:
        out = []
        mark = self.watermark(now)
        while self._seconds:
            start = math.floor(min(self._seconds) / self.window_s) * self.window_s
            if start + self.window_s > mark:
                break
            secs = np.arange(int(start), int(start + self.window_s)).tolist()
            self._changed.update(s for s in secs if s in self._seconds)
            rows = np.array([self._seconds.pop(s, (np.nan, np.nan)) for s in secs])
            if np.isfinite(rows[:, 0]).any():
                out.append((start + self.window_s, io_window_features(rows[:, 0], rows[:, 1])))
            self._closed_until = start + self.window_s
        return out

    @property
    def size(self) -> int:
        return len(self._seconds)

    def to_state(self) -> dict:
        """JSON-safe state; processing-time idleness restarts on load (as ``models.grid.NodeGrid``)."""
        return {"seconds": [[s, r, w] for s, (r, w) in self._seconds.items()],
                "clock": {n: t for n, t in self._clock.items() if math.isfinite(t)},
                "closed_until": self._closed_until if math.isfinite(self._closed_until) else None,
                "late_samples": self.late_samples}

    def load_state(self, state: dict) -> "SystemIoWindows":
        self._seconds = {int(s): [float(r), float(w)] for s, r, w in state["seconds"]}
        self._clock.update({str(n): float(t) for n, t in state["clock"].items()})
        self._seen = {}
        cu = state["closed_until"]
        self._closed_until = -math.inf if cu is None else float(cu)
        self.late_samples = int(state["late_samples"])
        self._changed, self._changed_nodes = set(), set()
        return self

    def take_delta(self) -> dict:
        """What changed since the last call (JSON-safe): per changed second its sums or ``None`` once
        closed, the clocks that moved, the closed end and the late count (cf. ``NodeGrid.take_delta``)."""
        seconds = {str(s): list(self._seconds[s]) if s in self._seconds else None for s in sorted(self._changed)}
        clock = {n: self._clock[n] for n in sorted(self._changed_nodes)}
        self._changed, self._changed_nodes = set(), set()
        return {"seconds": seconds, "clock": clock, "late_samples": self.late_samples,
                "closed_until": self._closed_until if math.isfinite(self._closed_until) else None}

    def apply_delta(self, delta: dict) -> "SystemIoWindows":
        """Bring windows loaded from an earlier state forward by a :meth:`take_delta` result."""
        for key, sums in delta["seconds"].items():
            if sums is None:
                self._seconds.pop(int(key), None)
            else:
                self._seconds[int(key)] = [float(sums[0]), float(sums[1])]
        self._clock.update({str(n): float(t) for n, t in delta["clock"].items()})
        cu = delta["closed_until"]
        self._closed_until = -math.inf if cu is None else float(cu)
        self.late_samples = int(delta["late_samples"])
        return self


class CanarioState:
    """All CanarIO state of one file system: probes, labels, detector, job sensitivity, decisions."""

    def __init__(self, detector: Optional[IoDegradationDetector] = None,
                 classifier: Optional[JobSensitivityClassifier] = None,
                 tracker: Optional[ProbeTracker] = None, labeler: Optional[LateLabeler] = None) -> None:
        self.detector = detector or IoDegradationDetector()
        self._classifier = classifier
        self.tracker = tracker or ProbeTracker()
        self.labeler = labeler or LateLabeler()
        self.state: dict = {"degraded": False, "probability": 0.0, "window_end": None, "features": {}}
        self.sensitivity: dict[str, float] = {}  # job id -> predicted IO sensitivity of its script
        self.delayed: set[str] = set()
        self.probes: list[list] = []  # [end, probe_id, probe_type, start] received, not yet applied
        self.probe_time = -math.inf  # the probe stream's clock: the latest probe end received

    @property
    def classifier(self) -> JobSensitivityClassifier:
        """The job classifier, created on first use (importing torch is slow)."""
        if self._classifier is None:
            self._classifier = JobSensitivityClassifier()
        return self._classifier

    def to_state(self) -> dict:
        """JSON-safe state of the detector, labels, probes, verdict and held jobs (scores are recomputed)."""
        return {"detector": self.detector.to_state(), "labeler": self.labeler.to_state(),
                "tracker": self.tracker.to_state(), "state": self.state, "delayed": sorted(self.delayed),
                "probes": self.probes, "probe_time": self.probe_time if math.isfinite(self.probe_time) else None}

    def load_state(self, state: dict) -> "CanarioState":
        self.detector.load_state(state["detector"])
        self.labeler.load_state(state["labeler"])
        self.tracker.load_state(state["tracker"])
        self.state, self.delayed = dict(state["state"]), set(state["delayed"])
        self.probes = [list(p) for p in state["probes"]]
        self.probe_time = -math.inf if state["probe_time"] is None else float(state["probe_time"])
        return self

    def on_probe(self, probe_id: str, probe_type: str, start: float, end: float) -> None:
        """A completed probe; it is applied by the first window that ends at or after it."""
        self.probes.append([float(end), str(probe_id), str(probe_type), float(start)])
        self.probe_time = max(self.probe_time, float(end))

    def _apply_probes(self, now: float) -> None:
        """The received probes that ended by window time ``now``, in end-time order: their runtime ratios
        (the baseline is the first runs *by end time*) credited to the windows they overlap."""
        due = sorted(p for p in self.probes if p[0] <= now)
        self.probes = [p for p in self.probes if p[0] > now]
        for end, probe_id, probe_type, start in due:
            ratio = self.tracker.observe(probe_type, end - start)["ratio"]
            self.labeler.probe_completed(probe_id, start, end, ratio)

    def on_window(self, window_end: float, features: dict) -> dict:
        """Predict the new window (before it joins the bank); returns the degradation state.

        The probes received that ended by ``window_end`` are applied first, so labels and the bank
        are functions of event time whenever the probe stream has passed ``window_end``."""
        self._apply_probes(window_end)
        degraded, probability = self.detector.observe_window(features, window_end)
        self.labeler.add_window(window_end, features)
        self._flush_labels(window_end)
        self.state = {"degraded": degraded, "probability": probability, "window_end": window_end,
                      "features": dict(features), "model": self.detector.model_name}
        return self.state

    def _flush_labels(self, now: float) -> None:
        for w_end, _f, ratio in self.labeler.ready(now):
            self.detector.add_label(w_end, ratio)

    def _score(self, jobs: Sequence[dict]) -> None:
        """Score (PRIONN, once per job) the jobs' scripts; forget the scores of jobs no longer present.

        Scores come from the job records themselves (``script`` of the submit event), so
        whichever worker owns the file system scores the same jobs the same way.
        """
        ids = [str(j["job_id"]) for j in jobs]
        new = {i: j["script"] for i, j in zip(ids, jobs) if i not in self.sensitivity and j.get("script")}
        if new:
            self.sensitivity.update(zip(new, self.classifier.predict_many(list(new.values())).tolist()))
        self.sensitivity = {i: self.sensitivity[i] for i in ids if i in self.sensitivity}

    def decide(self, now: float, queued: Sequence[dict], running: Sequence[dict]) -> list[dict]:
        """Fig. 5.1 actions at ``now`` for the queue and running jobs *at* ``now``; updates the delayed set.

        ``queued``/``running`` are ``JobTimeline.queued_at(now)``/``running_at(now)`` records;
        jobs without a script (hence without a score) count as not sensitive.
        """
        self._score([*queued, *running])
        def scored(j: dict) -> dict:
            return {"job_id": j["job_id"], "num_nodes": int(j.get("num_nodes") or len(j.get("nodes") or []) or 1),
                    "nodes": list(j.get("nodes") or []), "start": j.get("start_time"),
                    "expected_runtime_s": float(j.get("time_limit_s") or 3600.0),
                    "sensitivity": self.sensitivity.get(str(j["job_id"]), 0.0)}

        self.delayed &= {str(j["job_id"]) for j in queued}  # a job that started or left is no longer held
        actions = io_aware_actions(self.state, [scored(j) for j in queued], [scored(j) for j in running], now,
                                   delayed=self.delayed)
        for a in actions:
            if a["kind"] == "delay":
                self.delayed.add(a["job_id"])
            elif a["kind"] == "release":
                self.delayed.discard(a["job_id"])
        return actions
