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
it — Faust's test context uses this to see what an agent published, and
:func:`consume_batches` to send a whole batch's outputs before it commits.

:func:`consume_batches` reads the bulk input topics (LDMS rows) with aiokafka's
``getmany`` instead of one Faust event per record: a batch is handled through the same
door and guard, its outputs and dead letters go to Kafka in one record batch per
partition, and its offsets are committed only once the broker has them (at least once).

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
>>> one = {"node": "n1", "time": 1.7e9, "source": "ipmi", "values": {"cpu_temp": 40}}
>>> batch = encode({"samples": [one, {**one, "node": "n2", "values": {}}]})
>>> [s["node"] for s in p.samples(batch, "s", offset=8)], box[-1][2]["error_kind"]
(['n1'], 'no_values')
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from contextlib import contextmanager
from typing import Any, Iterator

import orjson

from hpcguard.connectors.kafka import kafka_python_config
from hpcguard.connectors.validation import DoorLimits, NodeInventory, ValidationError, check_record, safe_loads
from hpcguard.streams import metrics

log = logging.getLogger("hpcguard.worker")
UNASSIGNED_WARN_S = 30.0  # a batch consumer without partitions this long (3 session timeouts) is said in the log
STUCK_AFTER_S = 30.0  # a batch reader that does not move this long is closed and opened again (consume_batches)
CLOSE_TIMEOUT_S = 10.0

#: canonical record fields that name nodes: checked against the inventory
_NODE_FIELDS = ("node",)


def encode(value: Any) -> bytes:
    """A record as compact JSON bytes, serialised once.

    orjson writes it (several times faster than the stdlib) unless the record holds
    something orjson would write differently: NaN/±inf (orjson writes ``null``; the
    stdlib writes ``NaN``, which the next door refuses as not finite), numpy scalars,
    non-string keys, integers beyond 64 bits.

    >>> encode({"node": "n1", "values": {"io": 1e-05}, "job_id": None})
    b'{"node":"n1","values":{"io":0.00001},"job_id":null}'
    >>> encode({"p": float("nan")})
    b'{"p":NaN}'
    """
    try:
        data = orjson.dumps(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":")).encode()
    if b"null" in data and _holds_non_finite(value):
        return json.dumps(value, separators=(",", ":")).encode()
    return data


def _holds_non_finite(value: Any) -> bool:
    level = [value]
    while level:
        if any(type(v) is float and not math.isfinite(v) for v in level):
            return True
        level = [c for v in level if isinstance(v, (dict, list, tuple))
                 for c in (v.values() if isinstance(v, dict) else v)]
    return False


class Plumbing:
    """Decode, publish, dead-letter and guard for every agent of one worker."""

    def __init__(self, dlq: Any, limits: DoorLimits, inventory: NodeInventory | None = None,
                 outbox: list | None = None) -> None:
        self.dlq = dlq
        self.limits = limits
        self.inventory = inventory
        self.outbox = outbox
        self._records_out: dict[str, Any] = {}  # topic → its counters (labels() costs a lookup per record)

    # -- outlet ---------------------------------------------------------------------
    def publish(self, topic: Any, key: str | None, value: dict) -> None:
        """Send ``value`` as JSON to ``topic`` (a Faust topic or, with an outbox, any name)."""
        name = topic if isinstance(topic, str) else topic.get_topic_name()
        if self.outbox is not None:
            self.outbox.append((name, key, value))
        else:
            topic.send_soon(key=None if key is None else key.encode(), value=encode(value))
        counters = self._records_out.get(name)
        if counters is None:
            counters = self._records_out[name] = (metrics.RECORDS_OUT.labels(name), metrics.SAMPLES_OUT.labels(name))
        counters[0].inc()
        if "samples" in value:  # a NodeSamples batch
            counters[1].inc(len(value["samples"]))
        elif "values" in value and "node" in value:  # one NodeSample
            counters[1].inc()

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

    def check(self, kind: str, data: Any, learn: bool = True) -> dict:
        """Schema, types, bounds and ids of a decoded record, and the node inventory (``learn=False``: a node
        the inventory does not hold yet is not added to it, see :meth:`NodeInventory.admit`).

        A job record's nodes are named by Slurm (:meth:`NodeInventory.name`): admitted from then on,
        whatever the sample topics carried; any other record's node enters the quarantine."""
        record = check_record(kind, data, self.limits)
        if self.inventory is None:
            return record
        if kind == "JobEvent" and learn and record.get("nodes"):
            self.inventory.name(record["nodes"])
        for f in _NODE_FIELDS:
            node = record.get(f)
            if node is not None and not self.inventory.admit(node, learn):
                raise ValidationError(f, self.inventory.reason(node), "unknown_node")
        return record

    def decode(self, kind: str, raw: bytes | str, source: str, offset: int | None = None,
               learn: bool = True) -> dict | None:
        """A checked record of ``kind`` (``NodeSample``, ``JobEvent``...), or ``None`` after a dead letter."""
        try:
            return self.check(kind, self.loads(raw), learn)
        except ValidationError as exc:
            self.dead_letter(source, exc.kind, f"not a valid {kind}: {exc.reason}", raw, offset=offset)
            return None

    def samples(self, raw: bytes | str, source: str, offset: int | None = None) -> list[dict]:
        """The checked samples of a samples-topic record: a ``NodeSample`` or a ``NodeSamples`` batch.

        A refused record is one dead letter; in a batch, each refused sample is its own dead
        letter (the sample as payload) and the others come back.
        """
        try:
            data = self.loads(raw)
            if not (isinstance(data, dict) and "samples" in data):
                return [self.check("NodeSample", data)]
            items = check_record("NodeSamples", data, self.limits)["samples"]
        except ValidationError as exc:
            self.dead_letter(source, exc.kind, f"not a valid NodeSample: {exc.reason}", raw, offset=offset)
            return []
        out = []
        for item in items:
            try:
                out.append(self.check("NodeSample", item))
            except ValidationError as exc:
                self.dead_letter(source, exc.kind, f"not a valid NodeSample (in a NodeSamples batch): {exc.reason}",
                                 item, offset=offset)
        return out

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


#: roles whose agents admit nodes into worker state through the inventory (samples, predictions)
INVENTORY_ROLES = frozenset({"windows", "io", "decide"})


def announce_inventory(inventory: NodeInventory, roles: Any = INVENTORY_ROLES) -> None:
    """At worker start: expose the inventory in ``/metrics`` and, without ``door.nodes``, say loudly in one
    WARNING line what that means (for a worker whose ``roles`` admit nodes)."""
    metrics.INVENTORY_CONFIGURED.set(int(inventory.fixed))
    metrics.INVENTORY_QUARANTINED.set_function(lambda: len(inventory.quarantined))
    metrics.INVENTORY_NAMED.set_function(lambda: len(inventory.named))
    if not inventory.fixed and INVENTORY_ROLES & set(roles):
        log.warning("NO NODE INVENTORY IS CONFIGURED (door.nodes is empty): nodes named by Slurm job records are "
                    "admitted; up to %d names seen only on sample topics are quarantined and processed, and beyond "
                    "that new names are dead-lettered unknown_node, so a flood of invented names can keep real nodes "
                    "that no job record names out; set door.nodes (HPCGUARD_DOOR__NODES) to the site's hostlist",
                    inventory.max_nodes)


# -- batches: the bulk inputs without one Faust event per record ------------------------------
class BatchProducer:
    """Records to Kafka in one record batch per (topic, partition), partitioned by key as
    Faust's producer does (Kafka's murmur2 default), so keyed outputs land where Faust's would."""

    def __init__(self, producer: Any) -> None:
        from aiokafka.partitioner import DefaultPartitioner

        self.producer = producer
        self.partitioner = DefaultPartitioner()
        self._partitions: dict[str, list[int]] = {}

    async def _partitions_of(self, topic: str) -> list[int]:
        parts = self._partitions.get(topic)
        if parts is None:
            parts = self._partitions[topic] = sorted(await self.producer.partitions_for(topic))
        return parts

    async def send(self, records: list[tuple[str, bytes | None, bytes]]) -> None:
        """Hand ``(topic, key, value)`` records to Kafka; returns once the broker acknowledged all."""
        by_tp: dict[tuple[str, int], list[tuple[bytes | None, bytes]]] = {}
        for topic, key, value in records:
            parts = await self._partitions_of(topic)
            by_tp.setdefault((topic, self.partitioner(key, parts, parts)), []).append((key, value))
        sent = []
        for (topic, partition), messages in by_tp.items():
            batch = self.producer.create_batch()
            for key, value in messages:
                if batch.append(key=key, value=value, timestamp=None) is None:  # full: send it, start the next
                    sent.append(await self.producer.send_batch(batch, topic, partition=partition))
                    batch = self.producer.create_batch()
                    batch.append(key=key, value=value, timestamp=None)
            sent.append(await self.producer.send_batch(batch, topic, partition=partition))
        await asyncio.gather(*sent)


class BatchReaderStuck(Exception):
    """A batch reader that stopped moving: a send or commit that does not return, or assigned partitions
    with records known to wait that no fetch brings (seen after a broker kill -9 and restart)."""


async def consume_batches(app: Any, topics: list[str], group: str, handle: Any, door: Plumbing,
                          max_records: int = 2000, stuck_after_s: float | None = None) -> None:
    """Read ``topics`` in batches as consumer group ``group`` until cancelled.

    ``handle(records)`` gets each batch (aiokafka ``ConsumerRecord`` objects, offsets in order
    per partition) and publishes through ``door``, whose outbox collects the outputs and dead
    letters; they are sent, the broker acknowledges them, and only then are the batch's
    offsets committed — a crash in between redelivers the batch (at least once, as with Faust).

    A reader that is stuck for ``stuck_after_s`` (default :data:`STUCK_AFTER_S`: a send or a commit
    that does not return, or records waiting past what it read with no fetch bringing them) is
    closed and opened again in place: the new one resumes from the group's committed offsets, so
    the batch in hand is read again (at least once), and the outputs flow again within about that
    time instead of after the liveness check's stall exit (``2 × stall_after_s``), which stays the
    backstop for what this does not see (``streams/liveness.py``).
    """
    stuck_after_s = STUCK_AFTER_S if stuck_after_s is None else float(stuck_after_s)
    ready = metrics.CONSUMER_READY.labels(group)
    ready.set(0)
    groups = getattr(getattr(app, "hpc", None), "batch_groups", None)
    try:
        while True:
            try:
                await _read_batches(app, topics, group, handle, door, max_records, stuck_after_s, ready, groups)
            except BatchReaderStuck as exc:
                metrics.BATCH_READER_REOPENED.labels(group).inc()
                log.warning("batch consumer %s is stuck (%s): opening it again at the committed offsets", group, exc)
                door.outbox.clear()  # the batch in hand is read again from the committed offsets
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 — a dead loop must not look alive: stop the worker for its supervisor
        log.critical("batch consumer %s failed: %r", group, exc)
        await app.crash(exc)
        raise
    finally:
        if groups is not None:
            groups[group] = (list(topics), None)


async def _read_batches(app: Any, topics: list[str], group: str, handle: Any, door: Plumbing, max_records: int,
                        stuck_after_s: float, ready: Any, groups: dict | None) -> None:
    """One batch consumer's life (:func:`consume_batches`); raises :class:`BatchReaderStuck` when it stops moving."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import CommitFailedError

    config = kafka_python_config(app.hpc.settings.kafka)
    consumer = AIOKafkaConsumer(*topics, **config, group_id=group, enable_auto_commit=False,
                                fetch_max_wait_ms=app.hpc.settings.kafka.fetch_max_wait_ms,
                                auto_offset_reset="earliest", max_poll_records=max_records,
                                session_timeout_ms=10_000, heartbeat_interval_ms=1_000, rebalance_timeout_ms=10_000)
    # why these settings: many small records in one batch per partition, no compression (CPU bound);
    # acks from all in-sync replicas, as Faust's producer, before the offsets are committed
    producer = AIOKafkaProducer(**config, linger_ms=5, max_batch_size=512 * 1024, acks="all")
    try:
        await asyncio.wait_for(producer.start(), stuck_after_s)
        await asyncio.wait_for(consumer.start(), stuck_after_s)
    except asyncio.TimeoutError:
        await _close(consumer, producer)
        raise BatchReaderStuck(f"could not connect within {stuck_after_s:.0f} s") from None
    out = BatchProducer(producer)
    box = door.outbox
    if groups is not None:  # the liveness check's group probe covers this group's commits (streams/liveness.py)
        groups[group] = (list(topics), consumer)
    unassigned_since: float | None = time.monotonic()
    warned = False  # this spell without partitions was logged
    read: dict = {}  # partition → next offset to read (what this reader has taken)
    moved = time.monotonic()  # when the reader last took records, or saw nothing waiting
    try:
        while True:
            batches = await consumer.getmany(timeout_ms=200, max_records=max_records)
            assigned = consumer.assignment()
            if assigned:
                ready.set(1)
                if warned:
                    log.warning("batch consumer %s has partitions again", group)
                unassigned_since, warned = None, False
            else:
                ready.set(0)
                unassigned_since = unassigned_since or time.monotonic()
                if not warned and time.monotonic() - unassigned_since > UNASSIGNED_WARN_S:
                    # a group that never gets its partitions back reads nothing: the evidence, once
                    log.warning("batch consumer %s has had no partition for %.0f s", group,
                                time.monotonic() - unassigned_since)
                    warned = True
            for tp in [tp for tp in read if tp not in assigned]:
                del read[tp]  # a partition that moved: where this reader was in it says nothing any more
            if not batches:
                waiting = {tp: (read.get(tp), high) for tp in assigned
                           if read.get(tp) is not None and (high := consumer.highwater(tp)) is not None
                           and high > read[tp]}
                if not waiting:
                    moved = time.monotonic()
                elif time.monotonic() - moved > stuck_after_s:
                    raise BatchReaderStuck(f"no record for {time.monotonic() - moved:.0f} s though the fetches "
                                           f"said more were written: {_waiting_text(waiting)}")
                continue
            moved = time.monotonic()
            offsets = {}
            for tp, records in batches.items():
                metrics.RECORDS_IN.labels(tp.topic).inc(len(records))
                handle(records)
                offsets[tp] = read[tp] = records[-1].offset + 1
            try:
                if box:
                    await asyncio.wait_for(out.send([(t, None if k is None else k.encode(), encode(v))
                                                     for t, k, v in box]), stuck_after_s)
                    box.clear()
                await asyncio.wait_for(consumer.commit(offsets), stuck_after_s)
            except asyncio.TimeoutError:
                raise BatchReaderStuck(f"a send or commit did not return within {stuck_after_s:.0f} s") from None
            except CommitFailedError as exc:  # a rebalance moved the partitions: their new owner reads them again
                log.warning("commit of %s after a rebalance failed (redelivered): %r", group, exc)
    finally:
        ready.set(0)
        await _close(consumer, producer)


def _waiting_text(waiting: dict) -> str:
    return ", ".join(f"{tp.topic}/{tp.partition} read to {r}, written to {h}" for tp, (r, h) in sorted(
        waiting.items(), key=lambda kv: (kv[0].topic, kv[0].partition)))


async def _close(consumer: Any, producer: Any) -> None:
    """Stop both, each bounded: a reader being replaced must not hang on a broker that does not answer."""
    for client in (consumer, producer):
        try:
            await asyncio.wait_for(client.stop(), CLOSE_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 — closing a broken client: its replacement matters
            log.warning("closing a batch reader's %s: %r", type(client).__name__, exc)
