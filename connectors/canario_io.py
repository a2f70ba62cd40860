"""Readers of the CanarIO recorded-data files written by :func:`hpcguard.simulators.pfs.write_pfs`.

``DIR/probes.csv``, ``DIR/degradation.csv``, ``DIR/jobs_io.csv``, ``DIR/jobscripts/<job_id>.sh``
and ``DIR/io_system.csv`` (1 s ``time,read_bytes,write_bytes,slowdown``); and the saved
PRIONN job classifier (:func:`save_job_classifier` / :func:`load_job_classifier`).
"""
from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field

import numpy as np

# the files' columns (the simulator writes them, these readers check them)
JOB_FIELDS = ("job_id", "user", "name", "num_nodes", "nodes", "submit", "start", "end", "runtime_s",
              "base_runtime_s", "app", "io_sensitive", "io_fraction", "total_read_bytes",
              "total_write_bytes", "template_id", "deck_change")
PROBE_FIELDS = ("probe_id", "probe_type", "node", "start", "end", "runtime_s")
EPISODE_FIELDS = ("start", "end", "kind", "severity", "peak_slowdown")


@dataclass
class PfsTrace:
    """Everything :func:`~hpcguard.simulators.pfs.simulate_pfs` produced and :func:`read_pfs` reads back
    (arrays share the trace's 1 s grid)."""

    start: float
    end: float
    slowdown: np.ndarray                 # (n_seconds,) PFS slowdown factor, >= 1
    io_read: np.ndarray                  # (n_seconds,) system-aggregate read bytes/s
    io_write: np.ndarray                 # (n_seconds,) system-aggregate write bytes/s
    episodes: list[dict]
    probes: dict[str, np.ndarray]        # columns PROBE_FIELDS
    jobs: dict[str, np.ndarray]          # columns JOB_FIELDS
    scripts: dict[str, str] = field(default_factory=dict)  # job_id -> batch script text
    params: dict = field(default_factory=dict)

    @property
    def times(self) -> np.ndarray:
        """Start time of each 1 s step."""
        return self.start + np.arange(self.slowdown.size, dtype=float)

    def slowdown_at(self, t: np.ndarray | float) -> np.ndarray:
        """Slowdown factor at epoch time(s) ``t`` (1 outside the simulated span)."""
        idx = np.floor(np.asarray(t, float) - self.start).astype(int)
        inside = (idx >= 0) & (idx < self.slowdown.size)
        return np.where(inside, self.slowdown[np.clip(idx, 0, self.slowdown.size - 1)], 1.0)


_FLOAT = {"start", "end", "runtime_s", "submit", "base_runtime_s", "io_fraction", "total_read_bytes",
          "total_write_bytes", "peak_slowdown"}
_INT = {"num_nodes", "template_id"}
_BOOL = {"io_sensitive", "deck_change"}


def _read_table(path: str, fields: tuple[str, ...]) -> dict[str, np.ndarray]:
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found (write it with `hpcguard simulate pfs --out DIR`)")
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [f for f in fields if f not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing columns {missing}")
        rows = list(reader)
    out = {}
    for f in fields:
        col = [r[f] for r in rows]
        try:
            if f in _FLOAT:
                out[f] = np.array(col, dtype=float)
            elif f in _INT:
                out[f] = np.array(col, dtype=int)
            elif f in _BOOL:
                out[f] = np.array(col, dtype=int).astype(bool)
            else:
                out[f] = np.array(col, dtype=object if f == "nodes" else str)
        except ValueError as exc:
            raise ValueError(f"{path}: bad value in column {f!r}: {exc}") from None
    return out


def read_probes(data_dir: str) -> dict[str, np.ndarray]:
    """``probes.csv`` as columns (probe_id, probe_type, node, start, end, runtime_s)."""
    return _read_table(os.path.join(data_dir, "probes.csv"), PROBE_FIELDS)


def read_episodes(data_dir: str) -> list[dict]:
    """``degradation.csv`` ground-truth episodes."""
    t = _read_table(os.path.join(data_dir, "degradation.csv"), EPISODE_FIELDS)
    return [{f: (float(t[f][i]) if f in _FLOAT else str(t[f][i])) for f in EPISODE_FIELDS}
            for i in range(t["start"].size)]


def read_jobs(data_dir: str) -> dict[str, np.ndarray]:
    """``jobs_io.csv`` ground truth per job."""
    return _read_table(os.path.join(data_dir, "jobs_io.csv"), JOB_FIELDS)


def read_scripts(data_dir: str, job_ids) -> dict[str, str]:
    """Batch scripts ``jobscripts/<job_id>.sh`` of ``job_ids``."""
    out = {}
    for jid in job_ids:
        path = os.path.join(data_dir, "jobscripts", f"{jid}.sh")
        try:
            with open(path) as fh:
                out[str(jid)] = fh.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"job script {path} missing") from None
    return out


def read_io_system(data_dir: str) -> dict[str, np.ndarray]:
    """``io_system.csv``: 1 s system-aggregate ``time``, ``read_bytes``, ``write_bytes``, ``slowdown``."""
    path = os.path.join(data_dir, "io_system.csv")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found (write it with `hpcguard simulate pfs --out DIR`)")
    with open(path) as fh:
        header = fh.readline().strip().split(",")
    if header != ["time", "read_bytes", "write_bytes", "slowdown"]:
        raise ValueError(f"{path}: unexpected header {header}")
    a = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    if a.size and np.any(np.diff(a[:, 0]) != 1.0):
        raise ValueError(f"{path}: the time column must advance in steps of exactly 1 s")
    return {"time": a[:, 0], "read_bytes": a[:, 1], "write_bytes": a[:, 2], "slowdown": a[:, 3]}


def read_pfs(data_dir: str) -> PfsTrace:
    """Everything :func:`~hpcguard.simulators.pfs.write_pfs` wrote, as a :class:`PfsTrace`."""
    io = read_io_system(data_dir)
    jobs = read_jobs(data_dir)
    params = {}
    meta = os.path.join(data_dir, "pfs.json")
    if os.path.exists(meta):
        with open(meta) as fh:
            params = json.load(fh)
    start = float(io["time"][0]) if io["time"].size else 0.0
    return PfsTrace(start=start, end=start + io["time"].size, slowdown=io["slowdown"], io_read=io["read_bytes"],
                    io_write=io["write_bytes"], episodes=read_episodes(data_dir), probes=read_probes(data_dir),
                    jobs=jobs, scripts=read_scripts(data_dir, jobs["job_id"]), params=params)


def save_job_classifier(classifier, path: str) -> str:
    """Write a :class:`~hpcguard.models.canario.prionn.JobSensitivityClassifier` to ``path`` (atomically)."""
    data = classifier.to_bytes()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    return path


def load_job_classifier(path: str):
    """The job classifier saved at ``path``; FileNotFoundError / ValueError with the path when unusable."""
    from hpcguard.models.canario.prionn import JobSensitivityClassifier

    if not os.path.isfile(path):
        raise FileNotFoundError(f"job classifier {path} not found (the demo writes one; "
                                "or leave worker.job_classifier empty to learn online)")
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        return JobSensitivityClassifier.from_bytes(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
