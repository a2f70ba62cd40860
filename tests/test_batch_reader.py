"""The LDMS rows' batch reader (``streams.plumbing.consume_batches``) reopens itself when it stops moving.

After a broker kill -9 and restart the reader's group once stopped committing for good while rows
waited (issue 58 item 5). These fakes stand in for aiokafka's clients to make the two ways a reader
stops moving happen on cue; the fault suite's broker restart runs the real thing.
"""
from __future__ import annotations

import asyncio
import logging
from collections import namedtuple
from types import SimpleNamespace

import pytest

from hpcguard.connectors.validation import DoorLimits
from hpcguard.settings import Settings
from hpcguard.streams import metrics, plumbing

TP = namedtuple("TP", "topic partition")
Record = namedtuple("Record", "offset value")
TOPIC = TP("ldms.lustre_client", 0)


class FakeBroker:
    """Ten rows on one partition, the group's committed offset, and how each new reader behaves."""

    def __init__(self, behaviours):
        self.rows, self.committed, self.behaviours, self.readers = 10, 0, list(behaviours), 0


def fakes(broker: FakeBroker):
    class Consumer:
        def __init__(self, *topics, **config):
            broker.readers += 1
            self.behaviour, self.position = broker.behaviours.pop(0), broker.committed

        async def start(self):
            pass

        async def stop(self):
            pass

        def assignment(self):
            return {TOPIC}

        def highwater(self, tp):
            return broker.rows

        async def getmany(self, timeout_ms, max_records):
            await asyncio.sleep(0.01)
            if self.behaviour == "stalls" and self.position >= 5:  # fetches stop coming after the first half
                return {}
            if self.position >= broker.rows:
                return {}
            batch = [Record(o, b"{}") for o in range(self.position, min(self.position + 5, broker.rows))]
            self.position = batch[-1].offset + 1
            return {TOPIC: batch}

        async def commit(self, offsets):
            if self.behaviour == "commit hangs":
                await asyncio.sleep(3600)
            broker.committed = offsets[TOPIC]

    class Producer:
        def __init__(self, **config):
            pass

        async def start(self):
            pass

        async def stop(self):
            pass

    return Consumer, Producer


@pytest.mark.parametrize("behaviour", ["stalls", "commit hangs"])
def test_a_stuck_batch_reader_is_opened_again_at_the_committed_offsets(monkeypatch, caplog, behaviour):
    import aiokafka

    broker = FakeBroker([behaviour, "works"])
    consumer, producer = fakes(broker)
    monkeypatch.setattr(aiokafka, "AIOKafkaConsumer", consumer)
    monkeypatch.setattr(aiokafka, "AIOKafkaProducer", producer)
    seen: list[int] = []
    app = SimpleNamespace(hpc=SimpleNamespace(settings=Settings(), batch_groups={}))
    door = plumbing.Plumbing(dlq="dlq", limits=DoorLimits(), outbox=[])
    reopened = metrics.BATCH_READER_REOPENED.labels("g-test")
    before = reopened._value.get()

    async def run():
        task = asyncio.create_task(plumbing.consume_batches(
            app, [TOPIC.topic], "g-test", lambda records: seen.extend(r.offset for r in records), door,
            stuck_after_s=0.3))
        while broker.committed < broker.rows:
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with caplog.at_level(logging.WARNING, logger="hpcguard.worker"):
        asyncio.run(asyncio.wait_for(run(), 10))
    assert broker.readers == 2 and reopened._value.get() == before + 1
    # every row read; a batch whose commit never returned is read again (at least once)
    assert sorted(set(seen)) == list(range(10))
    assert seen == list(range(10)) if behaviour == "stalls" else seen == [0, 1, 2, 3, 4] * 2 + [5, 6, 7, 8, 9]
    why = "though the fetches said more were written" if behaviour == "stalls" else "send or commit did not return"
    assert any("is stuck" in r.getMessage() and why in r.getMessage() for r in caplog.records), caplog.text
    assert app.hpc.batch_groups["g-test"] == ([TOPIC.topic], None)  # stopped: the liveness probe sees no reader
