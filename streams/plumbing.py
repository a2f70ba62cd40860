"""The one door and the one outlet every agent uses: decode, publish, dead-letter, guard.

* :meth:`Plumbing.decode` — bounded JSON (``connectors.validation.safe_loads``), then the
  record's schema, types, finite values, time bounds and id syntax
  (``connectors.validation.check_record``) and the node inventory, before anything
  touches state; a refused record becomes a dead letter and ``None`` comes back.
* :meth:`Plumbing.publish` — JSON bytes to a topic without waiting (the producer's own
  task flushes); canonical records travel as plain dicts, serialised once.
* :meth:`Plumbing.dead_letter` — a ``DeadLetter`` record with source, kind, reason,
  payload and offset; counted in ``/metrics``.
* :meth:`Plumbing.guard` — wraps the handling of one record: any exception (a
  ``RecursionError``, a ``TypeError``, anything) becomes a dead letter of kind
  ``internal_error`` (``late``, ``bad_*`` for the known ones) and the batch goes on.

With ``outbox`` set, nothing is sent: ``(topic, key, value)`` tuples are appended to
it — Faust's test context uses this to see what an agent published.

Example
-------
>>> from hpcguard.connectors.validation import DoorLimits
>>> box = []
>>> p = Plumbing(dlq="dlq", limits=DoorLimits(), outbox=box)
>>> p.decode("NodeSample", b'{"node": "n1", "time": 1.7e9, "source": "ipmi", "values": {"cpu_temp": 40}}', "s")
{'node': 'n1', 'time': 1700000000.0, 'source': 'ipmi', 'values': {'cpu_temp': 40.0}}
>>> p.decode("NodeSample", b'{"node": "n1;rm", "time": 1.7e9}', "s") is None
True
>>> with p.guard("s", b"x", offset=7):
...     raise RecursionError("deep")
>>> [(v["error_kind"], v["offset"]) for _, _, v in box]
[('bad_id', None), ('internal_error', 7)]
"""
from __future__ import annotations

import json
import logging
import time
from contextlib import contextmanager
from typing import Any, Iterator

from hpcguard.connectors.validation import DoorLimits, NodeInventory, ValidationError, check_record, safe_loads
from hpcguard.streams import metrics

log = logging.getLogger("hpcguard.worker")

#: canonical record fields that name nodes: checked against the inventory
_NODE_FIELDS = ("node",)


class Plumbing:
    """Decode, publish, dead-letter and guard for every agent of one worker."""

    def __init__(self, dlq: Any, limits: DoorLimits, inventory: NodeInventory | None = None,
                 outbox: list | None = None) -> None:
        self.dlq = dlq
        self.limits = limits
        self.inventory = inventory
        self.outbox = outbox

    # -- outlet ---------------------------------------------------------------------
    def publish(self, topic: Any, key: str | None, value: dict) -> None:
        """Send ``value`` as JSON to ``topic`` (a Faust topic or, with an outbox, any name)."""
        name = topic if isinstance(topic, str) else topic.get_topic_name()
        if self.outbox is not None:
            self.outbox.append((name, key, value))
        else:
            topic.send_soon(key=None if key is None else key.encode(),
                            value=json.dumps(value, separators=(",", ":")).encode())
        metrics.RECORDS_OUT.labels(name).inc()

    def dead_letter(self, source: str, error_kind: str, reason: str, payload: Any, offset: int | None = None,
                    line: int | None = None) -> None:
        """Publish a ``DeadLetter``: what was refused, from where, and why."""
        if isinstance(payload, (bytes, bytearray)):
            payload = bytes(payload[:65536]).decode("utf-8", "replace")
        elif not isinstance(payload, str):
            payload = json.dumps(payload, default=str)
        metrics.DEAD_LETTERS.labels(source, error_kind).inc()
        self.publish(self.dlq, source, {"source": source, "reason": reason[:4096], "error_kind": error_kind,
                                        "payload": payload[:65536], "time": time.time(), "offset": offset,
                                        "line": line, "v": 1})

    # -- door -----------------------------------------------------------------------
    def loads(self, raw: bytes | str) -> Any:
        """Bounded JSON (size, depth); raises ``ValidationError``."""
        return safe_loads(raw, max_bytes=self.limits.max_bytes, max_depth=self.limits.max_depth)

    def check(self, kind: str, data: Any) -> dict:
        """Schema, types, bounds and ids of a decoded record, and the node inventory."""
        record = check_record(kind, data, self.limits)
        for f in _NODE_FIELDS:
            node = record.get(f)
            if node is not None and self.inventory is not None and not self.inventory.admit(node):
                raise ValidationError(f, self.inventory.reason(node), "unknown_node")
        return record

    def decode(self, kind: str, raw: bytes | str, source: str, offset: int | None = None) -> dict | None:
        """A checked record of ``kind`` (``NodeSample``, ``JobEvent``...), or ``None`` after a dead letter."""
        try:
            return self.check(kind, self.loads(raw))
        except ValidationError as exc:
            self.dead_letter(source, exc.kind, f"not a valid {kind}: {exc.reason}", raw, offset=offset)
            return None

    @contextmanager
    def guard(self, source: str, raw: Any, offset: int | None = None) -> Iterator[None]:
        """Turn any exception while handling one record into a dead letter; the caller goes on."""
        try:
            yield
        except (ValidationError, ValueError) as exc:  # ParseError, LateSample and ValidationError carry a kind
            kind = getattr(exc, "kind", "bad_value")
            self.dead_letter(source, kind, getattr(exc, "reason", None) or str(exc), raw, offset=offset,
                             line=getattr(exc, "line", None))
        except Exception as exc:  # noqa: BLE001 — one record must never stop the worker
            log.warning("record from %s at offset %s failed: %r", source, offset, exc)
            self.dead_letter(source, "internal_error", f"{type(exc).__name__}: {exc}"[:1000], raw, offset=offset)
