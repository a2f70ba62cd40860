"""Slurm accounting (``sacct``) → job records and lifecycle events.

:func:`read_sacct` yields one job record per allocation row (steps such as
``123.batch`` or ``123.0`` are counted, not yielded); :func:`job_events` cuts a record
into raw ``submit``/``start``/``end`` envelopes (``docs/formats.md``, "Raw transport");
:func:`decode_slurm_envelope` turns an envelope into the fields of
``streams.records.JobEvent``.  An event carries only what was known at its time:
a ``submit`` has no nodes, start or end; a ``start`` has no end; its ``state`` is
``PENDING``/``RUNNING``/the final state.

Columns are found by name, so any ``--format`` list works (``--format=ALL`` too) as
long as it has ``JobID`` (or ``JobIDRaw``) and ``State``; ``Submit``/``Start``/``End``,
``NodeList``, ``NNodes`` (or ``AllocNodes``, or ``node=`` of ``AllocTRES``),
``Timelimit``, ``User``, ``Partition``, ``JobName`` and ``ExitCode`` are used when
present.  A :class:`SacctDialect` says how the text was written: the delimiter
(``-P``/``-p`` use ``|``; ``-p`` adds a trailing one, recognised by itself), the
column list of ``--noheader`` output, and the time zone of times printed without an
offset (sacct prints local time unless ``SLURM_TIME_FORMAT`` has ``%z``).  Times with
an offset (``2023-02-21T14:37:02+0100``) and epoch seconds (``SLURM_TIME_FORMAT=%s``)
are taken as written.

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
>>> london = SacctDialect(timezone="Europe/London")
>>> parse_slurm_time("2020-06-30T13:41:41", tz=london.timezone), parse_slurm_time("2023-02-21T14:37:02+0100")
(1593520901.0, 1676986622.0)
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.hostlist import expand_hostlist
from hpcguard.models.jobs import PROGRESS

FORMAT = "sacct-parsable2"
JOB_ID_COLUMNS = ("JobID", "JobIDRaw")  # the first one present names the job
REQUIRED = ("State",)
EVENTS = ("submit", "start", "end")
_JOB_ID = re.compile(r"\d+(?:_\d+|_\[[0-9,\-%]+\])?(?:\+\d+)?")
_STEP = re.compile(r"\d+(?:_\d+|_\[[0-9,\-%]+\])?(?:\+\d+)?\.\S+")
_LIMIT = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")
_TRES_NODES = re.compile(r"(?:^|,)node=(\d+)(?:,|$)")
_NO_TIME = ("", "Unknown", "None", "N/A")


@dataclass(frozen=True)
class SacctDialect:
    """How a sacct dump was written (settings section ``[sacct]``).

    Parameters
    ----------
    delimiter
        Field separator (``sacct --delimiter``; ``|`` for ``-P``/``-p``).
    timezone
        IANA zone of times printed without an offset (sacct's local time).
    columns
        Column names of ``--noheader`` output (``--format`` order); empty when the
        file starts with its header line.
    """

    delimiter: str = "|"
    timezone: str = "UTC"
    columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.delimiter or self.delimiter in "\r\n":
            raise ValueError(f"sacct delimiter must be a non-empty string without newlines, got {self.delimiter!r}")
        zone(self.timezone)

    @classmethod
    def from_settings(cls, settings=None) -> "SacctDialect":
        """The dialect of the ``[sacct]`` settings (``HPCGUARD_SACCT__TIMEZONE`` ...)."""
        if settings is None:
            from hpcguard.settings import Settings

            settings = Settings.load()
        s = settings.sacct
        return cls(delimiter=s.delimiter, timezone=s.timezone, columns=tuple(s.columns))


@lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; ParseError (``bad_config``) naming it when unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ParseError("bad_config", f"unknown time zone {name!r} ([sacct] timezone): use an IANA name such as "
                         "UTC or Europe/London") from None


def parse_slurm_time(text: str, field: str = "time", tz: str = "UTC") -> float | None:
    """Epoch seconds of a sacct time; ``None`` for ``Unknown``/``None``/empty.

    ``YYYY-MM-DDTHH:MM:SS`` is local time in ``tz``; a trailing offset (``+0100``,
    ``+01:00``, ``Z``) wins; plain digits are epoch seconds (``SLURM_TIME_FORMAT=%s``).
    """
    s = text.strip()
    if s in _NO_TIME:
        return None
    if s.isdigit():
        return float(s)
    try:
        t = datetime.fromisoformat(s)
    except ValueError:
        raise ParseError("bad_time", f"{field} {s!r} is not YYYY-MM-DDTHH:MM:SS[+HHMM] or epoch seconds") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=zone(tz))
    return t.timestamp()


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


def header_columns(header: str, delimiter: str = "|", source: str = "", line_no: int | None = 1) -> list[str]:
    """Column names of a sacct header line (``-p``'s trailing delimiter dropped); ParseError when unusable."""
    cols = [c.strip() for c in header.rstrip("\r\n").split(delimiter)]
    if len(cols) > 1 and cols[-1] == "":
        cols.pop()  # sacct -p ends every line with the delimiter
    if not any(c in cols for c in JOB_ID_COLUMNS):
        raise ParseError("bad_header", f"sacct header has no JobID or JobIDRaw column (delimiter {delimiter!r}), "
                         f"got {header[:80]!r}", line_no, source)
    missing = [c for c in REQUIRED if c not in cols]
    if missing:
        raise ParseError("bad_header", f"sacct header lacks {', '.join(missing)}", line_no, source)
    if len(set(cols)) != len(cols):
        raise ParseError("bad_header", "duplicate column names in sacct header", line_no, source)
    return cols


def _fields(line: str, n_cols: int, delimiter: str, source: str, line_no: int | None) -> list[str]:
    fields = line.rstrip("\r\n").split(delimiter)
    if len(fields) == n_cols + 1 and fields[-1] == "":
        fields.pop()  # -p's trailing delimiter
    if len(fields) != n_cols:
        raise ParseError("bad_row", f"{len(fields)} {delimiter!r}-separated fields under a {n_cols}-column header: "
                         "a record broken across lines, or a header that does not describe the rows "
                         "(set [sacct] columns for --noheader output)", line_no, source)
    return fields


def _num_nodes(row: Mapping[str, str], nodes: list[str]) -> int:
    for col in ("NNodes", "AllocNodes"):
        text = row.get(col, "").strip()
        if text:
            return int(text)
    m = _TRES_NODES.search(row.get("AllocTRES", ""))
    return int(m.group(1)) if m else len(nodes)


def parse_sacct_fields(row: Mapping[str, str], source: str = "", line_no: int | None = None,
                       tz: str = "UTC") -> dict:
    """Job fields of one row given as ``{column: text}``; steps parse too (``job_id`` ``123.batch``)."""
    id_col = next(c for c in JOB_ID_COLUMNS if c in row)
    job_id = row[id_col].strip()
    if not (_JOB_ID.fullmatch(job_id) or _STEP.fullmatch(job_id)):
        raise ParseError("bad_row", f"{id_col} {job_id!r} is not a Slurm job id", line_no, source)
    try:
        nodes = expand_hostlist(row.get("NodeList", ""))
        rec = {
            "job_id": job_id,
            "name": row.get("JobName", ""),
            "user": row.get("User", ""),
            "partition": row.get("Partition", ""),
            "num_nodes": _num_nodes(row, nodes),
            "nodes": nodes,
            "submit_time": parse_slurm_time(row.get("Submit", ""), "Submit", tz),
            "start_time": parse_slurm_time(row.get("Start", ""), "Start", tz),
            "end_time": parse_slurm_time(row.get("End", ""), "End", tz),
            "time_limit_s": parse_timelimit(row.get("Timelimit", "")),
            "state": row["State"].split(" ")[0],  # "CANCELLED by 1000" → CANCELLED
            "exit_code": row.get("ExitCode") or None,
        }
    except ParseError as exc:
        raise ParseError(exc.kind, exc.reason, line_no, source) from None
    except ValueError:
        raise ParseError("bad_number", f"node count {row.get('NNodes', row.get('AllocNodes'))!r} is not an integer",
                         line_no, source) from None
    return rec


def parse_sacct_row(header: str, line: str, source: str = "", line_no: int | None = None,
                    delimiter: str = "|", tz: str = "UTC") -> dict:
    """Job fields of one row under ``header`` (both as sacct wrote them); ParseError when malformed or a step."""
    cols = header_columns(header, delimiter, source, line_no)
    rec = parse_sacct_fields(dict(zip(cols, _fields(line, len(cols), delimiter, source, line_no))), source, line_no, tz)
    if is_step(rec["job_id"]):
        raise ParseError("bad_row", f"{rec['job_id']!r} is a job step, not a job", line_no, source)
    return rec


def is_step(job_id: str) -> bool:
    """``123.batch``, ``123.extern``, ``123.0``: job steps, not jobs."""
    return _STEP.fullmatch(job_id.strip()) is not None


def read_sacct(path: str | Path, source: str | None = None, dialect: SacctDialect | None = None,
               stats: dict | None = None) -> Iterator[dict | Rejected]:
    """Job records of a sacct dump, or :class:`Rejected` for rows that cannot be used.

    The file starts with its header line, unless ``dialect.columns`` names the
    columns (``--noheader``); then a first line that starts with ``JobID`` or
    ``JobIDRaw`` is the file's own header and is skipped.  A record holds the fields of
    :func:`parse_sacct_row` plus ``header``, ``line``, ``source`` (``<file>:<line>``),
    ``delimiter`` and ``tz``.  ``stats`` (if given) counts ``jobs``, ``steps`` and
    ``rejected``.  ``dialect`` defaults to the ``[sacct]`` settings.
    """
    p = Path(path)
    src = source or str(p)
    d = dialect or SacctDialect.from_settings()
    counts = stats if stats is not None else {}
    for key in ("jobs", "steps", "rejected"):
        counts.setdefault(key, 0)
    with open(p, newline="") as fh:
        if d.columns:
            header = d.delimiter.join(d.columns)
            cols = header_columns(header, d.delimiter, "[sacct] columns", None)
            first_line = 1
        else:
            header = fh.readline().rstrip("\r\n")
            cols = header_columns(header, d.delimiter, src, 1)
            first_line = 2
        id_col = next(c for c in JOB_ID_COLUMNS if c in cols)
        for i, line in enumerate(fh, start=first_line):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            if d.columns and i == 1 and line.split(d.delimiter, 1)[0].strip() in JOB_ID_COLUMNS:
                continue  # the file's own header line above --noheader-style rows
            try:
                row = dict(zip(cols, _fields(line, len(cols), d.delimiter, src, i)))
                if is_step(row[id_col]):
                    counts["steps"] += 1
                    continue
                rec = parse_sacct_fields(row, src, i, d.timezone)
            except ParseError as exc:
                counts["rejected"] += 1
                yield exc.rejected(line)
                continue
            counts["jobs"] += 1
            rec.update(header=header, line=line, source=f"{src}:{i}", delimiter=d.delimiter, tz=d.timezone)
            yield rec


def job_events(record: Mapping) -> list[dict]:
    """Raw ``submit``/``start``/``end`` envelopes of a job record, for the times it has."""
    out = []
    for event, key in (("submit", "submit_time"), ("start", "start_time"), ("end", "end_time")):
        t = record.get(key)
        if t is not None:
            env = {"format": FORMAT, "header": record["header"], "line": record["line"], "event": event,
                   "time": t, "source": record.get("source", "")}
            for opt, default in (("delimiter", "|"), ("tz", "UTC")):  # only when not the default: old envelopes stay
                if record.get(opt, default) != default:
                    env[opt] = record[opt]
            out.append(env)
    return out


def progress_envelope(t: float, source: str = "") -> dict:
    """A raw progress marker: every job event of ``source`` with time ≤ ``t`` was published before it.

    >>> decode_slurm_envelope(progress_envelope(1700000000.0, "slurm/jobs.txt"))
    {'event': 'progress', 'time': 1700000000.0}
    """
    return {"format": FORMAT, "event": PROGRESS, "time": float(t), "source": source}


def decode_slurm_envelope(env: Mapping) -> dict:
    """``JobEvent`` fields of one raw Slurm envelope (a ``JobProgress`` for a progress marker);
    ParseError when malformed."""
    if not isinstance(env, Mapping):
        raise ParseError("bad_json", "a Slurm envelope must be a JSON object")
    src, _, line = str(env.get("source", "raw.slurm")).rpartition(":")
    line_no = int(line) if src and line.isdigit() else None
    src = src or str(env.get("source", "raw.slurm"))
    if env.get("format") != FORMAT:
        raise ParseError("unknown_format", f"format {env.get('format')!r} is not {FORMAT!r}", line_no, src)
    header, row_line, event, t = env.get("header"), env.get("line"), env.get("event"), env.get("time")
    if event == PROGRESS:
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise ParseError("bad_time", f"progress time {t!r} is not a finite number", line_no, src)
        return {"event": PROGRESS, "time": float(t)}
    if not isinstance(header, str) or not isinstance(row_line, str):
        raise ParseError("missing_field", "envelope needs header and line strings", line_no, src)
    if event not in EVENTS:
        raise ParseError("bad_row", f"event {event!r} is not one of {EVENTS}", line_no, src)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        raise ParseError("bad_time", f"event time {t!r} is not a finite number", line_no, src)
    delimiter, tz = env.get("delimiter", "|"), env.get("tz", "UTC")
    if not isinstance(delimiter, str) or not delimiter or not isinstance(tz, str):
        raise ParseError("bad_row", "envelope delimiter and tz must be non-empty strings", line_no, src)
    try:
        zone(tz)
    except ValueError as exc:
        raise ParseError("bad_time", str(exc), line_no, src) from None
    rec = parse_sacct_row(header, row_line, src, line_no, delimiter, tz)
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
