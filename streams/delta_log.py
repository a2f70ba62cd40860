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

import json
import zlib
from typing import Any, Callable, Iterable

SNAPSHOT_EVERY = 64  # deltas per entity between snapshots: a restart applies at most this many
PARTITION_SNAPSHOT_PERIOD = 256  # batches between a node's snapshots (PartitionDeltaLog): what a record lives at most
PART_BYTES = 256 * 1024  # a partition's delta record stays far below Kafka's 1 MB record default


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
            self.delete(partition, delta_key(key, j))
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

    def delete(self, partition: int, key: str) -> None:
        """Delete a table entry (a tombstone in ``partition``)."""
        self.table.data.pop(key, None)
        self.table.send_changelog(partition, key, None, value_serializer="raw")


class PartitionDeltaLog:
    """Many entities' state (the node grids) as one delta record per input partition and batch, with a
    snapshot per entity now and then.

    A worker with thousands of nodes per partition pays per changelog record, not per byte: one record per
    node touched by a batch was the biggest part of a 4,000-node worker's time (docs/operations.md,
    "Sizing").  Here a batch ``k`` of partition ``p`` writes, in this order:

    * its deltas, ``<prefix><p>@<k>:<i>`` = ``{"entities": {entity: delta}}``, at most ``part_size``
      entities and ``part_bytes`` of JSON per record (part ``0`` always, even empty, so the newest batch
      number is always in the table);
    * the whole state, under ``<entity>`` with ``batch`` = k, of each entity changed since its last
      snapshot whose turn it is: entity ``e``'s turn comes every ``period`` batches, at
      ``k ≡ −crc32(e) (mod period)``, so about ``1/period`` of the entities are written whole in each
      batch, never all at once;
    * a tombstone for each earlier record whose entities all have a newer snapshot (at the latest
      ``period`` batches after it was written), or that is empty.

    Each entity's entry holds what it needs on its own (the grid's input offsets), so a kill between two
    records loses nothing: an entry not written is redelivered input.  Loading an entity takes its
    snapshot and its entries in the later batches, in order.  A snapshot without ``batch`` (:class:`DeltaLog`'s
    format) is not read: the entity starts empty.

    Example
    -------
    >>> from types import SimpleNamespace
    >>> sent = []
    >>> table = SimpleNamespace(data={}, send_changelog=lambda p, k, v, **kw: sent.append((k, v)))
    >>> log = PartitionDeltaLog(table, "~g~", period=4)
    >>> state = {"a": 0, "b": 0}
    >>> for batch in range(8):
    ...     state["a"] += 1
    ...     log.write(0, ["a", "b"] if batch < 1 else ["a"],
    ...               lambda e, whole: {"n": state[e], "whole": whole})
    >>> [k for k, v in sent if v is not None]      # a record per batch; a's turns are batches 1 and 5, b's 3
    ['~g~0@1:0', 'a', '~g~0@2:0', '~g~0@3:0', 'b', '~g~0@4:0', '~g~0@5:0', 'a', '~g~0@6:0', '~g~0@7:0', '~g~0@8:0']
    >>> sorted(k for k in table.data if k.startswith("~g~"))   # the records a snapshot has not absorbed
    ['~g~0@6:0', '~g~0@7:0', '~g~0@8:0']
    >>> reloaded = PartitionDeltaLog(table, "~g~")
    >>> [d["n"] for d in reloaded.load(0, "a")[1]], reloaded.load(0, "b")
    ([6, 7, 8], ({'n': 0, 'whole': True, 'batch': 3}, []))
    """

    def __init__(self, table: Any, prefix: str, period: int | None = None, part_size: int = 256,
                 part_bytes: int = PART_BYTES) -> None:
        self.table, self.prefix, self.part_size, self.part_bytes = table, prefix, part_size, part_bytes
        self.period = period
        self.batches: dict[int, dict[int, list[int]]] = {}  # partition → batch → its parts in the table
        self.head: dict[int, int] = {}  # partition → newest batch written
        # partition → entity → (batch, part) of each of its deltas since its snapshot, oldest first
        self.entries: dict[int, dict[str, list[tuple[int, int]]]] = {}
        self.live: dict[int, dict[tuple[int, int], int]] = {}  # partition → record → its entries not absorbed
        self.turns: dict[int, dict[int, set[str]]] = {}  # partition → turn → entities with a delta since a snapshot

    def key(self, partition: int, batch: int, part: int) -> str:
        return f"{self.prefix}{partition}@{batch}:{part}"

    def snapshot(self, entity: str) -> dict | None:
        state = self.table.data.get(entity)
        return state if isinstance(state, dict) and "batch" in state else None

    def turn(self, entity: str) -> int:
        return zlib.crc32(entity.encode()) % (self.period or PARTITION_SNAPSHOT_PERIOD)

    def _index(self, partition: int) -> dict[int, list[int]]:
        """The partition's records in the table and each entity's entries a snapshot has not absorbed yet (read
        once after a start or a rebalance)."""
        batches = self.batches.get(partition)
        if batches is None:
            start = f"{self.prefix}{partition}@"
            batches = self.batches[partition] = {}
            for key in list(self.table.data):
                if isinstance(key, str) and key.startswith(start):
                    batch, part = key[len(start):].split(":")
                    batches.setdefault(int(batch), []).append(int(part))
            self.head[partition] = max(batches, default=0)
            entries = self.entries[partition] = {}
            live = self.live[partition] = {}
            turns = self.turns[partition] = {}
            since: dict[str, int] = {}
            for batch in sorted(batches):
                for part in sorted(batches[batch]):
                    live[batch, part] = 0
                    for entity in self.table.data[self.key(partition, batch, part)]["entities"]:
                        if entity not in since:
                            since[entity] = int((self.snapshot(entity) or {}).get("batch", 0))
                        if batch > since[entity]:
                            entries.setdefault(entity, []).append((batch, part))
                            turns.setdefault(self.turn(entity), set()).add(entity)
                            live[batch, part] += 1
            # records a kill left behind after the snapshots that absorbed them (the newest batch keeps the number)
            self._drop(partition, [where for where, n in live.items() if n == 0 and where[0] != self.head[partition]])
        return batches

    def load(self, partition: int, entity: str) -> tuple[dict | None, list[dict]]:
        """The entity's snapshot (``None`` if none) and its deltas to apply on it, in order."""
        self._index(partition)
        return self.snapshot(entity), [self.table.data[self.key(partition, batch, part)]["entities"][entity]
                                       for batch, part in self.entries[partition].get(entity, ())]

    def write(self, partition: int, entities: Iterable[str], record: Callable[[str, bool], dict]) -> None:
        """Write batch ``k`` of ``partition``: ``record(entity, False)``, the delta since the entity's last
        record, for each entity touched, ``record(entity, True)``, its whole state, for each entity whose
        turn it is (called once per entity either way)."""
        batches = self._index(partition)
        entries, live, turns = self.entries[partition], self.live[partition], self.turns[partition]
        batch = self.head[partition] = self.head[partition] + 1
        period = self.period or PARTITION_SNAPSHOT_PERIOD
        touched = list(dict.fromkeys(entities))
        whole = sorted(turns.pop(-batch % period, set()) | {e for e in touched if self.turn(e) == -batch % period})
        deltas = {e: record(e, False) for e in touched if e not in whole}
        chunks: list[list[str]] = [[]]
        size = 0
        for entity, delta in deltas.items():  # parts of at most part_size entities and part_bytes of JSON
            n = len(json.dumps(delta, separators=(",", ":"))) + len(entity) + 4
            if chunks[-1] and (len(chunks[-1]) >= self.part_size or size + n > self.part_bytes):
                chunks.append([])
                size = 0
            chunks[-1].append(entity)
            size += n
        for part, chunk in enumerate(chunks):  # deltas first: a snapshot's batch is always in the table
            self.store(partition, self.key(partition, batch, part), {"entities": {e: deltas[e] for e in chunk}})
            live[batch, part] = len(chunk)
            for entity in chunk:
                entries.setdefault(entity, []).append((batch, part))
                turns.setdefault(self.turn(entity), set()).add(entity)
        batches[batch] = list(range(len(chunks)))
        gone = [(batch - 1, 0)] if live.get((batch - 1, 0)) == 0 else []  # an empty record: it held the number only
        for entity in whole:
            self.store(partition, entity, {**record(entity, True), "batch": batch})
            for where in entries.pop(entity, ()):
                live[where] -= 1
                if live[where] == 0:
                    gone.append(where)
        self._drop(partition, gone)

    def _drop(self, partition: int, records: list[tuple[int, int]]) -> None:
        """Delete the ``(batch, part)`` records (a tombstone each)."""
        batches, live = self.batches[partition], self.live[partition]
        for old, part in records:
            batches[old].remove(part)
            if not batches[old]:
                del batches[old]
            del live[old, part]
            self.delete(partition, self.key(partition, old, part))

    def forget(self) -> None:
        """A rebalance: the partitions are read again (maybe as another worker left them)."""
        for held in (self.batches, self.head, self.entries, self.live, self.turns):
            held.clear()

    store, delete = DeltaLog.store, DeltaLog.delete  # a whole table entry, a tombstone: as the per-entity log
