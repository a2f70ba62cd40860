"""LANL failure records (LA-UR-05-7318, 1996–2005): read the CSV (optionally xz/gzip).

Columns (README beside the file): System, machine type, nodes, procstot, procsinnode,
nodenum, nodenumz, install, production, decommission, fru type, mem, cputype, memtype,
num intercon, purpose, Prob Started, Prob Fixed, Down Time, then the root-cause columns
Facilities, Hardware, Human Error, Network, Undetermined, Software, Same Event.
Times are ``m/d/Y H:M``; they are read as UTC (the file carries no zone; only
differences matter for inter-arrival times).

>>> from pathlib import Path
>>> path = Path("/work/shared/data/lanl-failures/LA-UR-05-7318-failure-data-1996-2005.csv.xz")
>>> failures = load_lanl(path) if path.exists() else None
>>> failures is None or len(failures.system) > 20000
True
"""
from __future__ import annotations

import csv
import gzip
import io
import lzma
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

__all__ = ["LanlFailures", "load_lanl", "interarrival_hours"]

_CAUSES = ("Facilities", "Hardware", "Human Error", "Network", "Undetermined", "Software")


@dataclass(frozen=True)
class LanlFailures:
    """Failure records as column arrays: ``start_s``/``end_s`` are epoch seconds (UTC)."""

    system: np.ndarray
    node: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray
    cause: np.ndarray
    system_nodes: dict

    def __len__(self) -> int:
        return int(self.system.size)


def _open_text(path: Path):
    raw = path.read_bytes()
    if path.suffix == ".xz":
        raw = lzma.decompress(raw)
    elif path.suffix == ".gz":
        raw = gzip.decompress(raw)
    return io.StringIO(raw.decode("utf-8", errors="replace"))


def _epoch(text: str) -> float:
    return datetime.strptime(text.strip(), "%m/%d/%Y %H:%M").replace(tzinfo=timezone.utc).timestamp()


def load_lanl(path) -> LanlFailures:
    """Read the LANL failure CSV (``.csv``, ``.csv.xz`` or ``.csv.gz``).

    Raises
    ------
    FileNotFoundError, ValueError
        Missing file, missing columns, or a row whose start time does not parse
        (the message names the line).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"LANL failure file not found: {path}")
    try:
        reader = csv.DictReader(_open_text(path))
    except (lzma.LZMAError, OSError) as exc:
        raise ValueError(f"cannot decompress {path}: {exc}") from exc
    need = {"System", "nodenumz", "Prob Started", "Prob Fixed", "nodes"}
    if reader.fieldnames is None or not need <= set(reader.fieldnames):
        raise ValueError(f"{path}: not a LANL failure file (need columns {sorted(need)}, got {reader.fieldnames})")
    system, node, start, end, cause, sizes = [], [], [], [], [], {}
    for line, row in enumerate(reader, start=2):
        try:
            sid = int(row["System"])
            t0 = _epoch(row["Prob Started"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}:{line}: bad System or Prob Started ({exc})") from exc
        try:
            t1 = _epoch(row["Prob Fixed"])
        except (TypeError, ValueError):
            t1 = float("nan")
        system.append(sid)
        node.append(int(row["nodenumz"]) if (row["nodenumz"] or "").strip().isdigit() else -1)
        start.append(t0)
        end.append(t1)
        cause.append(next((c for c in _CAUSES if (row.get(c) or "").strip()), "Unknown"))
        if (row["nodes"] or "").strip().isdigit():
            sizes[sid] = int(row["nodes"])
    return LanlFailures(np.asarray(system, dtype=np.int64), np.asarray(node, dtype=np.int64),
                        np.asarray(start, dtype=float), np.asarray(end, dtype=float),
                        np.asarray(cause, dtype=object), sizes)


def interarrival_hours(failures: LanlFailures, system: int) -> tuple[np.ndarray, int]:
    """System-wide failure inter-arrival times (hours) and the number of zero gaps dropped.

    Records start at one-minute resolution, so simultaneous failures give zero gaps; they
    are dropped (a Weibull likelihood is undefined at zero) and counted.
    """
    starts = np.sort(failures.start_s[failures.system == int(system)])
    if starts.size < 3:
        raise ValueError(f"system {system}: {starts.size} failure records, need at least 3")
    gaps = np.diff(starts) / 3600.0
    zero = gaps <= 0
    return gaps[~zero], int(zero.sum())
