"""Strict patterns for every value that reaches a scheduler command.

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
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

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
    """A value that must not reach a scheduler command; ``field`` names where it was."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "...'"


def _check(pattern: re.Pattern[str], value: Any, field_name: str, what: str) -> str:
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        raise ValidationError(field_name, f"{_show(value)} is not a valid {what}")
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
