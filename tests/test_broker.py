"""The embedded broker starts, serves the Kafka protocol and stops cleanly."""
import json

from kafka import KafkaConsumer, KafkaProducer

from hpcguard.connectors.broker import EmbeddedBroker, free_port, tansu_path
from hpcguard.connectors.kafka import ensure_topics, kafka_python_config


def test_round_trip_through_session_broker(kafka_settings):
    ensure_topics(kafka_settings, ["test.broker.rt"])
    p = KafkaProducer(**kafka_python_config(kafka_settings))
    for i in range(10):
        p.send("test.broker.rt", key=b"k", value=json.dumps({"i": i}).encode())
    p.flush()
    p.close()
    c = KafkaConsumer("test.broker.rt", **kafka_python_config(kafka_settings), auto_offset_reset="earliest",
                      consumer_timeout_ms=3000)
    assert [json.loads(m.value)["i"] for m in c] == list(range(10))
    c.close()


def test_second_broker_on_free_port_stops_cleanly():
    assert tansu_path()
    port = free_port()
    b = EmbeddedBroker(port=port).start()
    proc = b.process
    assert b.bootstrap == f"127.0.0.1:{port}"
    b.stop()
    assert proc.poll() is not None
    b.stop()  # idempotent
