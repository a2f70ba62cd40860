"""The scheduler adapters' one interface: ``adapter.apply(action) -> ActionAck``.

Its own module, below every adapter: ``connectors.adapters`` (dry-run, command, simulator and
``make_adapter``) and ``connectors.slurm`` both implement it, and ``make_adapter`` builds the
Slurm one, so neither may import the other for the type.

>>> ActionAck("act-1", "skipped", "dry-run").as_dict()["status"]
'skipped'
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Protocol


@dataclass
class ActionAck:
    """What an adapter did with one action: the one ack type, and the ``actions.ack`` record.

    ``status`` is one of ``connectors.validation.ACK_STATUSES``; :meth:`as_dict` is the
    record's JSON fields (``v``: schema version), checked at the door as ``ActionAck``.
    """

    action_id: str
    status: str
    adapter: str
    kind: str = ""
    job_id: str | None = None
    nodes: list[str] = field(default_factory=list)
    detail: str = ""
    output: str = ""
    time: float = field(default_factory=time.time)
    v: int = 1

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class SchedulerAdapter(Protocol):
    name: str

    def apply(self, action: Mapping[str, Any]) -> ActionAck: ...
