"""Slurm node events (``sacctmgr show event``) → node event records.

slurmdbd keeps a row per node state change that took a node out of service: ``DOWN``
(``DOWN*`` when it also stopped responding), ``DRAIN``, ``FAIL`` ..., with the reason, the
user who set it (``slurm(64030)`` when slurmctld did), its start and, once the node is
back, its end.  The dump the labels want::

    sacctmgr -n -P show event Start=2025-06-01 End=now \\
        Format=NodeName,TimeStart,TimeEnd,State,Reason,User > events.txt

Both of sacctmgr's layouts read:

* parsable (``-P``: ``|`` between fields; ``-p`` adds a trailing one), with or without the
  header line (``-n``);
* the default table: a header line, a line of dashes (one run per column, which gives the
  column widths), then fixed-width rows (values cut to the width end in ``+``).

Columns are found by the header's names (``NodeName``, ``TimeStart``, ``TimeEnd``,
``State``, ``Reason``, ``User``, ``Cluster``; others are carried over).  Without a header,
``columns`` names them in ``Format=`` order (``Reason%40`` sets a table width); when not
given, six fields are read as the command above, seven as sacctmgr's own default
(``Cluster,NodeName,TimeStart,TimeEnd,State,Reason,User``).  Times follow sacct's
conventions (:func:`~hpcguard.connectors.sacct.parse_slurm_time`: local time in the
``[sacct] timezone``, an offset or epoch seconds win); ``TimeEnd`` ``Unknown`` means the node
is still out.  Cluster events (no node name) are counted, not yielded; rows that cannot be
used are yielded as :class:`~hpcguard.connectors.errors.Rejected` (file and line kept).

Example
-------
>>> text = ("n001|2023-03-24T18:43:12|2023-03-24T19:05:40|DOWN*|Not responding|slurm(64030)\\n"
...         "n[002-003]|2023-03-24T19:00:00|Unknown|DRAIN|kernel upgrade|root(0)\\n")
>>> [(e["node"], e["state"], e["end"]) for e in parse_events(text.splitlines())]
[('n001', 'DOWN*', 1679684740.0), ('n002', 'DRAIN', None), ('n003', 'DRAIN', None)]
>>> table = ["   Cluster NodeName                  TimeStart             TimeEnd  State                         Reason       User",
...          "---------- --------------- ------------------- ------------------- ------ ------------------------------ ----------",
...          "     linux n004            2023-03-24T18:43:12             Unknown  DOWN*                 Not responding slurm(640+"]
>>> [(e["node"], e["reason"], e["user"]) for e in parse_events(table)]
[('n004', 'Not responding', 'slurm(640+')]
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.hostlist import expand_hostlist
from hpcguard.connectors.sacct import SacctDialect, parse_slurm_time
from hpcguard.models.jobs import NODE_STATE

FORMAT = "sacctmgr-event"
#: ``Format=`` of the recommended dump (``-n -P``: six fields, no header)
DUMP_COLUMNS = ("NodeName", "TimeStart", "TimeEnd", "State", "Reason", "User")
#: sacctmgr's default ``show event`` columns (seven fields)
DEFAULT_COLUMNS = ("Cluster", "NodeName", "TimeStart", "TimeEnd", "State", "Reason", "User")
REQUIRED = ("NodeName", "TimeStart", "State")
#: table widths sacctmgr gives these columns (negative: left-justified)
WIDTHS = {"Cluster": 10, "NodeName": -15, "TimeStart": 19, "TimeEnd": 19, "State": 6, "Reason": 30, "User": 10,
          "Duration": 13, "Event": 7, "EventRaw": 8, "StateRaw": 8, "CPUCount": 7, "ClusterNodes": 20, "TRES": 20}
_NAMES = {"cluster": "Cluster", "clusters": "Cluster", "nodename": "NodeName", "nodenames": "NodeName",
          "node": "NodeName", "timestart": "TimeStart", "start": "TimeStart", "timeend": "TimeEnd", "end": "TimeEnd",
          "state": "State", "states": "State", "reason": "Reason", "user": "User"}
_DASHES = re.compile(r"-+")


def column_name(spec: str) -> tuple[str, int | None]:
    """Canonical column name and table width of a ``Format=`` item (``reason%40`` → ``('Reason', 40)``)."""
    name, _, width = spec.strip().partition("%")
    canon = _NAMES.get(name.strip().lower(), name.strip())
    if width:
        try:
            return canon, int(width)
        except ValueError:
            raise ParseError("bad_config", f"column {spec!r}: the width after % is not a number") from None
    return canon, None


def _check_columns(cols: Sequence[str], source: str, line_no: int | None) -> None:
    missing = [c for c in REQUIRED if c not in cols]
    if missing:
        raise ParseError("bad_header", f"sacctmgr event columns lack {', '.join(missing)} (got {', '.join(cols)}): "
                         "dump with Format=" + ",".join(DUMP_COLUMNS), line_no, source)
    if len(set(cols)) != len(cols):
        raise ParseError("bad_header", "duplicate column names in the sacctmgr event header", line_no, source)


def _is_header(line: str, delimiter: str) -> bool:
    names = {column_name(c)[0] for c in re.split(re.escape(delimiter) + r"|\s+", line) if c.strip()}
    return "NodeName" in names and ("TimeStart" in names or "State" in names)


def _spans(dashes: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _DASHES.finditer(dashes)]


def _table_spans(columns: Sequence[str]) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for spec in columns:
        name, width = column_name(spec)
        w = abs(width if width is not None else WIDTHS.get(name, 10))
        spans.append((pos, pos + w))
        pos += w + 1
    return spans


def event_record(row: dict[str, str], source: str = "", line_no: int | None = None, tz: str = "UTC",
                 truncated: bool = False) -> list[dict]:
    """Event records of one row ``{column: text}``: one per node of its ``NodeName`` hostlist
    (none for a cluster event); ParseError when unusable."""
    node_text = row.get("NodeName", "").strip()
    if not node_text:
        return []
    if truncated and node_text.endswith("+"):
        raise ParseError("bad_row", f"NodeName {node_text!r} was cut to the table's width: dump with -P "
                         "(or NodeName%40)", line_no, source)
    state = row.get("State", "").strip()
    if not state:
        raise ParseError("missing_field", "event without a State", line_no, source)
    try:
        nodes = expand_hostlist(node_text)
        start = parse_slurm_time(row.get("TimeStart", ""), "TimeStart", tz)
        end = parse_slurm_time(row.get("TimeEnd", ""), "TimeEnd", tz)
    except ParseError as exc:
        raise ParseError(exc.kind, exc.reason, line_no, source) from None
    if start is None:
        raise ParseError("bad_time", "event without a TimeStart", line_no, source)
    if end is not None and end < start:
        raise ParseError("bad_time", f"TimeEnd {row.get('TimeEnd')!r} is before TimeStart {row.get('TimeStart')!r}",
                         line_no, source)
    base = {"start": start, "end": end, "state": state, "reason": row.get("Reason", "").strip(),
            "user": row.get("User", "").strip(), "cluster": row.get("Cluster", "").strip()}
    return [{"node": n, **base} for n in nodes]


def parse_events(lines: Iterable[str], source: str = "", columns: Sequence[str] = (), tz: str | None = None,
                 delimiter: str = "|", stats: dict | None = None) -> Iterator[dict | Rejected]:
    """Event records (``node``, ``start``, ``end``, ``state``, ``reason``, ``user``, ``cluster``,
    ``source`` ``<file>:<line>``, ``line``) of ``sacctmgr show event`` output, or
    :class:`Rejected` rows.

    ``columns``: the ``Format=`` list of output without a header (default: by field count,
    see the module docstring).  ``tz``: zone of times without an offset (default: the
    ``[sacct] timezone`` setting).  ``stats`` (if given) counts ``events`` (records),
    ``cluster_events`` and ``rejected``.  A file whose layout cannot be told raises
    ParseError (``bad_header``).
    """
    tz = tz if tz is not None else SacctDialect.from_settings().timezone
    counts = stats if stats is not None else {}
    for key in ("events", "cluster_events", "rejected"):
        counts.setdefault(key, 0)
    lines = list(lines)
    it = iter(enumerate(lines, start=1))
    first = next(((i, ln.rstrip("\r\n")) for i, ln in it if ln.strip()), None)
    if first is None:
        return
    i0, head = first
    cols: list[str]
    spans: list[tuple[int, int]] | None = None
    pending: list[tuple[int, str]] = []
    if _is_header(head, delimiter) and delimiter in head:           # -P / -p with header
        cols = [column_name(c)[0] for c in head.split(delimiter)]
        if len(cols) > 1 and cols[-1] == "":
            cols.pop()
    elif _is_header(head, delimiter):                               # the table: header, dashes, rows
        second = next(((i, ln.rstrip("\r\n")) for i, ln in it if ln.strip()), None)
        if second is None or not set(second[1].strip()) <= {"-", " "}:
            raise ParseError("bad_header", "a sacctmgr table header must be followed by its line of dashes",
                             i0 + 1, source)
        spans = _spans(second[1])
        cols = [column_name(head[a:b])[0] for a, b in spans]
    else:                                                           # -n: no header
        if columns:
            cols = [column_name(c)[0] for c in columns]
        else:
            n_fields = len(head.split(delimiter)) if delimiter in head else 0
            # -p ends every line with the delimiter; -P only a line whose last field is empty
            body = [ln.rstrip("\r\n") for ln in lines[i0 - 1:i0 + 99] if ln.strip()]
            if n_fields and all(ln.endswith(delimiter) for ln in body):
                n_fields -= 1
            if n_fields not in (len(DUMP_COLUMNS), len(DEFAULT_COLUMNS)):
                raise ParseError("bad_header", "sacctmgr event output without a header: "
                                 f"{n_fields or 'no'} {delimiter!r}-separated fields; give the Format= columns "
                                 "(or dump with -P and Format=" + ",".join(DUMP_COLUMNS) + ")", i0, source)
            cols = list(DUMP_COLUMNS if n_fields == len(DUMP_COLUMNS) else DEFAULT_COLUMNS)
        if delimiter not in head:
            spans = _table_spans(columns or cols)
        pending = [(i0, head)]
    _check_columns(cols, source, i0)

    def rows() -> Iterator[tuple[int, str]]:
        yield from pending
        for i, ln in it:
            yield i, ln.rstrip("\r\n")

    for i, line in rows():
        if not line.strip():
            continue
        try:
            if spans is None:
                fields = line.split(delimiter)
                if len(fields) == len(cols) + 1 and fields[-1] == "":
                    fields.pop()                                    # -p's trailing delimiter
                if len(fields) != len(cols):
                    raise ParseError("bad_row", f"{len(fields)} {delimiter!r}-separated fields for {len(cols)} "
                                     "columns: a reason holding the delimiter, a record broken across lines, "
                                     "or other Format= columns", i, source)
            else:
                fields = [line[a:b] for a, b in spans]
            recs = event_record(dict(zip(cols, (f.strip() for f in fields))), source, i, tz, spans is not None)
        except ParseError as exc:
            counts["rejected"] += 1
            yield exc.rejected(line, source=source, line=i)
            continue
        if not recs:
            counts["cluster_events"] += 1
            continue
        counts["events"] += len(recs)
        for rec in recs:
            yield {**rec, "source": f"{source}:{i}" if source else str(i), "line": line}


def read_events(path: str | Path, source: str | None = None, columns: Sequence[str] = (), tz: str | None = None,
                stats: dict | None = None) -> Iterator[dict | Rejected]:
    """:func:`parse_events` of a file (``source`` defaults to its path)."""
    p = Path(path)
    with open(p, newline="", errors="replace") as fh:
        yield from parse_events(fh, source or str(p), columns, tz, stats=stats)


def is_event_header(line: str, delimiter: str = "|") -> bool:
    """Whether ``line`` is the header of ``sacctmgr show event`` output (parsable or table).

    >>> is_event_header("NodeName|TimeStart|TimeEnd|State|Reason|User"), is_event_header("JobID|State")
    (True, False)
    """
    return _is_header(line, delimiter)


def event_text(events: Iterable[dict], columns: Sequence[str] = DUMP_COLUMNS, header: bool = False,
               time_format: str = "%Y-%m-%dT%H:%M:%S") -> str:
    """``sacctmgr -P`` text of event dicts (``node``, ``start``, ``end``, ``state``, ``reason``,
    ``user``, ``cluster``; times epoch s, printed in UTC; ``end`` ``None`` → ``Unknown``)."""
    import time as _time

    def fmt(t) -> str:
        return "Unknown" if t is None else _time.strftime(time_format, _time.gmtime(int(t)))

    key = {"NodeName": "node", "State": "state", "Reason": "reason", "User": "user", "Cluster": "cluster"}
    out = ["|".join(columns)] if header else []
    for e in events:
        vals = []
        for c in columns:
            if c == "TimeStart":
                vals.append(fmt(e["start"]))
            elif c == "TimeEnd":
                vals.append(fmt(e.get("end")))
            else:
                vals.append(str(e.get(key.get(c, c), "")).replace("|", "/"))
        out.append("|".join(vals))
    return "\n".join(out) + ("\n" if out else "")


_TIME_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def is_event_dump(head: Sequence[str], delimiter: str = "|") -> bool:
    """Whether a file's first lines are ``sacctmgr show event`` output: a header, or header-less
    ``-P``/``-p`` rows of six or seven fields whose ``TimeStart`` reads as a Slurm time.

    >>> is_event_dump(["n001|2023-03-24T18:43:12|Unknown|DOWN*|Not responding|slurm(64030)"])
    True
    >>> is_event_dump(["CPU Temp | 45 degrees C | ok"]), is_event_dump(["JobID|State|Start"])
    (False, False)
    """
    lines = [ln.rstrip("\r\n") for ln in head if ln.strip()]
    if not lines:
        return False
    if _is_header(lines[0], delimiter):
        return True
    fields = lines[0].split(delimiter)
    if len(fields) in (len(DUMP_COLUMNS) + 1, len(DEFAULT_COLUMNS) + 1) and fields[-1] == "":
        fields.pop()
    if len(fields) not in (len(DUMP_COLUMNS), len(DEFAULT_COLUMNS)):
        return False
    start = fields[DUMP_COLUMNS.index("TimeStart") + (len(fields) == len(DEFAULT_COLUMNS))]
    return bool(_TIME_TEXT.match(start.strip()))


def event_envelope(rec: dict) -> dict:
    """The ``raw.slurm`` envelope of one event record of :func:`parse_events` (one node): the fields
    the worker's labels need, at the event's start.

    >>> event_envelope({"node": "n001", "start": 60.0, "end": None, "state": "DOWN*", "reason": "Not responding",
    ...                 "user": "slurm(64030)", "cluster": "", "source": "slurm/events.txt:1"})["time"]
    60.0
    """
    env = {"format": FORMAT, "node": rec["node"], "state": rec["state"], "reason": rec.get("reason", ""),
           "user": rec.get("user", ""), "time": float(rec["start"]), "source": rec.get("source", "")}
    if rec.get("end") is not None:
        env["end"] = float(rec["end"])
    return env


def decode_event_envelope(env: dict) -> dict:
    """The ``node-state`` job event (``JobEvent`` fields, no job) of a checked :func:`event_envelope`.

    >>> decode_event_envelope({"format": FORMAT, "node": "n001", "state": "DOWN*", "reason": "Not responding",
    ...                        "time": 60.0})["event"]
    'node-state'
    """
    if env.get("format") != FORMAT:
        raise ParseError("unknown_format", f"format {env.get('format')!r} is not {FORMAT!r}", None,
                         str(env.get("source", "raw.slurm")))
    return {"job_id": "", "event": NODE_STATE, "time": float(env["time"]), "nodes": [str(env["node"])],
            "num_nodes": 1, "state": str(env["state"]), "reason": str(env.get("reason") or ""),
            "end_time": None if env.get("end") is None else float(env["end"])}
