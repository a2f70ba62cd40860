"""InfluxDB line protocol for hpcguard's canonical records.

One point per record.  :data:`SCHEMA` says, per record kind, which measurement it
becomes, which keys are tags and which fields exist; dashboards and their tests derive
the set of queryable names from it (:func:`measurement_fields`).

| kind | measurement | tags | fields | time |
|---|---|---|---|---|
| NodeSample | node_sample | node, source | one float per canonical value | time |
| NodePrediction | node_prediction | node, model | failure_probability, warn, lead_minutes, p0..p5 | sample_time (else time) |
| IoDegradation | io_window | system, model | IO features, degraded, probability, window_s | window_end |
| Action | action | kind, source, job_id | action_id, nodes, node_count, reason (JSON), deadline | time |
| ActionAck | action_ack | kind, status, adapter | action_id, detail, job_id, nodes | time |
| ProbeResult | probe | probe_type | runtime_s, ratio (if present), probe_id, node | end |

Numbers are written as floats (an InfluxDB field keeps one type forever, so an
integer-looking value must not switch the field to integer); NaN and infinite values
are left out of the point, never invented.  Empty tags are omitted.  Timestamps are
nanoseconds, rounded to the microsecond (exact for epoch seconds held in a float).

Example
-------
>>> to_line("NodeSample", {"node": "n 1", "time": 1.5, "source": "ipmi", "values": {"cpu_temp": 51}})
'node_sample,node=n\\\\ 1,source=ipmi cpu_temp=51.0 1500000000'
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from hpcguard.models.features import CANONICAL_SENSORS, IO_METRICS, IO_STATISTICS

N_NETWORKS = 6  # seed 000: six lead-time networks (2..7 min) → fields p0..p5
IO_FEATURES: tuple[str, ...] = tuple(f"{m}_{st}" for m in ("read", "write") for st in IO_STATISTICS)


class LineProtocolError(ValueError):
    """A record cannot become a point (missing key, wrong type, no field)."""


@dataclass(frozen=True)
class MeasurementSchema:
    """Names one record kind turns into: measurement, tag keys, field keys."""

    measurement: str
    tags: tuple[str, ...]
    fields: tuple[str, ...]


SCHEMA: dict[str, MeasurementSchema] = {
    "NodeSample": MeasurementSchema("node_sample", ("node", "source"), CANONICAL_SENSORS + IO_METRICS),
    "NodePrediction": MeasurementSchema(
        "node_prediction", ("node", "model"),
        ("failure_probability", "warn", "lead_minutes") + tuple(f"p{i}" for i in range(N_NETWORKS))),
    "IoDegradation": MeasurementSchema("io_window", ("system", "model"),
                                       IO_FEATURES + ("degraded", "probability", "window_s")),
    "Action": MeasurementSchema("action", ("kind", "source", "job_id"),
                                ("action_id", "nodes", "node_count", "reason", "deadline")),
    "ActionAck": MeasurementSchema("action_ack", ("kind", "status", "adapter"),
                                   ("action_id", "detail", "job_id", "nodes")),
    "ProbeResult": MeasurementSchema("probe", ("probe_type",), ("runtime_s", "ratio", "probe_id", "node")),
}
KINDS: tuple[str, ...] = tuple(SCHEMA)


def measurement_fields() -> dict[str, dict[str, set[str]]]:
    """``{measurement: {"tags": {...}, "fields": {...}}}`` — everything the sink can write.

    >>> sorted(measurement_fields()["probe"]["tags"])
    ['probe_type']
    """
    return {s.measurement: {"tags": set(s.tags), "fields": set(s.fields)} for s in SCHEMA.values()}


# --- escaping ---------------------------------------------------------------------------------------
_KEY_ESCAPES = str.maketrans({"\\": "\\\\", ",": "\\,", "=": "\\=", " ": "\\ ", "\n": "\\n", "\r": "\\r",
                              "\t": "\\t"})
_MEASUREMENT_ESCAPES = str.maketrans({"\\": "\\\\", ",": "\\,", " ": "\\ ", "\n": "\\n", "\r": "\\r",
                                      "\t": "\\t"})
_STRING_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"'})


@functools.lru_cache(maxsize=65536)  # tag values and field keys repeat (node names, sensor names)
def escape_key(text: str) -> str:
    """Escape a tag key, tag value or field key (comma, equals, space, backslash, control chars).

    >>> escape_key("a b,c=d")
    'a\\\\ b\\\\,c\\\\=d'
    """
    return text.translate(_KEY_ESCAPES)


@functools.lru_cache(maxsize=64)
def escape_measurement(text: str) -> str:
    """Escape a measurement name (comma, space, backslash)."""
    return text.translate(_MEASUREMENT_ESCAPES)


def format_field(value: Any) -> str | None:
    """Field value in line protocol; ``None`` for a value that must be left out (None, NaN, ±inf).

    >>> format_field(3), format_field(True), format_field('say "hi"'), format_field(float("nan"))
    ('3.0', 'true', '"say \\\\"hi\\\\""', None)
    """
    if type(value) is float:  # the common case first
        return repr(value) if math.isfinite(value) else None
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        x = float(value)
        return repr(x) if math.isfinite(x) else None
    if isinstance(value, str):
        return '"' + value.translate(_STRING_ESCAPES) + '"'
    raise LineProtocolError(f"unsupported field value type {type(value).__name__}: {value!r}")


def time_ns(seconds: float) -> int:
    """Epoch seconds → integer nanoseconds, rounded to the microsecond.

    >>> time_ns(1679682808.001751)
    1679682808001751000
    """
    s = float(seconds)
    if not math.isfinite(s):
        raise LineProtocolError(f"timestamp must be finite, got {seconds!r}")
    return int(round(s * 1_000_000)) * 1000


def format_line(measurement: str, tags: Mapping[str, Any], fields: Mapping[str, Any], t_ns: int) -> str:
    """Assemble one point; empty tags and unrepresentable fields are left out.

    Raises :class:`LineProtocolError` when no field remains (InfluxDB rejects such a point).

    >>> format_line("m", {"b": "2", "a": "", "c": None}, {"x": 1.0, "y": float("nan")}, 7)
    'm,b=2 x=1.0 7'
    """
    tag_part = "".join(f",{escape_key(k)}={escape_key(str(v))}" for k, v in sorted(tags.items())
                       if v is not None and str(v) != "")
    field_items = [(k, format_field(v)) for k, v in fields.items()]
    field_part = ",".join(f"{escape_key(k)}={v}" for k, v in field_items if v is not None)
    if not field_part:
        raise LineProtocolError(f"{measurement}: no finite field value to write")
    return f"{escape_measurement(measurement)}{tag_part} {field_part} {int(t_ns)}"


# --- records → points --------------------------------------------------------------------------------
def _get(record: Mapping[str, Any], key: str, kind: str) -> Any:
    try:
        return record[key]
    except KeyError:
        raise LineProtocolError(f"{kind} record lacks {key!r}") from None
    except TypeError:
        raise LineProtocolError(f"{kind} record must be a mapping, got {type(record).__name__}") from None


def _numbers(values: Any, kind: str, what: str) -> dict[str, float]:
    if not isinstance(values, Mapping):
        raise LineProtocolError(f"{kind}.{what} must be a mapping of names to numbers")
    out = {}
    for k, v in values.items():
        if type(v) is not float:
            if isinstance(v, bool) or not (v is None or isinstance(v, (int, float))):
                raise LineProtocolError(f"{kind}.{what}[{k!r}] must be a number, got {v!r}")
            v = None if v is None else float(v)
        out[str(k)] = v
    return out


def _nodes(record: Mapping[str, Any]) -> str | None:
    nodes = record.get("nodes") or []
    return ",".join(str(n) for n in nodes) or None


def _sample(r: Mapping[str, Any]) -> tuple[dict, dict, float]:
    k = "NodeSample"
    return ({"node": _get(r, "node", k), "source": _get(r, "source", k)},
            _numbers(_get(r, "values", k), k, "values"), _get(r, "time", k))


def _prediction(r: Mapping[str, Any]) -> tuple[dict, dict, float]:
    k = "NodePrediction"
    fields: dict[str, Any] = {"failure_probability": _get(r, "failure_probability", k),
                              "warn": bool(_get(r, "warn", k)), "lead_minutes": _get(r, "lead_minutes", k)}
    nets = list(r.get("network_probabilities") or [])
    if len(nets) > N_NETWORKS:
        raise LineProtocolError(f"{k}: {len(nets)} network probabilities, at most {N_NETWORKS}")
    fields.update(_numbers({f"p{i}": p for i, p in enumerate(nets)}, k, "network_probabilities"))
    # stamped with the telemetry time it judged, so it lines up with the samples (and a batch of
    # verdicts made in the same instant does not collapse into one point)
    when = r.get("sample_time")
    return {"node": _get(r, "node", k), "model": _get(r, "model", k)}, fields, when if when is not None else _get(r, "time", k)


def _io_window(r: Mapping[str, Any]) -> tuple[dict, dict, float]:
    k = "IoDegradation"
    end = _get(r, "window_end", k)
    fields: dict[str, Any] = _numbers(_get(r, "features", k), k, "features")
    fields.update(degraded=bool(_get(r, "degraded", k)), probability=_get(r, "probability", k),
                  window_s=float(end) - float(_get(r, "window_start", k)))
    return {"system": _get(r, "system", k), "model": _get(r, "model", k)}, fields, end


def _action(r: Mapping[str, Any]) -> tuple[dict, dict, float]:
    k = "Action"
    nodes = list(r.get("nodes") or [])
    fields = {"action_id": str(_get(r, "action_id", k)), "nodes": _nodes(r), "node_count": len(nodes),
              "reason": json.dumps(_get(r, "reason", k), sort_keys=True, separators=(",", ":"), default=str),
              "deadline": r.get("deadline")}
    tags = {"kind": _get(r, "kind", k), "source": _get(r, "source", k), "job_id": r.get("job_id")}
    return tags, fields, _get(r, "time", k)


def _ack(r: Mapping[str, Any]) -> tuple[dict, dict, float]:
    k = "ActionAck"
    fields = {"action_id": str(_get(r, "action_id", k)), "detail": str(r.get("detail") or ""),
              "job_id": None if r.get("job_id") is None else str(r["job_id"]), "nodes": _nodes(r)}
    tags = {"kind": r.get("kind") or "", "status": _get(r, "status", k), "adapter": _get(r, "adapter", k)}
    return tags, fields, _get(r, "time", k)


def _probe(r: Mapping[str, Any]) -> tuple[dict, dict, float]:
    k = "ProbeResult"
    fields = {"runtime_s": _get(r, "runtime_s", k), "ratio": r.get("ratio"),
              "probe_id": str(_get(r, "probe_id", k)), "node": r.get("node") or None}
    return {"probe_type": _get(r, "probe_type", k)}, fields, _get(r, "end", k)


_CONVERTERS: dict[str, Callable[[Mapping[str, Any]], tuple[dict, dict, float]]] = {
    "NodeSample": _sample, "NodePrediction": _prediction, "IoDegradation": _io_window,
    "Action": _action, "ActionAck": _ack, "ProbeResult": _probe,
}


def to_line(kind: str, record: Mapping[str, Any]) -> str:
    """One canonical record (as a dict, e.g. ``Record.asdict()``) → one line-protocol point.

    Parameters
    ----------
    kind
        Record class name, one of :data:`KINDS`.
    record
        The record's fields.

    >>> to_line("ProbeResult", {"probe_id": "p1", "probe_type": "ior", "start": 0, "end": 2, "runtime_s": 2})
    'probe,probe_type=ior runtime_s=2.0,probe_id="p1" 2000000000'
    """
    try:
        convert = _CONVERTERS[kind]
    except KeyError:
        raise LineProtocolError(f"unknown record kind {kind!r}; expected one of {', '.join(KINDS)}") from None
    tags, fields, t = convert(record)
    for key, value in tags.items():
        if value is not None and not isinstance(value, (str, int)):
            raise LineProtocolError(f"{kind}.{key} must be a string, got {value!r}")
    try:
        t_ns = time_ns(t)
    except (TypeError, ValueError) as exc:
        raise LineProtocolError(f"{kind}: bad time {t!r}: {exc}") from None
    return format_line(SCHEMA[kind].measurement, tags, fields, t_ns)


class SampleDownsampler:
    """Keep at most one ``NodeSample`` per (node, source) per ``every_s`` seconds of record time.

    ``every_s = 0`` keeps everything.  State is one float per (node, source).

    >>> d = SampleDownsampler(60)
    >>> [d.keep("n1", "ipmi", t) for t in (0, 15, 59.9, 60, 75)]
    [True, False, False, True, False]
    """

    def __init__(self, every_s: float = 0.0):
        if every_s < 0:
            raise ValueError(f"every_s must be >= 0, got {every_s}")
        self.every_s = float(every_s)
        self._last: dict[tuple[str, str], float] = {}

    def keep(self, node: str, source: str, t: float) -> bool:
        if self.every_s <= 0:
            return True
        key = (node, source)
        last = self._last.get(key)
        if last is not None and last <= t < last + self.every_s:
            return False
        self._last[key] = float(t)
        return True
