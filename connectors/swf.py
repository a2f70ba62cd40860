"""Standard Workload Format (SWF) reader (Parallel Workloads Archive, version 2.2).

An SWF file is a header of ``;``-comments (``; MaxNodes: 128``, ``; UnixStartTime: ...``)
followed by one line per job with 18 whitespace-separated fields; ``-1`` means unknown.
Plain and ``.gz`` files are read.  Only the fields the cluster simulator needs become
arrays; the header becomes a dict.

Fields (1-based, as in the format definition): 1 job number, 2 submit time, 3 wait
time, 4 run time, 5 allocated processors, 6 average CPU time, 7 used memory,
8 requested processors, 9 requested time, 10 requested memory, 11 status, 12 user,
13 group, 14 executable, 15 queue, 16 partition, 17 preceding job, 18 think time.

Example
-------
>>> import io
>>> text = "; MaxNodes: 4\\n1 0 5 100 2 -1 -1 2 200 -1 1 1 1 -1 -1 -1 -1 -1\\n"
>>> wl = parse_swf(io.StringIO(text))
>>> wl.max_nodes, int(wl.size[0]), float(wl.runtime[0]), float(wl.requested_time[0])
(4, 2, 100.0, 200.0)
"""
from __future__ import annotations

import gzip
import io
import os
from dataclasses import dataclass, field
from typing import IO, Optional, Union

import numpy as np

N_FIELDS = 18


@dataclass
class SwfWorkload:
    """Jobs of an SWF trace as arrays (seconds; sizes in processors = nodes here)."""

    job_id: np.ndarray
    submit: np.ndarray
    wait: np.ndarray            # -1 where unknown
    runtime: np.ndarray
    size: np.ndarray            # allocated processors (requested where allocation unknown)
    requested_time: np.ndarray  # -1 where unknown
    user: np.ndarray
    status: np.ndarray
    header: dict = field(default_factory=dict)
    skipped: int = 0            # job lines dropped (runtime <= 0 or size <= 0)

    @property
    def max_nodes(self) -> Optional[int]:
        """``MaxNodes`` (else ``MaxProcs``) from the header, or None."""
        for key in ("MaxNodes", "MaxProcs"):
            value = self.header.get(key)
            if value is not None:
                try:
                    return int(str(value).split()[0])
                except ValueError:
                    continue
        return None

    def __len__(self) -> int:
        return int(self.job_id.size)


def _open_text(path: Union[str, os.PathLike]) -> IO[str]:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"SWF file not found: {path}")
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def parse_swf(stream: IO[str], source: str = "<stream>") -> SwfWorkload:
    """Parse SWF text from an open stream.

    Raises
    ------
    ValueError
        On a job line whose field count is not 18 or which holds a non-number
        (the message names the line).
    """
    header: dict = {}
    rows: list[list[float]] = []
    for lineno, line in enumerate(stream, 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith(";"):
            body = s.lstrip(";").strip()
            if ":" in body:
                key, _, value = body.partition(":")
                key = key.strip()
                if key and " " not in key and key not in header:
                    header[key] = value.strip()
            continue
        parts = s.split()
        if len(parts) != N_FIELDS:
            raise ValueError(f"{source}:{lineno}: SWF job line has {len(parts)} fields, expected {N_FIELDS}")
        try:
            rows.append([float(p) for p in parts])
        except ValueError as exc:
            raise ValueError(f"{source}:{lineno}: non-numeric SWF field ({exc})") from None
    arr = np.asarray(rows, dtype=float).reshape(-1, N_FIELDS)
    size = np.where(arr[:, 4] > 0, arr[:, 4], arr[:, 7])
    keep = (arr[:, 3] > 0) & (size > 0) & (arr[:, 1] >= 0)
    arr, size = arr[keep], size[keep]
    order = np.argsort(arr[:, 1], kind="stable")
    arr, size = arr[order], size[order]
    return SwfWorkload(job_id=arr[:, 0].astype(np.int64), submit=arr[:, 1], wait=arr[:, 2], runtime=arr[:, 3],
                       size=size.astype(np.int64), requested_time=arr[:, 8], user=arr[:, 11].astype(np.int64),
                       status=arr[:, 10].astype(np.int64), header=header, skipped=int((~keep).sum()))


def load_swf(path: Union[str, os.PathLike]) -> SwfWorkload:
    """Read an SWF file (plain or gzip-compressed), sorted by submit time.

    Example
    -------
    >>> wl = load_swf("/work/shared/data/workloads/NASA-iPSC-1993-3.1-cln.swf.gz")  # doctest: +SKIP
    >>> len(wl), wl.max_nodes  # doctest: +SKIP
    (18239, 128)
    """
    with _open_text(path) as fh:
        return parse_swf(fh, source=os.fspath(path))


def trace_stats(wl: SwfWorkload, nodes: Optional[int] = None, idle_fraction: float = 0.02) -> dict:
    """Load, utilization and idle-node statistics of a trace (FARS Tab. 2), never of an impossible schedule.

    ``offered_load`` is the demanded node-seconds over ``nodes`` × the span from the
    first submit to the last ``submit + wait + runtime`` (unknown waits as 0): what the
    jobs ask of the machine, whatever the schedule.  The schedule statistics
    (``utilization``, ``p_idle_2pct`` — the fraction of the span with at least
    ``idle_fraction`` of the nodes idle — and ``max_concurrent_busy``) describe the
    recorded schedule, jobs running from ``submit + wait`` for ``runtime``; they are
    given only when every wait is known (SWF ``-1`` means unknown, not 0) and the
    schedule fits the machine.  Otherwise they are ``None`` and ``schedule`` says why:
    ``unknown_waits`` or ``over_capacity`` (``peak_demand_nodes`` then shows by how much).

    >>> import io
    >>> wl = parse_swf(io.StringIO("; MaxNodes: 2\\n1 0 -1 10 2 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1 -1\\n"
    ...                            "2 5 -1 10 2 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1 -1\\n"))
    >>> s = trace_stats(wl)
    >>> s["schedule"], s["utilization"], round(s["offered_load"], 3)   # 40 node-s asked of 2 nodes × 15 s
    ('unknown_waits', None, 1.333)
    """
    n_nodes = int(nodes or wl.max_nodes or int(wl.size.max()))
    if n_nodes <= 0:
        raise ValueError("number of nodes must be positive")
    if len(wl) == 0:
        raise ValueError("the trace has no job with a positive runtime and size")
    known = wl.wait >= 0
    start = wl.submit + np.where(known, wl.wait, 0.0)
    end = start + wl.runtime
    t0, t1 = float(wl.submit.min()), float(end.max())
    span = max(t1 - t0, 1e-9)
    work = float((wl.runtime * np.minimum(wl.size, n_nodes)).sum())
    times = np.concatenate([start, end])
    delta = np.concatenate([wl.size, -wl.size]).astype(float)
    order = np.lexsort((delta, times))   # ends (negative) before starts at equal times
    times, delta = times[order], delta[order]
    busy = np.cumsum(delta)
    peak = float(busy.max())
    out = {"jobs": len(wl) + wl.skipped, "nodes": n_nodes, "span_days": span / 86400.0,
           "offered_load": work / (n_nodes * span), "mean_runtime_s": float(wl.runtime.mean()),
           "mean_size": float(wl.size.mean()), "simulated_jobs": len(wl), "skipped": wl.skipped,
           "unknown_waits": int((~known).sum()), "schedule": "recorded", "utilization": None, "p_idle_2pct": None,
           "max_concurrent_busy": None, "peak_demand_nodes": None, "note": ""}
    if not known.all():
        out.update(schedule="unknown_waits", note=f"{out['unknown_waits']} of {len(wl)} jobs have an unknown wait "
                   "time (-1): the schedule is not in the trace, so only the offered load is reported")
        return out
    if peak > n_nodes:
        out.update(schedule="over_capacity", peak_demand_nodes=peak,
                   note=f"the recorded schedule needs {peak:.0f} nodes at once on a {n_nodes}-node machine; "
                        "only the offered load is reported")
        return out
    s0 = float(start.min())
    sched_span = max(t1 - s0, 1e-9)
    dt = np.diff(np.append(times, t1))
    idle = n_nodes - busy
    out.update(utilization=work / (n_nodes * sched_span),
               p_idle_2pct=float(dt[idle >= idle_fraction * n_nodes].sum() / sched_span), max_concurrent_busy=peak)
    return out
