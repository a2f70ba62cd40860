"""``hpcguard label``: a site's failure labels from its sacct dump, its ``sacctmgr show event``
dump and its recorded telemetry, written as the ``failures.csv`` training reads.

:func:`label_files` reads the files (:func:`~hpcguard.connectors.sacct.read_sacct`,
:func:`~hpcguard.connectors.slurm_events.read_events`,
:func:`~hpcguard.connectors.recorded.load_sensor_grid`) and hands what they hold to
:func:`hpcguard.models.labels.failure_labels`.  The telemetry's sample times are the node
steps of the worker's grid that hold any canonical sensor (``grid_s``, 15 s): a node is
silent where its steps are empty.  With a data directory, labels on nodes it has no
telemetry of are left out (``hpcguard train failure`` refuses them) and counted.

:func:`write_failures_csv` writes ``time,node,job_id,cause,family,source,confidence,reason``
(:func:`~hpcguard.connectors.recorded.load_failures` reads the first five; ``cause`` and
``family`` stay blank: Slurm does not say which precursor family a failure had).

Example
-------
>>> import pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "sacct.txt").write_text("JobID|State|End|NodeList\\n7|NODE_FAIL|2023-03-24T18:00:00|c1\\n"
...                                  "8|COMPLETED|2023-03-24T18:00:00|c2\\n9|NODE_FAIL|yesterday|c3\\n")
>>> run = label_files(sacct=d / "sacct.txt")
>>> run["labels"][["node", "job_id", "source"]].tolist(), run["counts"]["rejected"]
([('c1', '7', 'node_fail')], {'bad_time': 1})
>>> write_failures_csv(run["labels"], d / "failures.csv")
1
>>> from hpcguard.connectors.recorded import load_failures
>>> load_failures(d)[["node", "job_id", "family"]].tolist()
[('c1', '7', '')]
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from hpcguard.connectors.errors import Rejected
from hpcguard.connectors.sacct import SacctDialect, read_sacct
from hpcguard.connectors.slurm_events import read_events
from hpcguard.models.labels import KINDS, LabelParams, failure_labels

CSV_COLUMNS = ("time", "node", "job_id", "cause", "family", "source", "confidence", "reason")
MAX_EXAMPLES = 10


def grid_sample_times(grid: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """``(node names, step start times, end of the records)`` of a
    :class:`~hpcguard.connectors.recorded.SensorGrid`: one entry per node step holding a value."""
    present = np.isfinite(grid.values).any(axis=2)
    n_idx, s_idx = np.nonzero(present)
    names = np.asarray(grid.nodes, dtype=str)[n_idx] if n_idx.size else np.zeros(0, dtype=str)
    return names, grid.t0 + grid.grid_s * s_idx, float(grid.t0 + grid.grid_s * grid.values.shape[1])


def _collect(records, counts: dict, rejected: list) -> list[dict]:
    out = []
    for rec in records:
        if isinstance(rec, Rejected):
            counts[rec.kind] = counts.get(rec.kind, 0) + 1
            if len(rejected) < MAX_EXAMPLES:
                rejected.append({"source": rec.source, "line": rec.line, "kind": rec.kind, "reason": rec.reason})
        else:
            out.append(rec)
    return out


def label_files(sacct: Optional[str | Path] = None, events: Optional[str | Path] = None,
                data: Optional[str | Path] = None, params: Optional[LabelParams] = None,
                settings: Any = None, events_columns: Sequence[str] = (), grid_s: float = 15.0) -> dict[str, Any]:
    """Failure labels of a site's files; returns ``labels`` (``models.labels.LABEL_DTYPE``),
    ``counts`` (records read, rejected by kind, labels by source) and ``rejected`` (the first
    rows refused, with file, line and why).

    ``settings`` (default: :meth:`Settings.load() <hpcguard.settings.Settings.load>`) gives the
    ``[sacct]`` dialect (also the time zone of the event dump) and the telemetry's input
    settings; ``events_columns`` the ``Format=`` columns of an event dump without a header.
    """
    if sacct is None and events is None and data is None:
        raise ValueError("nothing to label from: give a sacct dump, an event dump or a data directory")
    if settings is None:
        from hpcguard.settings import Settings

        settings = Settings.load()
    p = params or LabelParams()
    dialect = SacctDialect.from_settings(settings)
    counts: dict[str, Any] = {"jobs": 0, "node_fail_jobs": 0, "events": 0, "cluster_events": 0, "nodes": 0,
                              "rejected": {}}
    rejected: list[dict] = []
    jobs: list[dict] = []
    if sacct is not None:
        stats: dict = {}
        jobs = _collect(read_sacct(sacct, dialect=dialect, stats=stats), counts["rejected"], rejected)
        counts["jobs"] = len(jobs)
        counts["node_fail_jobs"] = sum(1 for j in jobs if str(j.get("state", "")).upper() == "NODE_FAIL")
    evs: list[dict] = []
    if events is not None:
        stats = {}
        evs = _collect(read_events(events, columns=events_columns, tz=dialect.timezone, stats=stats),
                       counts["rejected"], rejected)
        counts["events"], counts["cluster_events"] = len(evs), stats.get("cluster_events", 0)
    samples, end_time, known = None, None, None
    if data is not None:
        from hpcguard.connectors.recorded import load_sensor_grid

        grid = load_sensor_grid(data, grid_s=grid_s, settings=settings)
        names, times, end_time = grid_sample_times(grid)
        samples, known = (names, times), set(grid.nodes)
        counts["nodes"] = len(grid.nodes)
    labels = failure_labels(jobs, evs, samples, end_time, p)
    if known is not None:
        outside = ~np.isin(labels["node"], sorted(known))
        counts["labels_without_telemetry"] = int(outside.sum())
        counts["nodes_without_telemetry"] = sorted(set(labels["node"][outside].tolist()))[:MAX_EXAMPLES]
        labels = labels[~outside]
    counts["labels"] = int(labels.size)
    counts["by_source"] = {s: int(n) for s, n in zip(*np.unique(labels["source"], return_counts=True))}
    counts["with"] = {k: int(sum(k in s.split("+") for s in labels["source"].tolist())) for k in KINDS}
    return {"labels": labels, "counts": counts, "rejected": rejected, "params": p}


def write_failures_csv(labels: np.ndarray, path: str | Path) -> int:
    """Write ``labels`` as ``failures.csv`` (:data:`CSV_COLUMNS`); returns the rows written."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        for row in labels:
            t = float(row["time"])
            w.writerow([f"{t:.3f}" if math.isfinite(t) else "", row["node"], row["job_id"], "", "", row["source"],
                        f"{float(row['confidence']):.3f}", row["reason"]])
    return int(labels.size)


def label_run_summary(run: dict[str, Any], out: str | Path | None = None) -> dict[str, Any]:
    """The JSON-able summary of :func:`label_files`' result (``out``: where the labels went)."""
    labels = run["labels"]
    first = [{"time": float(r["time"]), "node": str(r["node"]), "source": str(r["source"]),
              "confidence": round(float(r["confidence"]), 3), "job_id": str(r["job_id"]), "reason": str(r["reason"])}
             for r in labels[:MAX_EXAMPLES]]
    p = run["params"]
    return {"out": None if out is None else str(out), "counts": run["counts"], "rejected": run["rejected"],
            "first_labels": first,
            "params": {"window_s": p.window_s, "silence_factor": p.silence_factor, "min_silence_s": p.min_silence_s,
                       "silence_quantile": p.silence_quantile, "min_confidence": p.min_confidence}}


def label_to_csv(out: str | Path, sacct: Optional[str | Path] = None, events: Optional[str | Path] = None,
                 data: Optional[str | Path] = None, params: Optional[LabelParams] = None, settings: Any = None,
                 events_columns: Sequence[str] = ()) -> dict[str, Any]:
    """:func:`label_files`, then :func:`write_failures_csv` to ``out``; returns
    :func:`label_run_summary` (what ``hpcguard label`` prints)."""
    run = label_files(sacct, events, data, params, settings, events_columns)
    write_failures_csv(run["labels"], out)
    return label_run_summary(run, out)
