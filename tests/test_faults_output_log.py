"""Reading back what an agent published (streams/output_log.py) against the session's real broker."""
import json
import uuid

import pytest
from kafka import KafkaProducer

from hpcguard.connectors.kafka import ensure_topics
from hpcguard.streams.output_log import read_latest, read_since

pytestmark = pytest.mark.broker


@pytest.fixture
def topic(kafka_settings):
    name = f"outlog-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_settings, [name], partitions=2)
    return name


def produce(bootstrap, topic, items):
    """(partition, key, value) → JSON records; returns their offsets."""
    p = KafkaProducer(bootstrap_servers=bootstrap)
    futures = [p.send(topic, partition=part, key=json.dumps(k).encode(),
                      value=None if v is None else json.dumps(v).encode()) for part, k, v in items]
    p.flush()
    offsets = [f.get(timeout=30).offset for f in futures]
    p.close()
    return offsets


def test_read_since_returns_only_what_follows_the_marks(kafka_settings, topic):
    produce(kafka_settings.bootstrap, topic, [(0, "n1", {"node": "n1", "time": t}) for t in (15, 30, 45)]
            + [(1, "n2", {"node": "n2", "time": 15})])
    records, ends = read_since(kafka_settings, topic, {0: 1, 1: 1})
    assert [(r["node"], r["time"]) for r in records] == [("n1", 30), ("n1", 45)]
    assert ends == {0: 3, 1: 1}
    records, ends = read_since(kafka_settings, topic, {0: 3})  # a partition missing from the marks: from its start
    assert [(r["node"], r["time"]) for r in records] == [("n2", 15)]
    assert read_since(kafka_settings, topic, None) == ([], {0: 3, 1: 1})  # no marks: only the end offsets


def test_read_latest_keeps_the_newest_value_per_key(kafka_settings, topic):
    produce(kafka_settings.bootstrap, topic, [(0, "n1", {"v": 1}), (0, "~out~0", {"0": 4}), (0, "n1", {"v": 2}),
                                              (0, "n3", {"v": 1}), (0, "n3", None), (1, "n2", {"v": 9})])
    assert read_latest(kafka_settings, topic, 0) == {"n1": {"v": 2}, "~out~0": {"0": 4}, "n3": None}


def test_kafka_python_checks_crcs_in_c():
    """A restarted worker reads its changelogs back with kafka-python, which checks every batch's CRC-32C: in pure
    Python (4 MB/s) that held the GIL for minutes at 4,000 nodes and the liveness guard stopped the worker again and
    again (benchmarks/bench_scale.py --kill-at-min); the ``crc32c`` extra makes it C."""
    from kafka.record import util

    assert util.crc32c_c is not None and util._crc32c is util.crc32c_c
