"""Per-stream CanarIO state for the Faust agents (no app here; the agents call these).

* :class:`SystemIoWindows` — sums the nodes' 1 s IO rates into the system aggregate and
  closes 1-minute observation windows once the stream's watermark passes them.
* :class:`CanarioState` — probe tracking, late window labels, the online detector, the
  job-sensitivity classifier and the Fig. 5.1 decisions, fed record by record.

Example
-------
>>> w = SystemIoWindows(lateness_s=0)
>>> for t in range(0, 61):
...     closed = w.add_sample("n1", float(t), 1e9, 2e9)
>>> [(end, round(f["read_mean"])) for end, f in closed]
[(60.0, 1000000000)]
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from hpcguard.models.canario.decisions import io_aware_actions
from hpcguard.models.canario.detector import WINDOW_S, IoDegradationDetector, LateLabeler
from hpcguard.models.canario.prionn import JobSensitivityClassifier
from hpcguard.models.canario.probes import ProbeTracker
from hpcguard.models.features import io_window_features


class SystemIoWindows:
    """System-aggregate 1 s read/write rates → closed 1-minute windows with their features."""

    def __init__(self, window_s: float = WINDOW_S, lateness_s: float = 5.0) -> None:
        self.window_s = window_s
        self.lateness_s = lateness_s
        self._seconds: dict[int, list[float]] = {}
        self._watermark = -math.inf
        self._closed_until = -math.inf
        self.late_samples = 0

    def add_sample(self, node: str, time: float, read_rate: float, write_rate: float) -> list[tuple[float, dict]]:
        """Add one node's rates at ``time``; return windows closed by this sample."""
        if not (math.isfinite(time) and math.isfinite(read_rate) and math.isfinite(write_rate)):
            raise ValueError(f"non-finite IO sample from {node!r} at {time!r}")
        if time < self._closed_until:
            self.late_samples += 1  # its window was already published
            return []
        acc = self._seconds.setdefault(int(math.floor(time)), [0.0, 0.0])
        acc[0] += read_rate
        acc[1] += write_rate
        self._watermark = max(self._watermark, time)
        return self._close()

    def _close(self) -> list[tuple[float, dict]]:
        out = []
        if not self._seconds:
            return out
        first = min(self._seconds)
        start = math.floor(first / self.window_s) * self.window_s
        while start + self.window_s + self.lateness_s <= self._watermark:
            secs = range(int(start), int(start + self.window_s))
            read = np.array([self._seconds.get(s, (np.nan, np.nan))[0] for s in secs])
            write = np.array([self._seconds.get(s, (np.nan, np.nan))[1] for s in secs])
            for s in secs:
                self._seconds.pop(s, None)
            if np.isfinite(read).any():
                out.append((start + self.window_s, io_window_features(read, write)))
            self._closed_until = start + self.window_s
            if not self._seconds:
                break
            start = math.floor(min(self._seconds) / self.window_s) * self.window_s
        return out


class CanarioState:
    """All CanarIO state of one worker: probes, labels, detector, job sensitivity, decisions."""

    def __init__(self, detector: Optional[IoDegradationDetector] = None,
                 classifier: Optional[JobSensitivityClassifier] = None,
                 tracker: Optional[ProbeTracker] = None, labeler: Optional[LateLabeler] = None) -> None:
        self.detector = detector or IoDegradationDetector()
        self._classifier = classifier
        self.tracker = tracker or ProbeTracker()
        self.labeler = labeler or LateLabeler()
        self.state: dict = {"degraded": False, "probability": 0.0, "window_end": None, "features": {}}
        self.queue: dict[str, dict] = {}
        self.running: dict[str, dict] = {}
        self.delayed: set[str] = set()

    @property
    def classifier(self) -> JobSensitivityClassifier:
        """The job classifier, created on first use (importing torch is slow)."""
        if self._classifier is None:
            self._classifier = JobSensitivityClassifier()
        return self._classifier

    def on_probe(self, probe_id: str, probe_type: str, start: float, end: float) -> dict:
        """A completed probe: its ratio, and labels for windows that became final."""
        result = self.tracker.observe(probe_type, end - start)
        self.labeler.probe_completed(probe_id, start, end, result["ratio"])
        self._flush_labels(end)
        return result

    def on_window(self, window_end: float, features: dict) -> dict:
        """Predict the new window (before it joins the bank); returns the degradation state."""
        degraded, probability = self.detector.observe_window(features, window_end)
        self.labeler.add_window(window_end, features)
        self._flush_labels(window_end)
        self.state = {"degraded": degraded, "probability": probability, "window_end": window_end,
                      "features": dict(features), "model": self.detector.model_name}
        return self.state

    def _flush_labels(self, now: float) -> None:
        for w_end, _f, ratio in self.labeler.ready(now):
            self.detector.add_label(w_end, ratio)

    def on_job_submitted(self, job_id: str, script: str, num_nodes: int, expected_runtime_s: float) -> float:
        p = self.classifier.predict_one(script)
        self.queue[str(job_id)] = {"job_id": str(job_id), "num_nodes": num_nodes, "sensitivity": p,
                                   "expected_runtime_s": expected_runtime_s, "script": script}
        return p

    def on_job_started(self, job_id: str, nodes: list[str], start: float) -> None:
        job = self.queue.pop(str(job_id), {"job_id": str(job_id), "sensitivity": 0.0})
        self.delayed.discard(str(job_id))
        self.running[str(job_id)] = {**job, "nodes": list(nodes), "num_nodes": len(nodes), "start": start}

    def on_job_completed(self, job_id: str, sensitive: Optional[bool] = None) -> None:
        """Remove the job; a §4.3 label (when known) trains the classifier."""
        job = self.running.pop(str(job_id), None) or self.queue.pop(str(job_id), None)
        if job is not None and sensitive is not None and "script" in job:
            self.classifier.learn_one(job["script"], sensitive)

    def decide(self, now: float) -> list[dict]:
        """Fig. 5.1 actions for the current state; updates the delayed set."""
        queue = [{k: v for k, v in j.items() if k != "script"} for j in self.queue.values()]
        running = [{k: v for k, v in j.items() if k != "script"} for j in self.running.values()]
        actions = io_aware_actions(self.state, queue, running, now, delayed=self.delayed)
        for a in actions:
            if a["kind"] == "delay":
                self.delayed.add(a["job_id"])
            elif a["kind"] == "release":
                self.delayed.discard(a["job_id"])
        return actions
