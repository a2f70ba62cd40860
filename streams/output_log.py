"""Exactly-once outputs across a kill -9, without Kafka transactions (tansu has none).

An agent that keeps changelogged state and publishes records derived from it follows one
order per batch:

1. update its in-memory state (table data, grids);
2. publish the batch's outputs and wait until the broker holds them (:func:`deliver`);
3. write the changed table entries to the changelog, then the input partition's *mark*:
   the end offsets of the output topic's partitions after those outputs
   (:meth:`OutputLog.mark`), in that order to the same changelog partition.

After a kill the table comes back from the changelog as of some batch *k* (a mark is never
newer than the entries written before it), and the input is redelivered from the committed
offsets, which may lie before or after *k*.  (Why :meth:`OutputLog.resume` reads the
partition's changelog itself: Faust's recovery reads up to the end offset tansu lists,
which stops short inside the last record batch, so it can miss the newest entries.)
The agent then

* skips the input records its restored state already holds (it keeps their offsets), and
* reads back what it published after mark *k* (:meth:`OutputLog.resume`, once per input
  partition and assignment) so that it does not publish those records again.

Faust flushes the producer before it commits offsets, so the state never lags the
committed input.  A partition seen for the first time writes its mark (the current end
offsets) and waits for it before any output, so outputs always lie after some mark.

Example (Faust's test context: ``outbox`` set, nothing is read back)
-------
>>> from types import SimpleNamespace
>>> box = []
>>> app = SimpleNamespace(hpc=SimpleNamespace(pipeline=SimpleNamespace(outbox=box), plumbing=SimpleNamespace(
...     publish=lambda topic, key, value: box.append((topic, key, value)))))
>>> import asyncio
>>> asyncio.run(deliver(app, "preds", [("n1", {"node": "n1"})]))
{}
>>> box
[('preds', 'n1', {'node': 'n1'})]
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Mapping

from hpcguard.connectors.kafka import kafka_python_config
from hpcguard.streams import metrics

READ_TIMEOUT_S = 120.0


async def deliver(app: Any, topic: Any, items: list[tuple[str | None, dict]]) -> dict[int, int]:
    """Publish ``(key, record)`` items and wait for the broker; the next offset per partition written.

    With an outbox (tests) or a topic name, the items go through ``plumbing.publish`` and ``{}`` comes back.
    """
    if app.hpc.pipeline.outbox is not None or isinstance(topic, str):
        for key, value in items:
            app.hpc.plumbing.publish(topic, key, value)
        return {}
    futures = [await topic.send(key=None if key is None else key.encode(),
                                value=json.dumps(value, separators=(",", ":")).encode()) for key, value in items]
    ends: dict[int, int] = {}
    for sent in await asyncio.gather(*futures):
        ends[sent.partition] = max(ends.get(sent.partition, 0), sent.offset + 1)
    if items:
        metrics.RECORDS_OUT.labels(topic.get_topic_name()).inc(len(items))
    return ends


def _read(consumer: Any, starts: Mapping[Any, int | None], keep: Any) -> dict[Any, int]:
    """Read each partition from its start (``None``: its listed end) to the end its fetches report.

    Why not ``end_offsets`` alone: tansu answers ListOffsets with the last record batch's base
    offset + 1, so the rest of that batch would go unread; fetch responses carry the true
    high watermark.  ``keep(message)`` sees every record; returns the end offset per partition.
    """
    tps = list(starts)
    listed = consumer.end_offsets(tps)
    consumer.assign(tps)
    for tp, start in starts.items():
        consumer.seek(tp, listed[tp] if start is None else start)
    todo, ends = set(tps), {}
    deadline = time.monotonic() + READ_TIMEOUT_S
    while todo:
        if time.monotonic() > deadline:
            raise TimeoutError(f"reading back {sorted(map(str, todo))} took over {READ_TIMEOUT_S:g} s")
        for messages in consumer.poll(timeout_ms=200).values():
            for m in messages:
                keep(m)
        for tp in list(todo):
            high = consumer.highwater(tp)
            if high is not None and consumer.position(tp) >= high:
                ends[tp] = high
                todo.discard(tp)
    return ends


def read_latest(kafka: Any, topic: str, partition: int) -> dict[Any, Any]:
    """The newest value per key in one partition of a changelog topic (JSON keys and values; ``None`` = deleted)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(**kafka_python_config(kafka), group_id=None, enable_auto_commit=False)
    latest: dict[Any, Any] = {}

    def keep(m: Any) -> None:
        if m.key is not None:
            latest[json.loads(m.key)] = None if m.value is None else json.loads(m.value)

    try:
        _read(consumer, {TopicPartition(topic, partition): 0}, keep)
        return latest
    finally:
        consumer.close()


def read_since(kafka: Any, topic: str, marks: Mapping[int, int] | None) -> tuple[list[dict], dict[int, int]]:
    """The JSON records of ``topic`` from ``marks`` (partition → offset; 0 when absent) to the end, and the ends.

    ``marks=None`` reads nothing: only the end offsets."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(**kafka_python_config(kafka), group_id=None, enable_auto_commit=False)
    out: list[dict] = []

    def keep(m: Any) -> None:
        if marks is None:
            return
        try:
            value = json.loads(m.value)
        except (ValueError, TypeError, RecursionError):
            return  # not one of ours: the agents only publish JSON objects
        if isinstance(value, dict):
            out.append(value)

    try:
        consumer.topics()  # why: a fresh consumer knows no partitions until it fetched the metadata
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not tps:
            raise RuntimeError(f"topic {topic} has no partitions the broker names")
        ends = _read(consumer, {tp: None if marks is None else marks.get(tp.partition, 0) for tp in tps}, keep)
        return out, {tp.partition: end for tp, end in ends.items()}
    finally:
        consumer.close()


class OutputLog:
    """Marks of what an agent published to ``topic``, kept in its own changelogged ``table``.

    The mark of input partition ``p`` lives under the key ``~out~p`` (never a valid node id).
    """

    def __init__(self, app: Any, table: Any, topic: str):
        self.app, self.table, self.topic = app, table, topic
        self.ends: dict[int, int] = {}  # output partition → next offset after everything known published
        self.resumed: set[int] = set()  # input partitions read back since the last assignment

    @staticmethod
    def key(partition: int) -> str:
        return f"~out~{partition}"

    def forget(self) -> None:
        """A rebalance: partitions may come back with state another worker wrote; read them back again."""
        self.resumed.clear()

    async def resume(self, partition: int) -> list[dict]:
        """Restore ``partition``'s table entries from its changelog; what was published since its mark.

        Once per assignment, before the agent touches the partition's state (``[]`` in tests).
        """
        if partition in self.resumed:
            return []
        self.resumed.add(partition)
        if self.app.hpc.pipeline.outbox is not None:
            return []
        loop = asyncio.get_running_loop()
        kafka = self.app.hpc.settings.kafka
        changelog = self.table.changelog_topic.get_topic_name()
        for key, value in (await loop.run_in_executor(None, read_latest, kafka, changelog, partition)).items():
            if value is None:
                self.table.data.pop(key, None)
            else:
                self.table.data[key] = value
        mark = self.table.data.get(self.key(partition))
        marks = {int(p): int(o) for p, o in mark.items()} if mark else None
        records, ends = await loop.run_in_executor(None, read_since, kafka, self.topic, marks)
        self.sent(ends)
        if marks is None:  # outputs must always lie after some mark: write one and wait for it
            self.mark(partition)
            await self.app.producer.flush()
        return records

    def sent(self, ends: Mapping[int, int]) -> None:
        """Outputs reached these next offsets (from :func:`deliver` or a read)."""
        for p, end in ends.items():
            self.ends[p] = max(self.ends.get(p, 0), end)

    def mark(self, partition: int) -> None:
        """Write ``partition``'s mark; call after the batch's state entries (same changelog partition)."""
        value = {str(p): end for p, end in self.ends.items()}
        self.table.data[self.key(partition)] = value
        self.table.send_changelog(partition, self.key(partition), value)
