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

import zlib
from typing import Any, Callable, Iterable

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


class PartitionDeltaLog:
    """Many entities' state (the node grids) as one delta record per input partition and batch, with a
    snapshot per entity now and then.

    A worker with thousands of nodes per partition pays per changelog record, not per byte: one record per
    node touched by a batch was the biggest part of a 4,000-node worker's time (docs/operations.md,
    "Sizing").  Here a batch ``k`` of partition ``p`` writes, in this order:

    * its deltas, ``<prefix><p>@<k>:<i>`` = ``{"entities": {entity: delta}}``, ``part_size`` entities per
      record (part ``0`` always, even empty, so the newest batch number is always in the table);
    * the whole state, under ``<entity>`` with ``batch`` = k, of each entity touched that has
      ``every/2 … every − 1`` deltas since its snapshot (staggered by the entity's name, so entities
      touched alike are not all written in one batch), and of each entity, touched or not, whose oldest
      such delta is ``max_age − 1`` batches old (a node gone quiet);
    * a tombstone for each earlier record whose entities all have a newer snapshot (or that is empty), and
      for each record ``max_age`` or more batches old.

    So an entity is written whole about as often as with one record per entity and batch
    (:class:`DeltaLog`), and the table keeps about as much.  Each entity's entry holds what it needs on
    its own (the grid's input offsets), so a kill between two records loses nothing: an entry not
    written is redelivered input.  Loading an entity takes its snapshot and its entries in the later
    batches, in order.  A snapshot without ``batch`` (:class:`DeltaLog`'s format) is not read: the
    entity starts empty.

    Example
    -------
    >>> from types import SimpleNamespace
    >>> sent = []
    >>> table = SimpleNamespace(data={}, send_changelog=lambda p, k, v, **kw: sent.append((k, v)))
    >>> log = PartitionDeltaLog(table, "~g~", every=4, max_age=6)
    >>> state = {"a": 0, "b": 0}
    >>> for batch in range(8):
    ...     state["a"] += 1
    ...     log.write(0, ["a", "b"] if batch < 1 else ["a"],
    ...               lambda e, whole: {"n": state[e], "whole": whole})
    >>> [k for k, v in sent if v is not None][:3]      # one record per batch while no snapshot is due
    ['~g~0@1:0', '~g~0@2:0', '~g~0@3:0']
    >>> sorted(k for k in table.data if k.startswith("~g~"))   # the records a snapshot has not absorbed
    ['~g~0@7:0', '~g~0@8:0']
    >>> reloaded = PartitionDeltaLog(table, "~g~")
    >>> reloaded.load(0, "a")[1][-1]["n"], reloaded.load(0, "b")   # b: one delta, snapshotted before it went
    (8, ({'n': 0, 'whole': True, 'batch': 6}, []))
    """

    def __init__(self, table: Any, prefix: str, every: int | None = None, max_age: int | None = None,
                 part_size: int = 256) -> None:
        self.table, self.prefix, self.every, self.part_size = table, prefix, every, part_size
        self.max_age = max_age
        self.batches: dict[int, dict[int, list[int]]] = {}  # partition → batch → its parts in the table
        self.head: dict[int, int] = {}  # partition → newest batch written
        # partition → entity → (batch, part) of each of its deltas since its snapshot, oldest first
        self.entries: dict[int, dict[str, list[tuple[int, int]]]] = {}
        self.live: dict[int, dict[tuple[int, int], int]] = {}  # partition → record → its entries not absorbed

    def key(self, partition: int, batch: int, part: int) -> str:
        return f"{self.prefix}{partition}@{batch}:{part}"

    def snapshot(self, entity: str) -> dict | None:
        state = self.table.data.get(entity)
        return state if isinstance(state, dict) and "batch" in state else None

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
            since: dict[str, int] = {}
            for batch in sorted(batches):
                for part in sorted(batches[batch]):
                    live[batch, part] = 0
                    for entity in self.table.data[self.key(partition, batch, part)]["entities"]:
                        if entity not in since:
                            since[entity] = int((self.snapshot(entity) or {}).get("batch", 0))
                        if batch > since[entity]:
                            entries.setdefault(entity, []).append((batch, part))
                            live[batch, part] += 1
        return batches

    def load(self, partition: int, entity: str) -> tuple[dict | None, list[dict]]:
        """The entity's snapshot (``None`` if none) and its deltas to apply on it, in order."""
        self._index(partition)
        return self.snapshot(entity), [self.table.data[self.key(partition, batch, part)]["entities"][entity]
                                       for batch, part in self.entries[partition].get(entity, ())]

    def due(self, entity: str, count: int) -> bool:
        """A snapshot of ``entity`` is due once it has ``every/2 … every − 1`` deltas since its last one."""
        half = max(1, (self.every or SNAPSHOT_EVERY) // 2)
        return count >= half + zlib.crc32(entity.encode()) % half

    def write(self, partition: int, entities: Iterable[str], record: Callable[[str, bool], dict]) -> None:
        """Write batch ``k`` of ``partition``: ``record(entity, False)``, the delta since the entity's last
        record, for each entity touched, ``record(entity, True)``, its whole state, for each entity whose
        snapshot is due (called once per entity either way)."""
        batches = self._index(partition)
        entries, live = self.entries[partition], self.live[partition]
        batch = self.head[partition] = self.head[partition] + 1
        max_age = self.max_age or 256 * (self.every or SNAPSHOT_EVERY)
        touched = list(dict.fromkeys(entities))
        whole = {e for e in touched if self.due(e, len(entries.get(e, ())) + 1)}
        for entity, mine in entries.items():  # oldest first (an entity enters at its first delta after a snapshot)
            if batch - mine[0][0] < max_age - 1:
                break
            whole.add(entity)
        deltas = {e: record(e, False) for e in touched if e not in whole}
        names = list(deltas)
        chunks = [names[i:i + self.part_size] for i in range(0, len(names), self.part_size)] or [[]]
        for part, chunk in enumerate(chunks):  # deltas first: a snapshot's batch is always in the table
            self.store(partition, self.key(partition, batch, part), {"entities": {e: deltas[e] for e in chunk}})
            live[batch, part] = len(chunk)
            for entity in chunk:
                entries.setdefault(entity, []).append((batch, part))
        batches[batch] = list(range(len(chunks)))
        gone = []
        for entity in sorted(whole):
            self.store(partition, entity, {**record(entity, True), "batch": batch})
            for where in entries.pop(entity, ()):
                live[where] -= 1
                if live[where] == 0:
                    gone.append(where)
        if live.get((batch - 1, 0)) == 0:  # the last batch wrote no delta: its empty record held the number only
            gone.append((batch - 1, 0))
        gone += [(old, part) for old in batches if old <= batch - max_age for part in batches[old]]
        for old, part in dict.fromkeys(gone):
            parts = batches.get(old, [])
            if part in parts:
                parts.remove(part)
                if not parts:
                    del batches[old]
                del live[old, part]
                self.table.data.pop(self.key(partition, old, part), None)
                self.table.send_changelog(partition, self.key(partition, old, part), None, value_serializer="raw")

    def forget(self) -> None:
        """A rebalance: the partitions are read again (maybe as another worker left them)."""
        self.batches.clear()
        self.head.clear()
        self.entries.clear()
        self.live.clear()

    def store(self, partition: int, key: str, value: dict) -> None:
        self.table.data[key] = value
        self.table.send_changelog(partition, key, value)
