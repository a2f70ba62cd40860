"""Scheduler adapters: turn an action into scheduler operations and say what happened.

One small interface: ``adapter.apply(action) -> AckResult``.  ``action`` is a plain
dict with the fields of ``streams.records.Action``.  Adapters never build shell
commands; they validate every id they pass on.

Example
-------
>>> import tempfile, os
>>> log = os.path.join(tempfile.mkdtemp(), "audit.jsonl")
>>> ack = DryRunAdapter(log).apply({"action_id": "act-1", "kind": "checkpoint", "job_id": "42", "nodes": ["n1"]})
>>> ack.status
'skipped'
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Protocol


@dataclass
class AckResult:
    """What an adapter did with one action (``status`` is one of ACK_STATUSES)."""

    action_id: str
    status: str
    adapter: str
    kind: str = ""
    job_id: str | None = None
    nodes: list[str] = field(default_factory=list)
    detail: str = ""
    output: str = ""
    time: float = field(default_factory=time.time)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class SchedulerAdapter(Protocol):
    name: str

    def apply(self, action: Mapping[str, Any]) -> AckResult: ...


class DryRunAdapter:
    """Records every action to a JSONL audit log and changes nothing (``skipped``)."""

    name = "dry-run"

    def __init__(self, audit_log: str):
        self.audit_log = audit_log
        self._lock = threading.Lock()
        parent = os.path.dirname(os.path.abspath(audit_log))
        os.makedirs(parent, exist_ok=True)

    def apply(self, action: Mapping[str, Any]) -> AckResult:
        ack = AckResult(action_id=str(action.get("action_id", "")), status="skipped", adapter=self.name,
                        kind=str(action.get("kind", "")), job_id=action.get("job_id"),
                        nodes=list(action.get("nodes") or []), detail="dry-run: recorded in audit log, not executed")
        with self._lock, open(self.audit_log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"action": dict(action), "ack": ack.as_dict()}, default=str) + "\n")
        return ack
