"""BMC sensor readings: FreeIPMI CSV, ``ipmitool sdr elist`` and Telegraf ``ipmi_sensor``.

Recorded files hold one block per poll, each preceded by the collector wrapper's
poll line ``# hpcguard-poll host=n001 time=1679682808.000``; Telegraf lines carry
host and time themselves.  :func:`read_ipmi_file` cuts a file into raw envelopes
(``docs/formats.md``, "Raw transport"); :func:`decode_ipmi_envelope` maps the raw
sensor names onto the canonical sensors (``connectors/sensors.toml``).  ``N/A``,
``no reading`` and ``disabled`` are missing values: the sensor is left out, never
invented.

Example
-------
>>> env = {"format": "freeipmi-csv", "host": "n001", "time": 1679682808.0, "source": "ipmi/n001.csv:1",
...        "text": "ID,Name,Type,Reading,Units,Event\\n3,CPU1 Temp,Temperature,45.00,C,'OK'\\n"
...                "9,FAN1A,Fan,N/A,RPM,N/A\\n1,Inlet Temp,Temperature,21.00,C,'OK'\\n"}
>>> decode_ipmi_envelope(env)
[{'node': 'n001', 'time': 1679682808.0, 'source': 'ipmi', 'values': {'cpu_temp': 45.0}, 'job_id': None}]
"""
from __future__ import annotations

import csv
import functools
import math
import re
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.mapping import SensorMapping

FORMATS = ("freeipmi-csv", "ipmitool-sdr", "telegraf-lp")
FREEIPMI_HEADER = "ID,Name,Type,Reading,Units,Event"
POLL = re.compile(r"#\s*hpcguard-poll\s+host=(\S+)\s+time=(\S+)\s*$")
_LEADING_NUMBER = re.compile(r"\s*([-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?:\s|$)")  # not "0x01"
_MISSING = {"n/a", "na", "no reading", "disabled", "not readable", "unavailable", ""}
_LP_SPLIT = re.compile(r"(?<!\\) ")
_LP_COMMA = re.compile(r"(?<!\\),")

Reading = tuple[str, "float | None", int]  # (raw name, value or None, line offset within the text)


@functools.lru_cache(maxsize=1)
def _default_mapping() -> SensorMapping:
    """The packaged mapping, loaded once (it is never modified)."""
    return SensorMapping.load()


def _source_line(source: str) -> tuple[str, int | None]:
    path, _, line = str(source).rpartition(":")
    return (path, int(line)) if path and line.isdigit() else (str(source), None)


def parse_freeipmi(text: str, source: str = "", first_line: int | None = None) -> list[Reading]:
    """``(name, reading, offset)`` per row of ``ipmi-sensors --comma-separated-output``."""
    out: list[Reading] = []
    for i, fields in enumerate(csv.reader(text.splitlines())):
        if not fields or fields[0].startswith("#") or (i == 0 and fields[0] == "ID"):
            continue
        line = None if first_line is None else first_line + i
        if len(fields) < 4:
            raise ParseError("bad_row", f"FreeIPMI row needs ID,Name,Type,Reading,...; got {len(fields)} fields",
                             line=line, source=source)
        raw = fields[3].strip()
        if raw.lower() in _MISSING:
            out.append((fields[1].strip(), None, i))
            continue
        try:
            value = float(raw)
        except ValueError:
            raise ParseError("bad_number", f"Reading {raw!r} of {fields[1]!r} is not a number",
                             line=line, source=source) from None
        out.append((fields[1].strip(), value if math.isfinite(value) else None, i))
    return out


def parse_ipmitool(text: str, source: str = "", first_line: int | None = None) -> list[Reading]:
    """``(name, reading, offset)`` per row of ``ipmitool sdr elist``."""
    out: list[Reading] = []
    for i, line in enumerate(text.splitlines()):
        if not line.strip() or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split("|")]
        if len(fields) != 5:
            raise ParseError("bad_row", f"ipmitool sdr elist row needs 5 '|'-separated fields, got {len(fields)}",
                             line=None if first_line is None else first_line + i, source=source)
        name, status, reading = fields[0], fields[2].lower(), fields[4]
        m = _LEADING_NUMBER.match(reading)
        if status == "ns" or reading.lower() in _MISSING or m is None:
            out.append((name, None, i))  # no reading, disabled, or a discrete state
        else:
            out.append((name, float(m.group(1)), i))
    return out


def parse_telegraf_line(line: str, source: str = "", line_no: int | None = None) -> tuple[str, str, float | None, float]:
    """``(host, name, value, time)`` of one Telegraf ``ipmi_sensor`` line-protocol line."""
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
    host = tags.get("host") or tags.get("server")
    if not host or "name" not in tags:
        raise ParseError("missing_field", "ipmi_sensor line needs host (or server) and name tags", line_no, source)
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
    return host, tags["name"], value, ts


def detect_ipmi_format(lines: Iterable[str]) -> str | None:
    """``freeipmi-csv``, ``ipmitool-sdr``, ``telegraf-lp`` or ``None`` from the first lines."""
    for line in lines:
        s = line.strip()
        if not s or POLL.match(s):
            continue
        if s.startswith("ipmi_sensor,") or s.startswith("ipmi_sensor "):
            return "telegraf-lp"
        if s.startswith("ID,Name,Type,Reading"):
            return "freeipmi-csv"
        fields = s.split(",")
        if len(fields) >= 6 and fields[0].isdigit():  # a FreeIPMI row without its header
            return "freeipmi-csv"
        if s.count("|") == 4:
            return "ipmitool-sdr"
        if s.startswith("#"):
            continue
        return None
    return None


def read_ipmi_file(path: str | Path, fmt: str | None = None, source: str | None = None) -> Iterator[dict | Rejected]:
    """Raw IPMI envelopes (one per poll) of a recorded file, or :class:`Rejected`.

    Envelope: ``{"format", "host", "time", "text", "source": "<file>:<line>"}``.
    Rows outside a poll block (no ``# hpcguard-poll`` line before them) are rejected.
    """
    p = Path(path)
    src = source or str(p)
    with open(p) as fh:
        lines = fh.read().splitlines()
    fmt = fmt or detect_ipmi_format(lines[:50])
    if fmt not in FORMATS:
        yield Rejected(src, 1, "unknown_format", "not FreeIPMI CSV, ipmitool sdr elist or Telegraf ipmi_sensor",
                       "\n".join(lines[:3]))
        return
    if fmt == "telegraf-lp":
        yield from _telegraf_envelopes(lines, src)
        return
    host, t, start, block = None, None, 0, []

    def flush():
        if block and host is not None:
            return {"format": fmt, "host": host, "time": t, "text": "\n".join(block) + "\n", "source": f"{src}:{start}"}
        return None

    for i, line in enumerate(lines, start=1):
        if line.startswith("#"):
            m = POLL.match(line)
            if m is None:
                continue
            env = flush()
            if env:
                yield env
            try:
                t = float(m.group(2))
                if not math.isfinite(t):
                    raise ValueError
                host = m.group(1)
            except ValueError:
                yield Rejected(src, i, "bad_time", f"poll time {m.group(2)!r} is not a number", line)
                host = None
            start, block = i, []
        elif line.strip():
            if host is None:
                yield Rejected(src, i, "missing_field", "sensor row outside a '# hpcguard-poll host=... time=...' block",
                               line)
            else:
                block.append(line)
    env = flush()
    if env:
        yield env


def _telegraf_envelopes(lines: list[str], src: str) -> Iterator[dict | Rejected]:
    key, block, start = None, [], 0
    for i, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            host, _, _, ts = parse_telegraf_line(line, src, i)
        except ParseError as exc:
            yield exc.rejected(line)
            continue
        if (host, ts) != key:
            if block:
                yield {"format": "telegraf-lp", "host": key[0], "time": key[1], "text": "\n".join(block) + "\n",
                       "source": f"{src}:{start}"}
            key, block, start = (host, ts), [], i
        block.append(line)
    if block:
        yield {"format": "telegraf-lp", "host": key[0], "time": key[1], "text": "\n".join(block) + "\n",
               "source": f"{src}:{start}"}


def reduce_readings(readings: Iterable[tuple[str, float | None]], mapping: SensorMapping,
                    stats: dict[str, int] | None = None) -> dict[str, float]:
    """Canonical values of one poll's ``(raw name, reading)`` pairs (see ``sensors.toml`` reduce)."""
    found: dict[str, list[tuple[int, float]]] = {}
    unmapped = missing = 0
    for name, value in readings:
        hit = mapping.ipmi_lookup(name)
        if hit is None:
            unmapped += 1
        elif value is None:
            missing += 1
        else:
            found.setdefault(hit[0], []).append((hit[1], value))
    if stats is not None:
        stats["unmapped"] = stats.get("unmapped", 0) + unmapped
        stats["missing"] = stats.get("missing", 0) + missing
    out: dict[str, float] = {}
    for canonical, cands in found.items():
        how = mapping.ipmi_reduce(canonical)
        vals = [v for _, v in cands]
        out[canonical] = (min(cands)[1] if how == "first" else max(vals) if how == "max"
                          else min(vals) if how == "min" else sum(vals) / len(vals))
    return out


def decode_ipmi_envelope(env: Mapping, mapping: SensorMapping | None = None,
                         stats: dict[str, int] | None = None) -> list[dict]:
    """Canonical samples (``source="ipmi"``) of one raw IPMI envelope.

    Raises :class:`ParseError` for a malformed envelope or row; ``stats`` (if given)
    counts ``unmapped`` sensors and ``missing`` readings.  A poll with no mapped
    reading gives no sample.
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
        polls: dict[tuple[str, float], list[tuple[str, float | None]]] = {}
        for i, line in enumerate(text.splitlines()):
            if line.strip():
                host, name, value, ts = parse_telegraf_line(line, src, None if base is None else base + i)
                polls.setdefault((host, ts), []).append((name, value))
    else:
        host, t = env.get("host"), env.get("time")
        if not isinstance(host, str) or not host:
            raise ParseError("missing_field", "envelope has no host", base, src)
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise ParseError("bad_time", f"envelope time {t!r} is not a finite number", base, src)
        first = None if base is None else base + 1
        parsed = parse_freeipmi(text, src, first) if fmt == "freeipmi-csv" else parse_ipmitool(text, src, first)
        polls = {(host, float(t)): [(name, value) for name, value, _ in parsed]}
    samples = []
    for (host, ts), readings in sorted(polls.items(), key=lambda kv: kv[0][1]):
        values = reduce_readings(readings, mapping, stats)
        if values:
            samples.append({"node": host, "time": ts, "source": "ipmi", "values": values, "job_id": None})
    return samples
