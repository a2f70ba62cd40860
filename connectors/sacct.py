"""Slurm accounting (``sacct --parsable2``) → job records and lifecycle events.

:func:`read_sacct` yields one job record per allocation row (steps such as
``123.batch`` or ``123.0`` are skipped); :func:`job_events` cuts a record into raw
``submit``/``start``/``end`` envelopes (``docs/formats.md``, "Raw transport");
:func:`decode_slurm_envelope` turns an envelope into the fields of
``streams.records.JobEvent``.  An event carries only what was known at its time:
a ``submit`` has no nodes, start or end; a ``start`` has no end; its ``state`` is
``PENDING``/``RUNNING``/the final state.

Example
-------
>>> header = "JobID|JobName|User|Partition|NNodes|NodeList|Submit|Start|End|Timelimit|State|ExitCode"
>>> line = "17|cfd|alice|batch|2|n[001-002]|2023-03-24T18:00:00|2023-03-24T18:01:00|Unknown|1-00:00:00|RUNNING|0:0"
>>> rec = parse_sacct_row(header, line)
>>> rec["nodes"], rec["time_limit_s"], rec["end_time"]
(['n001', 'n002'], 86400.0, None)
>>> [e["event"] for e in job_events({**rec, "header": header, "line": line, "source": "sacct.txt:2"})]
['submit', 'start']
>>> ev = decode_slurm_envelope(job_events({**rec, "header": header, "line": line, "source": "s:2"})[1])
>>> ev["event"], ev["state"], ev["num_nodes"]
('start', 'RUNNING', 2)
"""
from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator, Mapping

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.hostlist import expand_hostlist

FORMAT = "sacct-parsable2"
REQUIRED = ("JobID", "Submit", "Start", "End", "State")
EVENTS = ("submit", "start", "end")
_JOB_ID = re.compile(r"\d+(?:_\d+|_\[[0-9,\-%]+\])?(?:\+\d+)?")
_STEP = re.compile(r"\d+(?:_\d+|_\[[0-9,\-%]+\])?(?:\+\d+)?\.\S+")
_LIMIT = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


def parse_slurm_time(text: str, field: str = "time") -> float | None:
    """Epoch seconds of ``YYYY-MM-DDTHH:MM:SS`` (UTC); ``None`` for ``Unknown``/``None``/empty."""
    s = text.strip()
    if s in ("", "Unknown", "None", "N/A"):
        return None
    try:
        return datetime.fromisoformat(s).replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        raise ParseError("bad_time", f"{field} {s!r} is not YYYY-MM-DDTHH:MM:SS") from None


def parse_timelimit(text: str) -> float | None:
    """Seconds of a Slurm time limit: ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``.

    ``UNLIMITED``, ``Partition_Limit`` and empty give ``None``.

    >>> parse_timelimit("1-02:03:04"), parse_timelimit("30:00"), parse_timelimit("UNLIMITED")
    (93784.0, 1800.0, None)
    """
    s = text.strip()
    if s in ("", "UNLIMITED", "Partition_Limit", "INVALID", "NONE"):
        return None
    m = _LIMIT.fullmatch(s)
    if m is None:
        raise ParseError("bad_time", f"Timelimit {s!r} is not [D-]HH:MM:SS, MM:SS or UNLIMITED")
    days, a, b, c = m.groups()
    parts = [int(x) for x in (a, b, c) if x is not None]
    if days is not None:  # D-HH[:MM[:SS]]
        h, mi, se = (parts + [0, 0])[:3]
        return float(int(days) * 86400 + h * 3600 + mi * 60 + se)
    if len(parts) == 1:
        return float(parts[0] * 60)
    if len(parts) == 2:
        return float(parts[0] * 60 + parts[1])
    return float(parts[0] * 3600 + parts[1] * 60 + parts[2])


def parse_sacct_row(header: str, line: str, source: str = "", line_no: int | None = None) -> dict:
    """Job fields of one ``--parsable2`` row under ``header``; ParseError when malformed."""
    cols = header.rstrip("\r\n").split("|")
    fields = line.rstrip("\r\n").split("|")
    if len(fields) != len(cols):
        raise ParseError("bad_row", f"expected {len(cols)} '|'-separated fields, got {len(fields)}", line_no, source)
    row = dict(zip(cols, fields))
    missing = [c for c in REQUIRED if c not in row]
    if missing:
        raise ParseError("bad_header", f"sacct header lacks {', '.join(missing)}", line_no, source)
    job_id = row["JobID"].strip()
    if not _JOB_ID.fullmatch(job_id):
        raise ParseError("bad_row", f"JobID {job_id!r} is not a Slurm job id", line_no, source)
    try:
        nodes = expand_hostlist(row.get("NodeList", ""))
        num_nodes = int(row["NNodes"]) if row.get("NNodes", "").strip() else len(nodes)
        rec = {
            "job_id": job_id,
            "name": row.get("JobName", ""),
            "user": row.get("User", ""),
            "partition": row.get("Partition", ""),
            "num_nodes": num_nodes,
            "nodes": nodes,
            "submit_time": parse_slurm_time(row["Submit"], "Submit"),
            "start_time": parse_slurm_time(row["Start"], "Start"),
            "end_time": parse_slurm_time(row["End"], "End"),
            "time_limit_s": parse_timelimit(row.get("Timelimit", "")),
            "state": row["State"].split(" ")[0],  # "CANCELLED by 1000" → CANCELLED
            "exit_code": row.get("ExitCode") or None,
        }
    except ParseError as exc:
        raise ParseError(exc.kind, exc.reason, line_no, source) from None
    except ValueError:
        raise ParseError("bad_number", f"NNodes {row.get('NNodes')!r} is not an integer", line_no, source) from None
    return rec


def is_step(job_id: str) -> bool:
    """``123.batch``, ``123.extern``, ``123.0``: job steps, not jobs."""
    return _STEP.fullmatch(job_id.strip()) is not None


def read_sacct(path: str | Path, source: str | None = None) -> Iterator[dict | Rejected]:
    """Job records of a ``sacct --parsable2`` file (header line first), or :class:`Rejected`.

    A record holds the fields of :func:`parse_sacct_row` plus ``header``, ``line``
    and ``source`` (``<file>:<line>``).
    """
    p = Path(path)
    src = source or str(p)
    with open(p) as fh:
        header = fh.readline().rstrip("\r\n")
        if "|" not in header or not header.startswith("JobID"):
            raise ParseError("bad_header", f"sacct --parsable2 output must start with a 'JobID|...' header, "
                             f"got {header[:80]!r}", 1, src)
        cols = header.split("|")
        missing = [c for c in REQUIRED if c not in cols]
        if missing:
            raise ParseError("bad_header", f"sacct header lacks {', '.join(missing)}", 1, src)
        for i, line in enumerate(fh, start=2):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            if is_step(line.split("|", 1)[0]):
                continue
            try:
                rec = parse_sacct_row(header, line, src, i)
            except ParseError as exc:
                yield exc.rejected(line)
                continue
            rec.update(header=header, line=line, source=f"{src}:{i}")
            yield rec


def job_events(record: Mapping) -> list[dict]:
    """Raw ``submit``/``start``/``end`` envelopes of a job record, for the times it has."""
    out = []
    for event, key in (("submit", "submit_time"), ("start", "start_time"), ("end", "end_time")):
        t = record.get(key)
        if t is not None:
            out.append({"format": FORMAT, "header": record["header"], "line": record["line"], "event": event,
                        "time": t, "source": record.get("source", "")})
    return out


def decode_slurm_envelope(env: Mapping) -> dict:
    """``JobEvent`` fields of one raw Slurm envelope; ParseError when malformed."""
    if not isinstance(env, Mapping):
        raise ParseError("bad_json", "a Slurm envelope must be a JSON object")
    src, _, line = str(env.get("source", "raw.slurm")).rpartition(":")
    line_no = int(line) if src and line.isdigit() else None
    src = src or str(env.get("source", "raw.slurm"))
    if env.get("format") != FORMAT:
        raise ParseError("unknown_format", f"format {env.get('format')!r} is not {FORMAT!r}", line_no, src)
    header, row_line, event, t = env.get("header"), env.get("line"), env.get("event"), env.get("time")
    if not isinstance(header, str) or not isinstance(row_line, str):
        raise ParseError("missing_field", "envelope needs header and line strings", line_no, src)
    if event not in EVENTS:
        raise ParseError("bad_row", f"event {event!r} is not one of {EVENTS}", line_no, src)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        raise ParseError("bad_time", f"event time {t!r} is not a finite number", line_no, src)
    rec = parse_sacct_row(header, row_line, src, line_no)
    ev = {"job_id": rec["job_id"], "event": event, "time": float(t), "nodes": rec["nodes"],
          "num_nodes": rec["num_nodes"], "user": rec["user"], "partition": rec["partition"], "name": rec["name"],
          "state": rec["state"], "time_limit_s": rec["time_limit_s"], "submit_time": rec["submit_time"],
          "start_time": rec["start_time"], "end_time": rec["end_time"], "exit_code": rec["exit_code"]}
    if event == "submit":
        ev.update(nodes=[], state="PENDING", start_time=None, end_time=None, exit_code=None)
        script = env.get("script")
        if script is not None:  # batch-script text the replay attached (CanarIO job classifier)
            if not isinstance(script, str):
                raise ParseError("bad_row", f"script must be a string, got {type(script).__name__}", line_no, src)
            ev["script"] = script
    elif event == "start":
        ev.update(state="RUNNING", end_time=None, exit_code=None)
    return ev
