"""Strict patterns for every value that reaches a scheduler command, and the door
every record passes before it touches worker state.

Anything an adapter passes to ``scontrol``/``scancel`` or a site executable is checked
here first; a value that does not match is refused with a ``ValidationError`` naming
the field and why.  The patterns are deliberately narrow: no shell metacharacters,
no whitespace except in reasons, no leading ``-`` (it would read as an option), and
bounded lengths.

Example
-------
>>> validate_job_id("4242")
'4242'
>>> try:
...     validate_node("n1;touch pwned")
... except ValidationError as err:
...     print(err.field)
nodes
>>> validate_action({"action_id": "a1", "kind": "drain", "nodes": ["n1"], "reason": {"text": "fan failing"}}).reason_text
'fan failing'

The door (see "The door" below) applies the same id rules to every input record:

>>> limits = DoorLimits()
>>> rec = safe_loads(b'{"node": "n001", "time": 1679682808.0, "source": "ipmi", "values": {"cpu_temp": 51.0}}',
...                  max_bytes=limits.max_bytes, max_depth=limits.max_depth)
>>> check_record("NodeSample", rec, limits, now=1679682900.0)["values"]
{'cpu_temp': 51.0}
>>> try:
...     check_record("NodeSample", {**rec, "node": "n1;reboot"}, limits, now=1679682900.0)
... except ValidationError as err:
...     print(err.kind, err.field)
bad_id node
"""
from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import orjson

from hpcguard.connectors.hostlist import expand_hostlist
from hpcguard.connectors.slurm_events import FORMAT as SLURM_EVENT_FORMAT
from hpcguard.models.jobs import NODE_STATE, PROGRESS

ACTION_KINDS = ("checkpoint", "migrate", "reschedule", "delay", "release", "drain", "resume")
JOB_KINDS = frozenset({"checkpoint", "migrate", "reschedule", "delay", "release"})
NODE_KINDS = frozenset({"migrate", "drain", "resume"})

_ACTION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_JOB_ID = re.compile(r"[0-9]{1,10}(?:_[0-9]{1,10})?")
_NODE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,62}")
_PARTITION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
_REASON = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.,:+/@%#-]{0,127}")
_SOURCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
SIGNALS = frozenset({"HUP", "INT", "QUIT", "KILL", "USR1", "USR2", "ALRM", "TERM", "CONT", "STOP", "TSTP", "URG",
                     "XCPU", "WINCH"})
MAX_NODES = 4096


class ValidationError(ValueError):
    """A refused value: ``field`` names where it was, ``kind`` is the dead letter's
    ``error_kind`` (``bad_id``, ``bad_type``, ``not_finite``, ``out_of_range``, ``bad_time``,
    ``too_large``, ``too_deep``, ``bad_json``, ``missing_field``, ``unknown_field``,
    ``unknown_node``...) and ``reason`` the human-readable why."""

    def __init__(self, field_name: str, message: str, kind: str = "bad_value"):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.kind = kind
        self.reason = f"{field_name}: {message}"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "...'"


def _check(pattern: re.Pattern[str], value: Any, field_name: str, what: str) -> str:
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        raise ValidationError(field_name, f"{_show(value)} is not a valid {what}", "bad_id")
    return value


def validate_action_id(value: Any) -> str:
    """Action ids: letters, digits, ``_.:-``, at most 128 characters."""
    return _check(_ACTION_ID, value, "action_id", "action id (letters, digits, '_', '.', ':', '-'; at most 128)")


def validate_job_id(value: Any) -> str:
    """Slurm job ids: ``1234`` or an array task ``1234_7`` (integers are accepted)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        value = str(value)
    return _check(_JOB_ID, value, "job_id", "job id (digits, optionally '_' and an array index)")


def validate_node(value: Any) -> str:
    """One node name (no hostlist expressions, no whitespace, no leading '-')."""
    return _check(_NODE, value, "nodes",
                  "node name (letters, digits, '_', '.', '-'; starts with a letter; at most 63 characters)")


def validate_nodes(values: Any) -> list[str]:
    """A list of distinct node names (order kept)."""
    if values is None:
        return []
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise ValidationError("nodes", f"expected a list of node names, got {_show(values)}")
    if len(values) > MAX_NODES:
        raise ValidationError("nodes", f"{len(values)} nodes exceed the limit of {MAX_NODES}")
    out: list[str] = []
    for v in values:
        validate_node(v)
        if v not in out:
            out.append(v)
    return out


def validate_partition(value: Any) -> str:
    return _check(_PARTITION, value, "partition", "partition name (letters, digits, '_', '.', '-'; at most 64)")


def validate_user(value: Any) -> str:
    return _check(_USER, value, "user", "user name (lower-case letters, digits, '_', '.', '-'; at most 32)")


def validate_reason(value: Any) -> str:
    """Free text for a node's drain reason: no shell metacharacters, no '=', no newlines, ≤ 128."""
    return _check(_REASON, value, "reason",
                  "reason (letters, digits, spaces and _.,:+/@%#-; starts with a letter or digit; at most 128)")


def validate_signal(value: Any) -> str:
    """A signal name (``USR1``, ``SIGUSR1``) or number 1-64; returns Slurm's spelling."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str):
        name = value.upper()
        name = name[3:] if name.startswith("SIG") else name
        if name in SIGNALS:
            return name
        if name.isdigit() and 1 <= int(name) <= 64 and len(name) <= 2:
            return name
    raise ValidationError("signal", f"{_show(value)} is not an allowed signal ({', '.join(sorted(SIGNALS))} or 1-64)")


@dataclass(frozen=True)
class ValidatedAction:
    """An action whose every field passed the strict patterns."""

    action_id: str
    kind: str
    job_id: str | None
    nodes: tuple[str, ...]
    source: str
    reason_text: str
    deadline: float | None
    hold: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


def validate_action(action: Any) -> ValidatedAction:
    """Check an action dict; raise ``ValidationError`` at the first bad field.

    ``reason`` may be a dict (the decision's explanation); its optional ``text`` becomes
    the scheduler-visible reason and its optional ``hold`` (bool) asks reschedule to
    hold the requeued job.  Without ``text`` the reason is ``<source> <kind>``.
    """
    if not isinstance(action, Mapping):
        raise ValidationError("action", f"expected a JSON object, got {type(action).__name__}")
    action_id = validate_action_id(action.get("action_id"))
    kind = action.get("kind")
    if kind not in ACTION_KINDS:
        raise ValidationError("kind", f"{_show(kind)} is not one of {', '.join(ACTION_KINDS)}")
    job_id = action.get("job_id")
    job_id = None if job_id in (None, "") else validate_job_id(job_id)
    nodes = validate_nodes(action.get("nodes"))
    if kind in JOB_KINDS and job_id is None:
        raise ValidationError("job_id", f"a {kind} action needs a job id")
    if kind in ("drain", "resume") and not nodes:
        raise ValidationError("nodes", f"a {kind} action needs at least one node")
    source = action.get("source") or "hpcguard"
    _check(_SOURCE, source, "source", "source (letters, digits, '_', '.', ':', '-'; at most 64)")
    reason = action.get("reason") or {}
    if not isinstance(reason, Mapping):
        raise ValidationError("reason", f"expected an object, got {_show(reason)}")
    text = reason.get("text")
    reason_text = validate_reason(text) if text is not None else validate_reason(f"{source} {kind}")
    hold = reason.get("hold", False)
    if not isinstance(hold, bool):
        raise ValidationError("reason.hold", f"expected true/false, got {_show(hold)}")
    deadline = action.get("deadline")
    if deadline is not None:
        if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not math.isfinite(deadline):
            raise ValidationError("deadline", f"expected epoch seconds, got {_show(deadline)}")
        deadline = float(deadline)
    return ValidatedAction(action_id=action_id, kind=kind, job_id=job_id, nodes=tuple(nodes), source=source,
                           reason_text=reason_text, deadline=deadline, hold=hold, raw=action)


# -- the door: every record, raw or canonical, before it touches state ---------------------
#
# Decode path (one per record, in the worker's single decode function):
#
#     data = safe_loads(raw, max_bytes=limits.max_bytes, max_depth=limits.max_depth)
#     record = check_record("NodeSample", data, limits)          # or "ldms", "ipmi", "slurm" raw kinds
#     if not inventory.admit(record["node"]): dead-letter kind "unknown_node"
#
# Every failure is a ValidationError whose ``kind`` and ``reason`` go into the dead letter.

# unknown: Governor.reconcile; would_apply: the dry-run adapter's plan (terminal like skipped: nothing ran)
ACK_STATUSES = ("applied", "skipped", "would_apply", "failed", "refused", "duplicate", "unknown")
JOB_EVENTS = ("submit", "start", "end", "requeue", "hold", "release")
DEADLINE_HORIZON_S = 366 * 86400.0  # an action's deadline may lie at most a year ahead
RAW_COUNTER_BOUND = 2.0 ** 64  # LDMS U64 counters (sent as signed Avro longs: may be negative)
LDMS_PRODUCER_KEYS = ("ProducerName", "producer", "prdcr", "producer_name")
LDMS_TIME_KEYS = ("timestamp", "time", "Time")
LDMS_META = frozenset({*LDMS_PRODUCER_KEYS, *LDMS_TIME_KEYS, "component_id", "comp_id", "job_id", "app_id", "instance",
                       "schema", "Time_usec", "uid", "gid", "card"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NUL = re.compile(r"\x00")
_METRIC_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:#-]{0,127}")
_NUMBER_TYPES = (int, float)


@dataclass(frozen=True)
class DoorLimits:
    """Bounds every record is checked against (the ``[door]`` settings section).

    Example
    -------
    >>> from hpcguard.settings import Settings
    >>> DoorLimits.from_settings(Settings().door).max_depth
    32
    """

    max_bytes: int = 1_048_576
    max_depth: int = 32
    epoch: float = 946_684_800.0
    max_skew_s: float = 300.0
    max_abs_value: float = 1e15
    max_text: int = 256
    max_list: int = 4096

    @classmethod
    def from_settings(cls, door: Any) -> "DoorLimits":
        """From ``Settings().door`` (any object with these attribute names)."""
        return cls(**{f.name: getattr(door, f.name) for f in fields(cls)})


def json_depth(value: Any, stop_after: int | None = None) -> int:
    """Nesting depth of a decoded JSON value (scalar 0, ``[]`` 1), without recursion.

    >>> json_depth({"a": [1, {"b": 2}]})
    3
    """
    depth, level = 0, [value]
    while True:
        containers = [v for v in level if isinstance(v, (dict, list))]
        if not containers:
            return depth
        depth += 1
        if stop_after is not None and depth > stop_after:
            return depth
        level = [c for v in containers for c in (v.values() if isinstance(v, dict) else v)]


def safe_loads(raw: bytes | str, *, max_bytes: int, max_depth: int) -> Any:
    """JSON with size and nesting limits; never lets ``RecursionError`` escape.

    Raises ``ValidationError`` (field ``record``) of kind ``too_large``, ``too_deep`` or
    ``bad_json``.  ``max_bytes`` counts bytes (characters when ``raw`` is a ``str``).

    >>> try:
    ...     safe_loads(b"[" * 10000 + b"]" * 10000, max_bytes=10**6, max_depth=32)
    ... except ValidationError as err:
    ...     print(err.kind, err.reason)
    too_deep record: JSON nested deeper than 32 levels
    """
    if not isinstance(raw, (bytes, bytearray, str)):
        raise ValidationError("record", f"expected bytes, got {type(raw).__name__}", "bad_type")
    if len(raw) > max_bytes:
        raise ValidationError("record", f"{len(raw)} bytes exceed the limit of {max_bytes}", "too_large")
    # why: orjson reads a record several times faster; whatever it refuses (NaN, deep or odd input) or might
    # read differently (integers beyond 64 bits become floats there) is read again by the stdlib below,
    # which decides and names the fault exactly as before
    if not isinstance(raw, str) and _LONG_DIGITS not in raw.translate(_DIGITS_ONLY):
        try:
            return _bounded_depth(orjson.loads(raw), raw, max_depth)
        except orjson.JSONDecodeError:
            pass
    try:
        value = json.loads(raw)
    except RecursionError:
        raise ValidationError("record", f"JSON nested deeper than {max_depth} levels", "too_deep") from None
    except (ValueError, TypeError) as exc:  # UnicodeDecodeError and over-long integers are ValueErrors too
        raise ValidationError("record", f"not JSON: {exc}", "bad_json") from None
    return _bounded_depth(value, raw, max_depth)


# a run of 19 digits: an integer orjson might not hold in 64 bits (it reads those as floats); found by
# mapping every digit to "0" and everything else to " " (two C-speed passes, unlike a regex scan)
_DIGITS_ONLY = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_DIGITS = b"0" * 19


def _bounded_depth(value: Any, raw: bytes | bytearray | memoryview | str, max_depth: int) -> Any:
    # why: the number of opening brackets bounds the depth, so flat records skip the walk
    opening = raw.count("[") + raw.count("{") if isinstance(raw, str) else raw.count(b"[") + raw.count(b"{")
    if opening > max_depth and json_depth(value, stop_after=max_depth) > max_depth:
        raise ValidationError("record", f"JSON nested deeper than {max_depth} levels", "too_deep")
    return value


# -- field checkers: (value, field name, limits, now) -> cleaned value ------------------------

def _type_error(name: str, value: Any, what: str) -> ValidationError:
    return ValidationError(name, f"expected {what}, got {type(value).__name__} {_show(value)}", "bad_type")


def _finite(value: Any, name: str, what: str) -> float:
    """A JSON number (not a bool or string) as a finite float, or the reason it is not one."""
    if type(value) not in _NUMBER_TYPES:
        raise _type_error(name, value, what)
    try:
        x = float(value)
    except OverflowError:
        raise ValidationError(name, f"{_show(value)} is out of range", "out_of_range") from None
    if not math.isfinite(x):
        raise ValidationError(name, f"{_show(value)} is not a finite number", "not_finite")
    return x


def _number(value: Any, name: str, limits: DoorLimits, lo: float | None = None, hi: float | None = None) -> float:
    x = _finite(value, name, "a number")
    lo = -limits.max_abs_value if lo is None else lo
    hi = limits.max_abs_value if hi is None else hi
    if not lo <= x <= hi:
        raise ValidationError(name, f"{x:g} is outside [{lo:g}, {hi:g}]", "out_of_range")
    return x


def _time(value: Any, name: str, limits: DoorLimits, now: float) -> float:
    x = _finite(value, name, "epoch seconds")
    if x < limits.epoch:
        raise ValidationError(name, f"{x:.15g} is before the deployment epoch {limits.epoch:.0f}", "bad_time")
    if x > now + limits.max_skew_s:
        raise ValidationError(name, f"{x:.15g} is {x - now:.6g} s ahead of the wall clock (limit "
                              f"{limits.max_skew_s:g} s)", "bad_time")
    return x


def _deadline(value: Any, name: str, limits: DoorLimits, now: float) -> float:
    return _time(value, name, DoorLimits(**{**limits.__dict__, "max_skew_s": DEADLINE_HORIZON_S}), now)


def _text(value: Any, name: str, limits: DoorLimits, max_len: int | None = None, multiline: bool = False) -> str:
    if not isinstance(value, str):
        raise _type_error(name, value, "a string")
    max_len = limits.max_text if max_len is None else max_len
    if len(value) > max_len:
        raise ValidationError(name, f"{len(value)} characters exceed the limit of {max_len}", "too_large")
    if (_NUL if multiline else _CONTROL).search(value):
        raise ValidationError(name, f"{_show(value)} contains control characters", "bad_value")
    return value


def _finite_json(value: Any, name: str, limits: DoorLimits) -> Any:
    """A JSON object whose numbers are finite and bounded and whose strings have no NUL."""
    if not isinstance(value, dict):
        raise _type_error(name, value, "a JSON object")
    level: list[Any] = [value]
    while level:
        nxt: list[Any] = []
        for v in level:
            if isinstance(v, dict):
                for k in v:
                    _text(k, name, limits)
                nxt.extend(v.values())
            elif isinstance(v, list):
                nxt.extend(v)
            elif isinstance(v, float) and not math.isfinite(v):
                raise ValidationError(name, f"contains {v}", "not_finite")
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) > limits.max_abs_value:
                raise ValidationError(name, f"contains {v:g}, beyond ±{limits.max_abs_value:g}", "out_of_range")
            elif isinstance(v, str):
                _text(v, name, limits, limits.max_bytes, multiline=True)
        level = nxt
    return value


def _values(value: Any, name: str, limits: DoorLimits) -> dict[str, float]:
    """Metric name → finite bounded float; at least one value."""
    _collection(value, name, limits, dict, "an object of metric values", "metric values")
    for k in value:
        if not isinstance(k, str) or _METRIC_NAME.fullmatch(k) is None:
            raise ValidationError(name, f"{_show(k)} is not a metric name", "bad_id")
    if not {type(v) for v in value.values()} <= {int, float}:
        bad = next(k for k, v in value.items() if type(v) not in _NUMBER_TYPES)
        raise _type_error(f"{name}.{bad}", value[bad], "a number")
    try:
        arr = np.fromiter(value.values(), dtype=float, count=len(value))
    except OverflowError:
        raise ValidationError(name, "a value is beyond the float range", "out_of_range") from None
    finite = np.isfinite(arr)
    if not finite.all():
        bad = list(value)[int(np.argmin(finite))]
        raise ValidationError(f"{name}.{bad}", f"{value[bad]} is not a finite number", "not_finite")
    too_big = np.abs(arr) > limits.max_abs_value
    if too_big.any():
        bad = list(value)[int(np.argmax(too_big))]
        raise ValidationError(f"{name}.{bad}", f"{value[bad]:g} is beyond ±{limits.max_abs_value:g}", "out_of_range")
    return {k: float(v) for k, v in zip(value, arr.tolist())}


def _nodes(value: Any, name: str, limits: DoorLimits) -> list[str]:
    if not isinstance(value, list):
        raise _type_error(name, value, "a list of node names")
    if len(value) > limits.max_list:
        raise ValidationError(name, f"{len(value)} nodes exceed the limit of {limits.max_list}", "too_large")
    return [_id(validate_node, v, name) for v in value]


def _collection(value: Any, name: str, limits: DoorLimits, kind: type, expected: str, items: str) -> Any:
    """A non-empty ``kind`` (dict or list) of at most ``limits.max_list`` items."""
    if not isinstance(value, kind):
        raise _type_error(name, value, expected)
    if not value:
        raise ValidationError(name, f"no {items}", "no_values")
    if len(value) > limits.max_list:
        raise ValidationError(name, f"{len(value)} {items} exceed the limit of {limits.max_list}", "too_large")
    return value


def _sample_list(value: Any, name: str, limits: DoorLimits) -> list:
    """The list of a ``NodeSamples`` batch; each item is checked as a ``NodeSample`` on its own."""
    return _collection(value, name, limits, list, "a list of NodeSample objects", "samples")


def _id(check: Callable[[Any], str], value: Any, name: str) -> str:
    """An adapter id rule, reported under the record's field name."""
    try:
        return check(value)
    except ValidationError as err:
        raise ValidationError(name, str(err).partition(": ")[2], "bad_id") from None


def _probabilities(value: Any, name: str, limits: DoorLimits) -> list[float]:
    if not isinstance(value, list):
        raise _type_error(name, value, "a list of probabilities")
    if len(value) > limits.max_list:
        raise ValidationError(name, f"{len(value)} entries exceed the limit of {limits.max_list}", "too_large")
    return [_number(v, name, limits, 0.0, 1.0) for v in value]


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise _type_error(name, value, "true or false")
    return value


def _choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if value not in choices or not isinstance(value, str):
        raise ValidationError(name, f"{_show(value)} is not one of {', '.join(choices) or 'nothing'}", "bad_value")
    return value


def _int(value: Any, name: str, lo: int, hi: int) -> int:
    if type(value) is not int:
        raise _type_error(name, value, "an integer")
    if not lo <= value <= hi:
        raise ValidationError(name, f"{value} is outside [{lo}, {hi}]", "out_of_range")
    return value


_Check = Callable[[Any, str, DoorLimits, float], Any]


def _c(fn: Callable[..., Any], *args: Any, **kw: Any) -> _Check:
    """A field checker from a helper taking (value, name, limits) plus fixed arguments."""
    return lambda v, n, lim, now: fn(v, n, lim, *args, **kw)


_F_NODE_ID: _Check = lambda v, n, lim, now: _id(validate_node, v, n)
_F_NODE_OR_EMPTY: _Check = lambda v, n, lim, now: v if v == "" else _id(validate_node, v, n)
_F_JOB_ID: _Check = lambda v, n, lim, now: _id(validate_job_id, v, n)
_F_ACTION: _Check = lambda v, n, lim, now: _id(validate_action_id, v, n)
_F_USER: _Check = lambda v, n, lim, now: v if v == "" else _id(validate_user, v, n)
_F_PARTITION: _Check = lambda v, n, lim, now: v if v == "" else _id(validate_partition, v, n)
_F_TIME: _Check = _time
_F_DEADLINE: _Check = _deadline
_F_TEXT: _Check = _c(_text)
_F_LONG_TEXT: _Check = lambda v, n, lim, now: _text(v, n, lim, lim.max_bytes, multiline=True)
_F_NONNEG: _Check = lambda v, n, lim, now: _number(v, n, lim, 0.0)
_F_PROB: _Check = lambda v, n, lim, now: _number(v, n, lim, 0.0, 1.0)
_F_VERSION: _Check = lambda v, n, lim, now: _int(v, n, 1, 1)

# field → (checker, required); an absent optional field or a null optional value is kept as is
_SCHEMAS: dict[str, dict[str, tuple[_Check, bool]]] = {
    "NodeSample": {
        "node": (_F_NODE_ID, True), "time": (_F_TIME, True), "source": (_F_TEXT, True),
        "values": (_c(_values), True), "job_id": (_F_JOB_ID, False), "ingest_time": (_F_TIME, False),
        "v": (_F_VERSION, False)},
    # a batch of samples (normalize's LDMS output: one record per node, or file system, and batch)
    "NodeSamples": {"samples": (_c(_sample_list), True), "v": (_F_VERSION, False)},
    "JobEvent": {
        "job_id": (_F_JOB_ID, True), "event": (lambda v, n, lim, now: _choice(v, n, JOB_EVENTS), True),
        "time": (_F_TIME, True), "nodes": (_c(_nodes), False),
        "num_nodes": (lambda v, n, lim, now: _int(v, n, 0, lim.max_list), False),
        "user": (_F_USER, False), "partition": (_F_PARTITION, False), "name": (_F_TEXT, False), "state": (_F_TEXT, False),
        "time_limit_s": (_F_NONNEG, False), "submit_time": (_F_TIME, False), "start_time": (_F_TIME, False),
        "end_time": (_F_TIME, False), "exit_code": (_F_TEXT, False), "script": (_F_LONG_TEXT, False),
        "v": (_F_VERSION, False)},
    # a JobEvent whose event is NODE_STATE (a node's Slurm state change, connectors.slurm_events) names no job
    "JobNodeState": {
        "job_id": (lambda v, n, lim, now: _choice(v, n, ("",)), True),
        "event": (lambda v, n, lim, now: _choice(v, n, (NODE_STATE,)), True), "time": (_F_TIME, True),
        "nodes": (_c(_nodes), True), "num_nodes": (lambda v, n, lim, now: _int(v, n, 0, lim.max_list), False),
        "state": (_F_TEXT, True), "reason": (_F_TEXT, False), "end_time": (_F_TIME, False), "v": (_F_VERSION, False)},
    # JobEvent and slurm envelope records whose event is PROGRESS are checked as these instead
    "JobProgress": {"event": (lambda v, n, lim, now: _choice(v, n, (PROGRESS,)), True), "time": (_F_TIME, True),
                    "v": (_F_VERSION, False)},
    "slurm-progress": {"format": (_F_TEXT, True), "event": (lambda v, n, lim, now: _choice(v, n, (PROGRESS,)), True),
                       "time": (_F_TIME, True), "source": (_F_TEXT, False)},
    "ProbeResult": {
        "probe_id": (lambda v, n, lim, now: _id(validate_action_id, v, n), True), "probe_type": (_F_TEXT, True),
        "start": (_F_TIME, True), "end": (_F_TIME, True), "runtime_s": (_F_NONNEG, True),
        "node": (_F_NODE_OR_EMPTY, False), "v": (_F_VERSION, False)},
    "NodePrediction": {
        "node": (_F_NODE_ID, True), "time": (_F_TIME, True), "model": (_F_TEXT, True), "model_version": (_F_TEXT, True),
        "failure_probability": (_F_PROB, True), "warn": (lambda v, n, lim, now: _bool(v, n), True),
        "lead_minutes": (_F_NONNEG, True), "network_probabilities": (_c(_probabilities), False),
        "vote": (_F_TEXT, False), "sample_time": (_F_TIME, False), "ingest_time": (_F_TIME, False),
        "detail": (_c(_finite_json), False),
        "mem_usage_percent": (lambda v, n, lim, now: _number(v, n, lim, 0.0, 100.0), False), "v": (_F_VERSION, False)},
    "Action": {
        "action_id": (_F_ACTION, True), "kind": (lambda v, n, lim, now: _choice(v, n, ACTION_KINDS), True),
        "source": (lambda v, n, lim, now: _check(_SOURCE, v, n, "source"), True),
        "reason": (_c(_finite_json), True), "time": (_F_TIME, True), "job_id": (_F_JOB_ID, False),
        "nodes": (_c(_nodes), False), "deadline": (_F_DEADLINE, False), "trigger_time": (_F_TIME, False),
        "v": (_F_VERSION, False)},
    "ActionAck": {
        "action_id": (_F_ACTION, True), "status": (lambda v, n, lim, now: _choice(v, n, ACK_STATUSES), True),
        "adapter": (_F_TEXT, True), "time": (_F_TIME, True),
        "kind": (lambda v, n, lim, now: v if v == "" else _choice(v, n, ACTION_KINDS), False),
        "job_id": (_F_JOB_ID, False), "nodes": (_c(_nodes), False), "detail": (_F_LONG_TEXT, False),
        "output": (_F_LONG_TEXT, False), "v": (_F_VERSION, False)},
    # ``internal.cluster`` (streams/cluster_view.py): a node's first sample time, or its warning episode; checked
    # as ``ClusterUpdate``, which is one of these three by its fields
    "SpareClaim": {"node": (_F_NODE_ID, True), "claimed_from": (_F_TIME, True), "claimed_until": (_F_DEADLINE, True),
                   "v": (_F_VERSION, False)},
    "NodeFirstSeen": {"node": (_F_NODE_ID, True), "first": (_F_TIME, True), "v": (_F_VERSION, False)},
    "WarningEpisode": {"node": (_F_NODE_ID, True), "first_warn": (_F_TIME, True), "last_warn": (_F_TIME, True),
                       "v": (_F_VERSION, False)},
    # raw envelopes (connectors.ipmi / connectors.sacct); decoded samples are checked again as canonical records
    "ipmi": {
        "format": (_F_TEXT, True), "text": (_F_LONG_TEXT, True), "host": (_F_NODE_ID, False), "time": (_F_TIME, False),
        "source": (_F_TEXT, False), "default_host": (_F_NODE_ID, False)},  # node of Telegraf lines without tags
    "slurm": {
        "format": (_F_TEXT, True), "header": (_F_LONG_TEXT, True), "line": (_F_LONG_TEXT, True),
        "event": (lambda v, n, lim, now: _choice(v, n, JOB_EVENTS), True), "time": (_F_TIME, True),
        "source": (_F_TEXT, False), "script": (_F_LONG_TEXT, False)},
    # a node's Slurm state change (connectors.slurm_events.event_envelope): checked as this when its format says so
    "slurm-event": {
        "format": (_F_TEXT, True), "node": (_F_NODE_ID, True), "state": (_F_TEXT, True), "time": (_F_TIME, True),
        "end": (_F_TIME, False), "reason": (_F_TEXT, False), "user": (_F_TEXT, False), "source": (_F_TEXT, False)},
}
RECORD_KINDS = tuple(_SCHEMAS) + ("ldms", "ClusterUpdate")


def check_record(kind: str, data: Any, limits: DoorLimits, now: float | None = None) -> dict:
    """Check one decoded record at the door; return it with numbers as floats.

    ``kind`` is a canonical record name (``NodeSample``, ``NodeSamples`` — a batch whose
    items the caller checks as ``NodeSample`` —, ``JobEvent``, ``ProbeResult``,
    ``NodePrediction``, ``Action``, ``ActionAck``, ``ClusterUpdate`` — an ``internal.cluster``
    record, ``NodeFirstSeen``, ``WarningEpisode`` or ``SpareClaim``) or a raw input (``ipmi`` / ``slurm``
    envelope, ``ldms`` row).  Checks types, finite and bounded values, times (not before
    ``limits.epoch``, at most ``limits.max_skew_s`` ahead of ``now``, the wall clock by
    default) and ids with the adapter's rules; unknown fields are refused.  Raises
    ``ValidationError`` with ``kind``/``reason`` for the dead letter.
    """
    now = time.time() if now is None else now
    if not isinstance(data, dict):
        raise _type_error(kind, data, "a JSON object")
    if kind == "ldms":
        return data if _plain_ldms_row(data, limits, now) else _check_ldms_row(data, limits, now)
    if kind == "NodeSample":
        sample = _plain_sample(data, limits, now)
        if sample is not None:
            return sample
    if data.get("event") == PROGRESS and kind in _PROGRESS_KINDS:
        kind = _PROGRESS_KINDS[kind]
    elif kind == "JobEvent" and data.get("event") == NODE_STATE:
        kind = "JobNodeState"
    elif kind == "slurm" and data.get("format") == SLURM_EVENT_FORMAT:
        kind = "slurm-event"
    elif kind == "ClusterUpdate":
        kind = ("NodeFirstSeen" if "first" in data else "SpareClaim" if "claimed_from" in data
                else "WarningEpisode")
    return _check_schema(kind, data, limits, now)


_PROGRESS_KINDS = {"JobEvent": "JobProgress", "slurm": "slurm-progress"}


def _check_schema(kind: str, data: dict, limits: DoorLimits, now: float) -> dict:
    """The full field-by-field check of a canonical record or raw envelope."""
    schema = _SCHEMAS.get(kind)
    if schema is None:
        raise ValueError(f"unknown record kind {kind!r} (known: {', '.join(RECORD_KINDS)})")
    unknown = data.keys() - schema.keys()
    if unknown:
        name = sorted(map(str, unknown))[0]
        raise ValidationError(name[:64], f"is not a field of {kind}", "unknown_field")
    out = {}
    for name, (check, required) in schema.items():
        if name not in data or (data[name] is None and not required):
            if required:
                raise ValidationError(name, f"a {kind} needs this field", "missing_field")
            continue
        out[name] = check(data[name], name, limits, now)
    if kind == "ProbeResult" and out["end"] < out["start"]:
        raise ValidationError("end", f"{out['end']} is before start {out['start']}", "bad_time")
    if kind == "WarningEpisode" and out["last_warn"] < out["first_warn"]:
        raise ValidationError("last_warn", f"{out['last_warn']} is before first_warn {out['first_warn']}", "bad_time")
    return out


# -- fast paths: the common record shapes, accepted with the same result as the full check -------------
# They only ever say "certainly valid"; on any doubt the full check runs and decides (and names the fault),
# so the door refuses exactly what it refused before.

@lru_cache(maxsize=1024)  # bounded: a flood of odd shapes costs cache misses, not memory
def _ldms_shape(keys: tuple) -> tuple[str, str, tuple[str, ...], tuple[str, ...]] | None:
    """(producer column, time column, metric columns, other meta columns) of a row shape with valid names."""
    if not all(type(k) is str and _METRIC_NAME.fullmatch(k) for k in keys):
        return None
    producer = next((k for k in LDMS_PRODUCER_KEYS if k in keys), None)
    when = next((k for k in LDMS_TIME_KEYS if k in keys), None)
    if producer is None or when is None:
        return None
    return (producer, when, tuple(k for k in keys if k not in LDMS_META),
            tuple(k for k in keys if k in LDMS_META and k not in (producer, when)))


def _plain_ldms_row(row: dict, limits: DoorLimits, now: float) -> bool:
    """True when ``row`` certainly passes :func:`_check_ldms_row`: valid names and producer, a time in
    bounds, numeric or null metrics within ±2^64 (at least one), numeric or null meta columns."""
    shape = _ldms_shape(tuple(row)) if len(row) <= limits.max_list else None
    if shape is None:
        return False
    producer, when, metric_cols, meta_cols = shape
    node, t = row[producer], row[when]
    if type(node) is not str or _NODE.fullmatch(node) is None:
        return False
    if type(t) not in _NUMBER_TYPES or not limits.epoch <= t <= now + limits.max_skew_s:
        return False
    if not all(v is None or type(v) in _NUMBER_TYPES for v in map(row.__getitem__, meta_cols)):
        return False
    seen = False
    for v in map(row.__getitem__, metric_cols):
        if v is None:
            continue
        if type(v) not in _NUMBER_TYPES or not -RAW_COUNTER_BOUND <= v <= RAW_COUNTER_BOUND:
            return False  # text labels, NaN, huge values: the full check decides
        seen = True
    return seen


@lru_cache(maxsize=1024)
def _metric_names(keys: tuple) -> bool:
    return all(type(k) is str and _METRIC_NAME.fullmatch(k) is not None for k in keys)


_SAMPLE_KEYS = frozenset(_SCHEMAS["NodeSample"])


def _plain_time(t: Any, limits: DoorLimits, now: float) -> bool:
    return type(t) in _NUMBER_TYPES and limits.epoch <= t <= now + limits.max_skew_s


def _plain_sample(data: dict, limits: DoorLimits, now: float) -> dict | None:
    """The checked ``NodeSample`` when ``data`` certainly passes the full check (same dict, same order), else None."""
    if not data.keys() <= _SAMPLE_KEYS:
        return None
    node, t, source, values = data.get("node"), data.get("time"), data.get("source"), data.get("values")
    if type(node) is not str or _NODE.fullmatch(node) is None or not _plain_time(t, limits, now):
        return None
    if type(source) is not str or len(source) > limits.max_text or _CONTROL.search(source):
        return None
    if type(values) is not dict or not values or len(values) > limits.max_list or not _metric_names(tuple(values)):
        return None
    bound = limits.max_abs_value
    if not all(type(v) in _NUMBER_TYPES and -bound <= v <= bound for v in values.values()):
        return None
    out = {"node": node, "time": float(t), "source": source, "values": {k: float(v) for k, v in values.items()}}
    job, ingested, version = data.get("job_id"), data.get("ingest_time"), data.get("v")
    if job is not None:
        if type(job) is not str or _JOB_ID.fullmatch(job) is None:
            return None
        out["job_id"] = job
    if ingested is not None:
        if not _plain_time(ingested, limits, now):
            return None
        out["ingest_time"] = float(ingested)
    if version is not None:
        if type(version) is not int or version != 1:
            return None
        out["v"] = version
    return out


def _check_ldms_row(row: dict, limits: DoorLimits, now: float) -> dict:
    """An LDMS row: producer id, time, numeric metrics (null/NaN = missing, not all missing), text labels."""
    producer = next((k for k in LDMS_PRODUCER_KEYS if k in row), None)
    if producer is None:
        raise ValidationError("ProducerName", f"an LDMS row needs its producer ({', '.join(LDMS_PRODUCER_KEYS)})",
                              "missing_field")
    _id(validate_node, row[producer], producer)
    when = next((k for k in LDMS_TIME_KEYS if k in row), None)
    if when is None:
        raise ValidationError("timestamp", "an LDMS row needs a timestamp", "missing_field")
    _time(row[when], when, limits, now)
    if len(row) > limits.max_list:
        raise ValidationError("row", f"{len(row)} columns exceed the limit of {limits.max_list}", "too_large")
    names, numbers = [], []
    for k, v in row.items():
        if not isinstance(k, str) or _METRIC_NAME.fullmatch(k) is None:
            raise ValidationError(str(k)[:64], "is not a column name", "bad_id")
        if isinstance(v, str):  # labels such as dev_name, instance, job ids as text
            _text(v, k, limits)
        elif v is not None and type(v) not in _NUMBER_TYPES:
            raise _type_error(k, v, "a number, a string or null")
        elif k not in LDMS_META:
            names.append(k)
            numbers.append(math.nan if v is None else v)
    try:
        arr = np.array(numbers, dtype=float)
    except OverflowError:  # an integer beyond the float range: name it (Python ints compare exactly)
        bad = next(k for k, v in zip(names, numbers) if type(v) is int and abs(v) > RAW_COUNTER_BOUND)
        raise ValidationError(bad, f"{_show(row[bad])} is beyond ±2^64", "out_of_range") from None
    finite = np.isfinite(arr)
    if not finite.any():
        raise ValidationError("row", "every metric value is missing or not finite", "no_values")
    too_big = finite & (np.abs(np.where(finite, arr, 0.0)) > RAW_COUNTER_BOUND)
    if too_big.any():
        # why: the dead letter names the column and the value that failed, not some other column's
        bad = names[int(np.argmax(too_big))]
        raise ValidationError(bad, f"{row[bad]:g} is beyond ±2^64", "out_of_range")
    return row


def check_not_ahead(t: float, watermark: float | None, limits: DoorLimits, name: str = "time") -> float:
    """Refuse a time more than ``limits.max_skew_s`` ahead of a node's watermark (event time).

    >>> check_not_ahead(1000.0, 900.0, DoorLimits(max_skew_s=300.0))
    1000.0
    """
    if watermark is not None and t > watermark + limits.max_skew_s:
        raise ValidationError(name, f"{t:.15g} is {t - watermark:.6g} s ahead of the node's watermark (limit "
                              f"{limits.max_skew_s:g} s)", "bad_time")
    return t


def require_samples(samples: list, what: str) -> list:
    """A decoded raw record must give at least one sample (an envelope of empty readings is refused).

    >>> try:
    ...     require_samples([], "IPMI envelope")
    ... except ValidationError as err:
    ...     print(err.kind, err.reason)
    no_values values: IPMI envelope has no usable reading
    """
    if not samples:
        raise ValidationError("values", f"{what} has no usable reading", "no_values")
    return samples


class NodeInventory:
    """Which node ids may enter worker state, on whose word: bounded, so fake ids cannot grow it,
    and not first-come, first-served, so fake ids cannot crowd real nodes out.

    A node is admitted on one of three words, in this order of trust:

    1. **configured** (``door.nodes``, a hostlist): then only those nodes are admitted, from
       any topic, and nothing else is ever learned.
    2. **named by Slurm**: a job record (``JobEvent.nodes`` on the jobs topic, from the Slurm
       poller or a sacct envelope; :meth:`name`) names the node.  From then on it is admitted,
       whatever the sample topics carried before; at most ``max_nodes`` nodes are held on this
       word (a name beyond that is counted in ``unnamed`` and treated as a sample-only name).
    3. **quarantined**: a name seen only on a sample (or prediction) topic.  It is admitted and
       processed (a site without job records still gets predictions) while fewer than
       ``max_nodes`` names are quarantined; a further sample-only name is refused (counted in
       ``refused``; the caller dead-letters it ``unknown_node``, the reason says to configure
       ``door.nodes``).  Nothing is evicted: an admitted name stays admitted.  A quarantined
       name that Slurm names later leaves the quarantine and frees its place.

    Every name must also match ``pattern`` (the adapter's node rule by default).  The rule reads
    no clock: whether a sample is admitted depends only on which names were configured, which
    names job records had named and how many sample-only names were held when the worker read
    it.  So a configured or Slurm-named node is admitted whatever the order of topics and event
    times, and below the quarantine bound every valid name is; only beyond it, a node's samples
    read before the first job record naming it are refused (from that record on they are not).
    The worker holds at most ``2 × max_nodes`` nodes without a hostlist.  ``admit(node,
    learn=False)`` (``internal.cluster``) admits a valid name but adds nothing.

    Example
    -------
    >>> inv = NodeInventory(max_nodes=2)
    >>> [inv.admit(n) for n in ("n1", "n2", "n1", "n3", "n1;x")]
    [True, True, True, False, False]
    >>> len(inv), inv.refused, sorted(inv.quarantined)
    (2, 2, ['n1', 'n2'])
    >>> inv.name(["n3", "n1"]), inv.admit("n3"), sorted(inv.quarantined), sorted(inv.named)
    (2, True, ['n2'], ['n1', 'n3'])
    >>> inv.admit("n4"), inv.admit("n5")  # n1 left the quarantine: one place free
    (True, False)
    >>> NodeInventory(hosts="n[1-2]").admit("n3")
    False
    """

    def __init__(self, hosts: str | Iterable[str] = "", pattern: str = "", max_nodes: int = 4096):
        names = expand_hostlist(hosts) if isinstance(hosts, str) and hosts else list(hosts or ())
        self.fixed = bool(names)
        self.configured: frozenset[str] = frozenset(names)
        self.known: set[str] = set(names)  # every admitted node: configured, named or quarantined
        self.named: set[str] = set()  # named by a Slurm job record (not configured)
        self.quarantined: set[str] = set()  # seen only on sample topics
        self.pattern = re.compile(pattern) if pattern else _NODE
        self.max_nodes = max(int(max_nodes), len(self.known))
        self.refused = 0  # admit() calls refused
        self.unnamed = 0  # names job records gave beyond the bound of max_nodes named nodes

    @classmethod
    def from_settings(cls, door: Any) -> "NodeInventory":
        """From ``Settings().door`` (``nodes``, ``node_pattern``, ``max_nodes``)."""
        return cls(door.nodes, door.node_pattern, door.max_nodes)

    def name(self, nodes: Iterable[Any]) -> int:
        """Slurm named ``nodes`` (a job record's node list): admit them from now on, outside the quarantine
        bound; returns how many were new.  A configured inventory learns nothing."""
        if self.fixed:
            return 0
        added = 0
        for node in nodes:
            if node in self.named or not isinstance(node, str) or self.pattern.fullmatch(node) is None:
                continue
            if len(self.named) >= self.max_nodes:
                self.unnamed += 1
                continue
            self.named.add(node)
            self.quarantined.discard(node)
            self.known.add(node)
            added += 1
        return added

    def admit(self, node: Any, learn: bool = True) -> bool:
        """True when ``node`` is (or may become) part of the inventory.

        A node not admitted yet enters the quarantine while it has room (see the class).
        ``learn=False`` admits a node a configured inventory lists, or, without one, a name
        the node-name rule accepts, but adds nothing: what such a record says of the node
        must not claim a place in the bounded inventory (``internal.cluster``).
        """
        if node in self.known:
            return True
        if not self.fixed and isinstance(node, str) and self.pattern.fullmatch(node) is not None:
            if not learn:
                return True
            if len(self.quarantined) < self.max_nodes:
                self.quarantined.add(node)
                self.known.add(node)
                return True
        self.refused += 1
        return False

    def reason(self, node: Any) -> str:
        """Why ``node`` was refused (for the dead letter)."""
        if self.fixed:
            return f"node {_show(node)} is not in the configured inventory"
        if not isinstance(node, str) or self.pattern.fullmatch(node) is None:
            return f"node {_show(node)} does not match the node-name rule {self.pattern.pattern!r}"
        return (f"node {_show(node)} is named by no Slurm job record and the quarantine of names seen only on "
                f"sample topics is full ({self.max_nodes} nodes): set door.nodes to the site's hostlist, or "
                "publish the Slurm job records naming it")

    def __contains__(self, node: object) -> bool:
        return node in self.known

    def __len__(self) -> int:
        return len(self.known)
