"""BMC sensor readings: FreeIPMI (CSV or table), ``ipmitool sdr`` / ``sdr elist`` and Telegraf ``ipmi_sensor``.

Recorded files hold one block per poll.  A block starts at a *poll line*: the
collector wrapper's ``# hpcguard-poll host=n001 time=1679682808.000``, or a
timestamp line written by the site's own script (default pattern: FASRC's
``Timestamp: 2025-06-03 00:00:01 UTC``; the node is then the file name without its
``-YYYY-MM-DD`` date and extension).  Telegraf lines carry node and time themselves
(the node is the BMC, tag ``server=``, when present, else ``host=``, else ``hostname=``);
other measurements of a Telegraf file output (``cpu``, ``mem``...) are passed over.
:func:`read_ipmi_lines` cuts text into raw envelopes (``docs/formats.md``, "Raw
transport"); :func:`decode_ipmi_envelope` maps the raw sensor names onto the
canonical sensors (``connectors/sensors.toml``), keeping a reading only when its
unit is one the canonical sensor accepts.  ``N/A``, ``no reading``, ``disabled``
and ``ns`` status are missing values; discrete ``0x..`` states are never values.

Every FreeIPMI variant is one row of :data:`FREEIPMI_LAYOUTS` (found by header, or
by field count and separator); every ``ipmitool`` variant one row of
:data:`SDR_LAYOUTS` (found by field count).

Example
-------
>>> env = {"format": "freeipmi-csv", "host": "n001", "time": 1679682808.0, "source": "ipmi/n001.csv:1",
...        "text": "ID,Name,Type,Reading,Units,Event\\n3,CPU1 Temp,Temperature,45.00,C,'OK'\\n"
...                "9,FAN1A,Fan,N/A,RPM,N/A\\n1,Inlet Temp,Temperature,21.00,C,'OK'\\n"}
>>> decode_ipmi_envelope(env)
[{'node': 'n001', 'time': 1679682808.0, 'source': 'ipmi', 'values': {'cpu_temp': 45.0}, 'job_id': None}]
>>> parse_sdr_row("Fan1A RPM        | 2160 RPM          | ok")
('Fan1A RPM', 2160.0, 'RPM', 'ok')
>>> parse_sdr_row("Fan 1            | 0x00              | ok")
('Fan 1', None, None, 'ok')
"""
from __future__ import annotations

import calendar
import functools
import math
import re
import time as _time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping

import numpy as np

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.mapping import SensorMapping
from hpcguard.models.features import CANONICAL_SENSORS

if TYPE_CHECKING:
    from hpcguard.connectors.coverage import SensorCoverage

FORMATS = ("freeipmi-csv", "ipmitool-sdr", "telegraf-lp")
POLL = re.compile(r"#\s*hpcguard-poll\s+host=(\S+)\s+time=(\S+)\s*$")
_MISSING = {"n/a", "na", "no reading", "disabled", "not readable", "unavailable", ""}
_LP_SPLIT = re.compile(r"(?<!\\) ")
_LP_COMMA = re.compile(r"(?<!\\),")
# any Influx line-protocol line: measurement[,tag=value...] field=value[,...] timestamp.  Telegraf's
# file output writes every input's measurements (cpu, mem...) into one file beside ipmi_sensor
_LP_LINE = re.compile(r"(?:[^\s,=\\]|\\.)+(?:,(?:[^\s,=\\]|\\.)+=(?:[^\s,\\]|\\.)*)* \S.*=.* -?\d+")
_IPMI_MEASUREMENT = ("ipmi_sensor,", "ipmi_sensor ")
# "2160 RPM", "23 degrees C", "110 Watts, Presence detected", "-3.5 Volts"; not "0x00" (a discrete state)
_VALUE_UNIT = re.compile(r"\s*([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?:\s+([^,]*?))?\s*(?:,.*)?$")
_SENSOR = {name: i for i, name in enumerate(CANONICAL_SENSORS)}

# FreeIPMI ipmi-sensors column layouts: (variant, columns).  The separator is ',' with
# --comma-separated-output, '|' for the default table.  A header line names the columns;
# without one (--no-header-output) the layout is the one with that many fields.
FREEIPMI_LAYOUTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("default", ("id", "name", "type", "reading", "units", "event")),
    ("sensor-state", ("id", "name", "type", "state", "reading", "units", "event")),
    ("no-sensor-type", ("id", "name", "reading", "units", "event")),
    ("no-sensor-type+state", ("id", "name", "state", "reading", "units", "event")),
)
_SENSOR_STATES = {"nominal", "warning", "critical", "n/a"}
_FREEIPMI_HEADER = re.compile(r"\s*ID\s*[,|]\s*Name\s*[,|]")
# ipmitool layouts by field count: (variant, name column, reading column, status column)
SDR_LAYOUTS: dict[int, tuple[str, int, int, int]] = {
    3: ("sdr", 0, 1, 2),  # ipmitool sdr [list]: name | 2160 RPM | ok   (Telegraf's default input)
    5: ("sdr elist", 0, 4, 2),  # ipmitool sdr elist: name | 30h | ok | 7.1 | 2160 RPM
}

Reading = tuple[str, "float | None", "str | None", int]  # (raw name, value or None, unit or None, line offset)


@functools.lru_cache(maxsize=1)
def _default_mapping() -> SensorMapping:
    """The packaged mapping, loaded once (it is never modified)."""
    return SensorMapping.load()


def _source_line(source: str) -> tuple[str, int | None]:
    path, _, line = str(source).rpartition(":")
    return (path, int(line)) if path and line.isdigit() else (str(source), None)


# --- timestamps of raw tool output ---------------------------------------------------------------
@dataclass(frozen=True)
class TimeLine:
    """A line that starts a poll block and gives its time (UTC), e.g. FASRC's ``Timestamp: ... UTC``.

    ``pattern`` must match the whole line with one group holding the time, parsed with
    ``time_format`` (``strptime``; ``"epoch"`` for seconds since 1970).

    >>> TimeLine().parse("Timestamp: 2025-06-03 00:00:01 UTC")
    1748908801.0
    """

    pattern: str = r"Timestamp:\s*(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})\s*(?:UTC|Z)?\s*"
    time_format: str = "%Y-%m-%d %H:%M:%S"

    @functools.cached_property
    def regex(self) -> re.Pattern:
        return re.compile(self.pattern)

    def parse(self, line: str) -> float | None:
        """Epoch seconds of a time line, ``None`` when ``line`` is not one; ParseError for a bad time."""
        m = self.regex.fullmatch(line.strip())
        if m is None:
            return None
        text = m.group(1)
        try:
            if self.time_format == "epoch":
                t = float(text)
            else:
                if "T" not in self.time_format:  # ISO 8601 "2025-06-03T00:00:01" under a space format
                    text = text.replace("T", " ")
                t = float(calendar.timegm(_time.strptime(text, self.time_format)))
        except ValueError:
            raise ParseError("bad_time", f"time {text!r} does not match {self.time_format!r}") from None
        return t


@dataclass(frozen=True)
class IpmiInput:
    """How recorded tool output is cut into polls (settings section ``[ipmi]``).

    ``time_line``: lines that start a poll; ``untimed``: rows before any poll line are
    rejected (``"reject"``) or form one poll at the file's modification time
    (``"mtime"``, for a bare ``ipmitool sdr > node.txt`` snapshot); ``default_host``:
    node of Telegraf lines with neither ``server=`` nor ``host=`` (``None``: reject).
    """

    time_line: TimeLine = TimeLine()
    untimed: str = "reject"
    default_host: str | None = None

    def __post_init__(self) -> None:
        if self.untimed not in ("reject", "mtime"):
            raise ValueError(f"untimed must be 'reject' or 'mtime', got {self.untimed!r}")
        try:
            groups = re.compile(self.time_line.pattern).groups
        except re.error as exc:
            raise ValueError(f"time_pattern {self.time_line.pattern!r} is not a valid regular expression: {exc}") \
                from None
        if groups < 1:
            raise ValueError(f"time_pattern {self.time_line.pattern!r} needs a group around the time")

    @classmethod
    def from_settings(cls, s) -> "IpmiInput":
        """From :class:`hpcguard.settings.IpmiSettings`."""
        return cls(TimeLine(s.time_pattern, s.time_format), s.untimed, s.default_host or None)


def host_from_filename(name: str) -> str:
    """Node of a per-node log file: the name without directories, ``-YYYY-MM-DD`` date and extensions.

    >>> host_from_filename("home/jwells/ipmi/data/holy7c02103-2025-06-03.txt")
    'holy7c02103'
    """
    base = name.rsplit("/", 1)[-1].split(".", 1)[0]
    return re.sub(r"[-_]\d{4}-?\d{2}-?\d{2}$", "", base) or base


# --- row parsers -----------------------------------------------------------------------------------
def parse_reading_text(text: str) -> tuple[float | None, str | None]:
    """``(value, unit)`` of an ipmitool reading column; ``(None, None)`` for missing or discrete readings.

    >>> parse_reading_text("23 degrees C"), parse_reading_text("110 Watts, Presence detected")
    ((23.0, 'degrees C'), (110.0, 'Watts'))
    """
    m = _VALUE_UNIT.match(text)
    if m is None or text.strip().lower() in _MISSING:
        return None, None
    value = float(m.group(1))
    return (value if math.isfinite(value) else None), (m.group(2) or None)


def parse_sdr_row(line: str) -> tuple[str, float | None, str | None, str] | None:
    """``(name, value, unit, status)`` of one ``ipmitool sdr`` / ``sdr elist`` row; ``None`` if not a row.

    A ``ns`` status, a missing reading or a discrete state gives ``value=None``.
    """
    fields = line.split("|")
    layout = SDR_LAYOUTS.get(len(fields))
    if layout is None:
        return None
    _, name_col, reading_col, status_col = layout
    status = fields[status_col].strip().lower()
    value, unit = (None, None) if status == "ns" else parse_reading_text(fields[reading_col])
    return fields[name_col].strip(), value, unit, status


def parse_ipmitool(text: str, source: str = "", first_line: int | None = None) -> list[Reading]:
    """``(name, reading, unit, offset)`` per row of ``ipmitool sdr`` (3 columns) or ``sdr elist`` (5)."""
    out: list[Reading] = []
    for i, line in enumerate(text.splitlines()):
        if not line.strip() or line.startswith("#"):
            continue
        row = parse_sdr_row(line)
        if row is None:
            raise ParseError("bad_row", f"ipmitool row needs 3 (sdr) or 5 (sdr elist) '|'-separated fields, got "
                             f"{line.count('|') + 1}", line=None if first_line is None else first_line + i,
                             source=source)
        out.append((row[0], row[1], row[2], i))
    return out


def _freeipmi_layout(fields: list[str]) -> tuple[str, ...] | None:
    """Columns of a header-less FreeIPMI row: the :data:`FREEIPMI_LAYOUTS` entry that fits its fields.

    A layout fits when the row has at least its columns (an Event may hold the separator)
    and its State column, if any, holds a sensor state; an exact field count wins, then a
    layout with a State column, then the one with more columns.
    """
    fits = []
    for _, cols in FREEIPMI_LAYOUTS:
        if len(fields) < len(cols):
            continue
        has_state = "state" in cols
        if has_state and fields[cols.index("state")].strip().lower() not in _SENSOR_STATES:
            continue
        fits.append(((len(fields) == len(cols), has_state, len(cols)), cols))
    return max(fits)[1] if fits else None


def freeipmi_row_parser(columns: Iterable[str], sep: str = ","):
    """A function ``line → (name, value, unit, state)`` for FreeIPMI rows with these ``columns``.

    ``columns`` are lower-case header names (``id, name, type, [state,] reading, units, event``);
    the last column takes the rest of the line (an Event may hold the separator).

    >>> freeipmi_row_parser(FREEIPMI_LAYOUTS[1][1])("4,CPU Temp,Temperature,Nominal,38.00,C,'OK'")
    ('CPU Temp', 38.0, 'C', 'Nominal')
    """
    cols = list(columns)
    where = {c: k for k, c in enumerate(cols)}
    if "name" not in where or "reading" not in where:
        raise ParseError("bad_header", f"FreeIPMI header needs Name and Reading columns, got {cols}")
    name_at, reading_at = where["name"], where["reading"]
    units_at, state_at = where.get("units"), where.get("state")
    need = max(name_at, reading_at) + 1

    def parse(line: str) -> tuple[str, float | None, str | None, str | None]:
        fields = line.split(sep, len(cols) - 1)
        if len(fields) < need:
            raise ParseError("bad_row", f"FreeIPMI row has {len(fields)} fields; its layout needs "
                             f"{','.join(cols)}")
        name, raw = fields[name_at].strip(), fields[reading_at].strip()
        unit = fields[units_at].strip() if units_at is not None and units_at < len(fields) else None
        if unit is not None and unit.lower() in _MISSING:
            unit = None
        state = fields[state_at].strip() if state_at is not None and state_at < len(fields) else None
        if raw.lower() in _MISSING:
            return name, None, unit, state
        try:
            value = float(raw)
        except ValueError:
            raise ParseError("bad_number", f"Reading {raw!r} of {name!r} is not a number") from None
        return name, (value if math.isfinite(value) else None), unit, state

    return parse


def is_freeipmi_header(line: str) -> bool:
    """Whether ``line`` is an ``ipmi-sensors`` header (``ID,Name,...`` or ``ID | Name | ...``)."""
    return _FREEIPMI_HEADER.match(line) is not None


def freeipmi_layout_of(lines: Iterable[str]) -> tuple[tuple[str, ...], str] | None:
    """``(columns, separator)`` of FreeIPMI output from its header line or its first row."""
    for line in lines:
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        sep = "|" if "|" in s else ","
        fields = [f.strip() for f in s.split(sep)]
        if fields[0] == "ID":
            return tuple(f.lower() for f in fields), sep
        layout = _freeipmi_layout(fields)
        return (layout, sep) if layout is not None else None
    return None


def parse_freeipmi(text: str, source: str = "", first_line: int | None = None) -> list[Reading]:
    """``(name, reading, unit, offset)`` per row of ``ipmi-sensors`` output (CSV or table, any layout).

    Columns come from the header line when there is one (``ID,Name,Type,Reading,...``,
    ``--output-sensor-state``, ``--no-sensor-type-output``), else from the field count
    of the first row (:data:`FREEIPMI_LAYOUTS`).
    """
    out: list[Reading] = []
    lines = text.splitlines()
    layout = freeipmi_layout_of(lines)
    if layout is None:
        raise ParseError("bad_row", "FreeIPMI rows need 5 to 7 fields (ID,Name,[Type,][State,]Reading,Units,Event)",
                         line=first_line, source=source)
    parse = freeipmi_row_parser(*layout)
    for i, line in enumerate(lines):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if is_freeipmi_header(s):  # a (repeated) header line
            parse = freeipmi_row_parser(*freeipmi_layout_of([s]))
            continue
        try:
            name, value, unit, _ = parse(line)
        except ParseError as exc:
            raise ParseError(exc.kind, exc.reason, line=None if first_line is None else first_line + i,
                             source=source) from None
        out.append((name, value, unit, i))
    return out


def parse_telegraf_line(line: str, source: str = "", line_no: int | None = None,
                        default_host: str | None = None) -> tuple[str, str, float | None, str | None, float]:
    """``(node, name, value, unit, time)`` of one Telegraf ``ipmi_sensor`` line-protocol line.

    The node is the BMC (``server=``, set when Telegraf polls a remote BMC) when present,
    else ``host=`` (the collector's own name; ``hostname=`` where a site renames that tag),
    else ``default_host``; a line with none
    of them is a ``missing_field`` error.  The time is Telegraf's own.
    """
    parts = _LP_SPLIT.split(line.strip())
    if len(parts) != 3:
        raise ParseError("bad_row", "line protocol needs 'measurement,tags fields timestamp'", line_no, source)
    head = _LP_COMMA.split(parts[0])
    if head[0] != "ipmi_sensor":
        raise ParseError("unknown_format", f"measurement {head[0]!r} is not ipmi_sensor", line_no, source)
    tags = {}
    for tag in head[1:]:
        k, sep, v = tag.partition("=")
        if not sep:
            raise ParseError("bad_row", f"tag {tag!r} has no '='", line_no, source)
        tags[k] = v.replace("\\ ", " ").replace("\\,", ",").replace("\\=", "=")
    fields = dict(f.partition("=")[::2] for f in _LP_COMMA.split(parts[1]))
    host = tags.get("server") or tags.get("host") or tags.get("hostname") or default_host
    if not host:
        raise ParseError("missing_field", "ipmi_sensor line has neither a server (BMC) nor a host tag; set the "
                         "Telegraf agent's hostname or configure a default node", line_no, source)
    if "name" not in tags:
        raise ParseError("missing_field", "ipmi_sensor line has no name tag", line_no, source)
    try:
        ts = int(parts[2]) / 1e9
    except ValueError:
        raise ParseError("bad_time", f"timestamp {parts[2]!r} is not integer nanoseconds", line_no, source) from None
    raw = fields.get("value")
    if raw is None:
        raise ParseError("missing_field", "ipmi_sensor line has no value field", line_no, source)
    try:
        value: float | None = float(raw[:-1] if raw.endswith(("i", "u")) else raw)
    except ValueError:
        raise ParseError("bad_number", f"value {raw!r} is not a number", line_no, source) from None
    if tags.get("status_code", "ok").lower() == "ns" or not math.isfinite(value):
        value = None
    return host, tags["name"], value, tags.get("unit"), ts


# --- cutting files into polls --------------------------------------------------------------------
def detect_ipmi_format(lines: Iterable[str], time_line: TimeLine | None = None) -> str | None:
    """``freeipmi-csv``, ``ipmitool-sdr``, ``telegraf-lp`` or ``None`` from the first lines."""
    time_line = time_line or TimeLine()
    stamped = line_protocol = False
    for line in lines:
        s = line.strip()
        if not s or POLL.match(s):
            continue
        if time_line.regex.fullmatch(s):
            stamped = True
            continue
        if s.startswith(_IPMI_MEASUREMENT):
            return "telegraf-lp"
        if is_freeipmi_header(s):
            return "freeipmi-csv"
        sep = "|" if "|" in s else ","
        fields = [f.strip() for f in s.split(sep)]
        if fields[0].isdigit() and _freeipmi_layout(fields) is not None:  # a FreeIPMI row without its header
            return "freeipmi-csv"
        if sep == "|" and len(fields) in SDR_LAYOUTS:
            return "ipmitool-sdr"
        if s.startswith("#"):
            continue
        if not stamped and _LP_LINE.fullmatch(s):  # a Telegraf file output: ipmi_sensor may come further on
            line_protocol = True
            continue
        return None
    if stamped:
        return "ipmitool-sdr"  # timestamp lines of polls that printed nothing
    return "telegraf-lp" if line_protocol else None


def read_ipmi_file(path: str | Path, fmt: str | None = None, source: str | None = None,
                   options: IpmiInput | None = None) -> Iterator[dict | Rejected]:
    """Raw IPMI envelopes (one per poll) of a recorded file, or :class:`Rejected`."""
    p = Path(path)
    options = options or IpmiInput()
    with open(p, errors="replace") as fh:
        text = fh.read()
    untimed_at = p.stat().st_mtime if options.untimed == "mtime" else None
    yield from read_ipmi_lines(text.splitlines(), source or str(p), fmt, options, host_from_filename(p.name),
                               untimed_at)


def read_ipmi_lines(lines: list[str], src: str, fmt: str | None = None, options: IpmiInput | None = None,
                    host: str | None = None, untimed_at: float | None = None) -> Iterator[dict | Rejected]:
    """Raw IPMI envelopes of a file's lines: ``{"format", "host", "time", "text", "source": "<file>:<line>"}``.

    A block starts at a ``# hpcguard-poll`` line (node and time) or a time line
    (``options.time_line``; the node is ``host``, normally from the file name).  Rows
    before any block are rejected, unless ``untimed_at`` gives them a time (``host``
    then names the node).
    """
    options = options or IpmiInput()
    time_line = options.time_line
    fmt = fmt or detect_ipmi_format(lines[:50], time_line)
    if fmt not in FORMATS:
        yield Rejected(src, 1, "unknown_format", "not FreeIPMI, ipmitool sdr / sdr elist or Telegraf ipmi_sensor",
                       "\n".join(lines[:3]))
        return
    if fmt == "telegraf-lp":
        yield from _telegraf_envelopes(lines, src, options.default_host)
        return
    node, t, start, block = None, None, 0, []
    if untimed_at is not None and host:
        node, t, start = host, float(untimed_at), 1

    def flush():
        if block and node is not None:
            return {"format": fmt, "host": node, "time": t, "text": "\n".join(block) + "\n", "source": f"{src}:{start}"}
        return None

    for i, line in enumerate(lines, start=1):
        m = POLL.match(line) if line.startswith("#") else None
        try:
            stamp = None if m is not None or line.startswith("#") else time_line.parse(line)
        except ParseError as exc:
            env = flush()
            if env:
                yield env
            yield Rejected(src, i, "bad_time", exc.reason, line)
            node, block = None, []
            continue
        if m is None and stamp is None:
            if line.startswith("#") or not line.strip():
                continue
            if node is None:
                yield Rejected(src, i, "missing_field", "sensor row outside a poll block: no '# hpcguard-poll "
                               "host=... time=...' or timestamp line before it (set [ipmi] time_pattern, or "
                               "untimed = \"mtime\")", line)
            else:
                block.append(line)
            continue
        env = flush()
        if env:
            yield env
        start, block = i, []
        if stamp is not None:
            node, t = (host or None), stamp
            if node is None:
                yield Rejected(src, i, "missing_field", "timestamp line but no node: name the file after the node",
                               line)
            continue
        try:
            t = float(m.group(2))
            if not math.isfinite(t):
                raise ValueError
            node = m.group(1)
        except ValueError:
            yield Rejected(src, i, "bad_time", f"poll time {m.group(2)!r} is not a number", line)
            node = None
    env = flush()
    if env:
        yield env


def _telegraf_envelopes(lines: list[str], src: str, default_host: str | None) -> Iterator[dict | Rejected]:
    """One envelope per (node, time) run of ``ipmi_sensor`` lines; other measurements are passed over,
    a file with none at all is one ``unknown_format`` record (it is not IPMI)."""
    key, block, start = None, [], 0
    ipmi, other, first_other = 0, {}, 0
    for i, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        s = line.strip()
        if not s.startswith(_IPMI_MEASUREMENT) and _LP_LINE.fullmatch(s):
            name = _LP_COMMA.split(_LP_SPLIT.split(s, 1)[0], 1)[0]
            other[name] = other.get(name, 0) + 1
            first_other = first_other or i
            continue
        ipmi += 1
        try:
            host, _, _, _, ts = parse_telegraf_line(line, src, i, default_host)
        except ParseError as exc:
            yield exc.rejected(line)
            continue
        if (host, ts) != key:
            if block:
                yield _telegraf_env(key, block, src, start, default_host)
            key, block, start = (host, ts), [], i
        block.append(line)
    if block:
        yield _telegraf_env(key, block, src, start, default_host)
    if not ipmi and other:
        names = ", ".join(sorted(other)[:6]) + (" ..." if len(other) > 6 else "")
        yield Rejected(src, first_other, "unknown_format", f"Influx line protocol without an ipmi_sensor "
                       f"measurement ({sum(other.values())} lines of {names}): nothing to read as IPMI",
                       lines[first_other - 1])


def _telegraf_env(key: tuple[str, float], block: list[str], src: str, start: int, default_host: str | None) -> dict:
    env = {"format": "telegraf-lp", "host": key[0], "time": key[1], "text": "\n".join(block) + "\n",
           "source": f"{src}:{start}"}
    if default_host:
        env["default_host"] = default_host
    return env


# --- raw readings → canonical values ------------------------------------------------------------
def classify_reading(name: str, value: float | None, unit: str | None, mapping: SensorMapping
                     ) -> tuple[str | None, int, str]:
    """``(canonical, priority, verdict)`` of one reading; verdict ``used``, ``unmapped``, ``missing`` or
    ``unit_mismatch`` (a mapped name whose unit the canonical sensor does not accept)."""
    hit = mapping.ipmi_lookup(name)
    if hit is None:
        return None, -1, "unmapped"
    if value is None:
        return hit[0], hit[1], "missing"
    if not mapping.unit_ok(hit[0], unit):
        return hit[0], hit[1], "unit_mismatch"
    return hit[0], hit[1], "used"


def reduce_readings(readings: Iterable[tuple[str, float | None, str | None]], mapping: SensorMapping,
                    stats: dict[str, int] | None = None, node: str | None = None,
                    coverage: "SensorCoverage | None" = None) -> dict[str, float]:
    """Canonical values of one poll's ``(raw name, reading, unit)`` triples (see ``sensors.toml`` reduce).

    ``stats`` counts ``unmapped`` names, ``missing`` readings and ``unit_mismatch``
    readings; ``coverage`` (with ``node``) records which raw names fed what.
    """
    found: dict[str, list[tuple[int, float]]] = {}
    for name, value, unit in readings:
        canonical, priority, verdict = classify_reading(name, value, unit, mapping)
        if verdict == "used":
            found.setdefault(canonical, []).append((priority, value))
        elif stats is not None:
            stats[verdict] = stats.get(verdict, 0) + 1
        if coverage is not None and node is not None:
            if verdict == "unit_mismatch":
                coverage.add_unit_mismatch(node, name, canonical, unit)
            elif verdict != "missing":
                coverage.add_raw(node, name, canonical, unit=unit if value is not None else None)
    out: dict[str, float] = {}
    for canonical, cands in found.items():
        how = mapping.ipmi_reduce(canonical)
        vals = [v for _, v in cands]
        out[canonical] = (min(cands)[1] if how == "first" else max(vals) if how == "max"
                          else min(vals) if how == "min" else sum(vals) / len(vals))
    return out


def reduce_polls(poll: np.ndarray, sensor: np.ndarray, priority: np.ndarray, value: np.ndarray,
                 mapping: SensorMapping) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised :func:`reduce_readings` over many polls: one value per (poll, sensor index).

    Inputs are parallel arrays of used readings (sensor = index in ``CANONICAL_SENSORS``);
    returns ``(poll, sensor, value)``.
    """
    keep = ~np.isnan(value)
    poll, sensor, priority, value = poll[keep], sensor[keep], priority[keep], value[keep]
    out_p, out_s, out_v = [], [], []
    for canonical, spec in mapping.ipmi.items():
        s = _SENSOR[canonical]
        sel = sensor == s
        if not sel.any():
            continue
        p, pr, v = poll[sel], priority[sel], value[sel]
        if spec.reduce == "mean":
            u, inv = np.unique(p, return_inverse=True)
            out_p.append(u)
            out_v.append(np.bincount(inv, weights=v) / np.bincount(inv))
        else:
            key = pr if spec.reduce == "first" else (v if spec.reduce == "min" else -v)
            order = np.lexsort((key, p))
            p, v = p[order], v[order]
            first = np.ones(p.size, bool)
            first[1:] = p[1:] != p[:-1]
            out_p.append(p[first])
            out_v.append(v[first])
        out_s.append(np.full(out_p[-1].size, s))
    if not out_p:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(out_p), np.concatenate(out_s), np.concatenate(out_v)


def decode_ipmi_envelope(env: Mapping, mapping: SensorMapping | None = None, stats: dict[str, int] | None = None,
                         coverage: "SensorCoverage | None" = None) -> list[dict]:
    """Canonical samples (``source="ipmi"``) of one raw IPMI envelope.

    Raises :class:`ParseError` for a malformed envelope or row; ``stats`` (if given)
    counts ``unmapped`` sensors, ``missing`` readings and ``unit_mismatch`` readings;
    ``coverage`` (if given) records raw names and one node-step per poll.  A poll with
    no mapped reading gives no sample.
    """
    mapping = mapping or _default_mapping()
    if not isinstance(env, Mapping):
        raise ParseError("bad_json", "an IPMI envelope must be a JSON object")
    src, base = _source_line(env.get("source", "raw.ipmi"))
    fmt, text = env.get("format"), env.get("text")
    if fmt not in FORMATS:
        raise ParseError("unknown_format", f"format {fmt!r} is not one of {FORMATS}", base, src)
    if not isinstance(text, str):
        raise ParseError("missing_field", "envelope has no text", base, src)
    if fmt == "telegraf-lp":
        polls: dict[tuple[str, float], list[tuple[str, float | None, str | None]]] = {}
        default_host = env.get("default_host")
        for i, line in enumerate(text.splitlines()):
            if line.strip():
                host, name, value, unit, ts = parse_telegraf_line(line, src, None if base is None else base + i,
                                                                  default_host)
                polls.setdefault((host, ts), []).append((name, value, unit))
    else:
        host, t = env.get("host"), env.get("time")
        if not isinstance(host, str) or not host:
            raise ParseError("missing_field", "envelope has no host", base, src)
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise ParseError("bad_time", f"envelope time {t!r} is not a finite number", base, src)
        first = None if base is None else base + 1
        parsed = parse_freeipmi(text, src, first) if fmt == "freeipmi-csv" else parse_ipmitool(text, src, first)
        polls = {(host, float(t)): [(name, value, unit) for name, value, unit, _ in parsed]}
    samples = []
    for (host, ts), readings in sorted(polls.items(), key=lambda kv: kv[0][1]):
        values = reduce_readings(readings, mapping, stats, host, coverage)
        if coverage is not None:
            coverage.add_counts(host, dict.fromkeys(values, 1), 1)
        if values:
            samples.append({"node": host, "time": ts, "source": "ipmi", "values": values, "job_id": None})
    return samples
