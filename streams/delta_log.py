"""State in a changelogged table as snapshots plus per-batch deltas.

An agent that writes its whole state after every batch pays for what the state holds,
not for what the batch changed: a node grid holds hundreds of open steps while one
source is far behind another, the IO windows thousands of open seconds while a quiet
node holds their watermark.  :class:`DeltaLog` writes, per entity (a node, a file
system) and batch, one record: usually a delta under ``<key>@<k>`` (k = 1, 2, …), every
``every`` records the whole state under ``<key>`` with ``seq`` k, after which the deltas
it absorbed are deleted (oldest first).  Each record is one entity's state as of one
batch (with the input offsets it holds), so a kill between two records loses nothing;
loading takes the snapshot and the deltas ``seq+1, seq+2…`` that exist.  Keys must not
contain ``@`` (node names and file-system names cannot).

Example
-------
>>> from types import SimpleNamespace
>>> sent = []
>>> table = SimpleNamespace(data={}, send_changelog=lambda p, k, v, **kw: sent.append((k, v)))
>>> log = DeltaLog(table, every=3)
>>> for n in range(1, 5):
...     log.write(0, "n1", lambda whole: {"x": "all", "upto": n} if whole else {"x": n})
>>> [k for k, _ in sent]      # two deltas, a snapshot that deletes them, one delta
['n1@1', 'n1@2', 'n1', 'n1@1', 'n1@2', 'n1@4']
>>> DeltaLog(table).load("n1")
({'x': 'all', 'upto': 3, 'seq': 3}, [{'x': 4}])
"""
from __future__ import annotations

from typing import Any, Callable

SNAPSHOT_EVERY = 64  # deltas per entity between snapshots: a restart applies at most this many


def delta_key(key: str, k: int) -> str:
    return f"{key}@{k}"


class DeltaLog:
    """Snapshots and deltas of keyed state in a Faust table (``table.data`` + ``send_changelog``)."""

    def __init__(self, table: Any, every: int | None = None) -> None:
        self.table = table
        self.every = every
        self.seq: dict[str, int] = {}  # key → number of its newest record (delta or snapshot)
        self.base: dict[str, int] = {}  # key → seq of its newest snapshot
        self.stale: dict[str, list[int]] = {}  # key → deltas a snapshot absorbed that a kill left undeleted

    def load(self, key: str) -> tuple[dict | None, list[dict]]:
        """The snapshot (``None`` if none) and the deltas to apply on it, in order."""
        data = self.table.data
        snapshot = data.get(key)
        k = base = int((snapshot or {}).get("seq", 0))
        deltas = []
        while (delta := data.get(delta_key(key, k + 1))) is not None:
            deltas.append(delta)
            k += 1
        stale, j = [], base - 1
        while j > 0 and delta_key(key, j) in data:
            stale.append(j)
            j -= 1
        self.seq[key], self.base[key], self.stale[key] = k, base, stale
        return snapshot, deltas

    def write(self, partition: int, key: str, state: Callable[[bool], dict], whole: bool = False) -> None:
        """Write ``key``'s next record to ``partition``: ``state(False)``, the delta since the last
        record, or when a snapshot is due (or ``whole``) ``state(True)``, the whole state (called once
        either way)."""
        every = self.every or SNAPSHOT_EVERY
        base, k = self.base.get(key, 0), self.seq.get(key, 0) + 1
        self.seq[key] = k
        if k - base < every and not whole:
            self.store(partition, delta_key(key, k), state(False))
            return
        self.store(partition, key, {**state(True), "seq": k})
        for j in [*range(base + 1, k), *self.stale.get(key, [])]:
            self.table.data.pop(delta_key(key, j), None)
            self.table.send_changelog(partition, delta_key(key, j), None, value_serializer="raw")
        self.base[key], self.stale[key] = k, []

    def forget(self) -> None:
        """A rebalance: the entities are loaded again (maybe as another worker left them)."""
        self.seq.clear()
        self.base.clear()
        self.stale.clear()

    def store(self, partition: int, key: str, value: dict) -> None:
        """Write one whole table entry (no delta chain) to ``partition``."""
        self.table.data[key] = value
        self.table.send_changelog(partition, key, value)
