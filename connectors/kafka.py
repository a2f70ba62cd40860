"""Kafka client configuration and small helpers shared by every command.

The same ``KafkaSettings`` produce kafka-python, aiokafka and Faust options so a
command that runs against the embedded broker runs unchanged against Apache Kafka
with SASL/TLS.
"""
from __future__ import annotations

import ssl
import time
from typing import Any, Iterable

from hpcguard.settings import KafkaSettings


def _ssl_context(k: KafkaSettings) -> ssl.SSLContext | None:
    if "SSL" not in k.security_protocol:
        return None
    ctx = ssl.create_default_context(cafile=k.ssl_cafile or None)
    if k.ssl_certfile:
        ctx.load_cert_chain(k.ssl_certfile, k.ssl_keyfile or None, k.ssl_password or None)
    return ctx


def kafka_python_config(k: KafkaSettings) -> dict[str, Any]:
    """Options for ``kafka.KafkaProducer`` / ``KafkaConsumer`` / ``KafkaAdminClient``."""
    cfg: dict[str, Any] = {"bootstrap_servers": k.bootstrap.split(","), "security_protocol": k.security_protocol}
    if k.sasl_mechanism:
        cfg.update(sasl_mechanism=k.sasl_mechanism, sasl_plain_username=k.sasl_username,
                   sasl_plain_password=k.sasl_password)
    if "SSL" in k.security_protocol:
        cfg.update(ssl_context=_ssl_context(k))
    return cfg


def faust_broker_config(k: KafkaSettings) -> dict[str, Any]:
    """``broker`` and ``broker_credentials`` for ``faust.App``."""
    import faust

    url = ",".join(f"kafka://{hp}" for hp in k.bootstrap.split(","))
    credentials = None
    ctx = _ssl_context(k)
    if k.sasl_mechanism:
        credentials = faust.SASLCredentials(username=k.sasl_username, password=k.sasl_password,
                                            mechanism=k.sasl_mechanism, ssl_context=ctx)
    elif ctx is not None:
        credentials = faust.SSLCredentials(ctx)
    return {"broker": url, "broker_credentials": credentials}


def faust_consumer_class(fetch_max_wait_ms: int) -> type:
    """Faust's aiokafka consumer, asking the broker to hold an empty fetch at most ``fetch_max_wait_ms``.

    Faust hard-codes 1,500 ms.  Kafka answers a held fetch as soon as records arrive; tansu holds
    it for the whole wait, so every Faust hop added up to 1.5 s of latency.  Set on an app with
    ``app.transport.Consumer = faust_consumer_class(ms)`` before its consumer is created.
    """
    from faust.transport.drivers import aiokafka as driver

    class ConsumerThread(driver.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            consumer._fetch_max_wait_ms = int(fetch_max_wait_ms)  # what AIOKafkaConsumer.start() hands its fetcher
            return consumer

    class Consumer(driver.Consumer):
        def _new_consumer_thread(self) -> Any:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    return Consumer


def ensure_topics(k: KafkaSettings, names: Iterable[str], partitions: int = 1, replication: int = 1,
                  timeout_s: float = 15.0) -> list[str]:
    """Create the topics that do not exist yet; return the ones created."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(**kafka_python_config(k), client_id="hpcguard-admin",
                             request_timeout_ms=int(timeout_s * 1000))
    try:
        existing = set(admin.list_topics())
        missing = [n for n in dict.fromkeys(names) if n not in existing]
        if missing:
            try:
                admin.create_topics([NewTopic(n, partitions, replication) for n in missing])
            except TopicAlreadyExistsError:
                pass
        return missing
    finally:
        admin.close()


def wait_for_broker(k: KafkaSettings, timeout_s: float = 30.0) -> None:
    """Block until the cluster answers a metadata request."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaConfigurationError, KafkaError

    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            c = KafkaConsumer(**kafka_python_config(k), request_timeout_ms=5000)
            c.topics()
            c.close()
            return
        except KafkaConfigurationError:
            raise  # a wrong option is not going to heal by waiting
        except (KafkaError, OSError) as exc:
            last = exc
            time.sleep(0.2)
    raise ConnectionError(f"Kafka at {k.bootstrap} did not answer within {timeout_s}s: {last}")


def key_partition(key: str, partitions: int) -> int:
    """The partition Kafka's default partitioner (murmur2, as the Java client and kafka-python) gives ``key``.

    >>> [key_partition(n, 4) for n in ("n001", "n002")] == [key_partition(n, 4) for n in ("n001", "n002")]
    True
    """
    from kafka.partitioner.default import murmur2

    return (murmur2(key.encode()) & 0x7FFFFFFF) % int(partitions)
