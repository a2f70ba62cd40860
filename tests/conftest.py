"""Shared fixtures: one Kafka-compatible broker per test session.

``HPCGUARD_TEST_BOOTSTRAP=host:port`` uses an existing broker instead; with
``HPCGUARD_TEST_KAFKA=docker`` and a Docker engine, Apache Kafka runs through
testcontainers.  Otherwise the embedded tansu broker starts once.
"""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from hpcguard.settings import KafkaSettings

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


@pytest.fixture(scope="session")
def kafka_bootstrap():
    """``host:port`` of the session's broker."""
    explicit = os.environ.get("HPCGUARD_TEST_BOOTSTRAP")
    if explicit:
        yield explicit
        return
    if os.environ.get("HPCGUARD_TEST_KAFKA") == "docker":
        if not _docker_available():
            pytest.skip("HPCGUARD_TEST_KAFKA=docker but no Docker engine answers")
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer() as kafka:
            yield kafka.get_bootstrap_server()
        return
    from hpcguard.connectors.broker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        yield broker.bootstrap


@pytest.fixture(scope="session")
def kafka_settings(kafka_bootstrap) -> KafkaSettings:
    return KafkaSettings(bootstrap=kafka_bootstrap)


# Fixtures of other areas live in their own modules (tests/ is on sys.path).
try:
    from _slurm_fixture import slurm_cluster  # noqa: F401
except ImportError:
    pass
try:
    from _influx_fixture import influxdb  # noqa: F401
except ImportError:
    pass
