"""Shared fixtures: one Kafka-compatible broker per test run.

``HPCGUARD_TEST_BOOTSTRAP=host:port`` uses an existing broker instead; with
``HPCGUARD_TEST_KAFKA=docker`` and a Docker engine, Apache Kafka runs through
testcontainers.  Otherwise the embedded tansu broker starts once per run: in the
controller when pytest-xdist spreads the tests over workers (they all get its address
through ``HPCGUARD_TEST_BOOTSTRAP``), else lazily in the one process.  Every test uses
topics and app ids of its own, so the workers never meet on the broker.

Tests that need the real Slurm controller (marker ``slurm``) run after the others, in one
process: the host's munged is shared, and one cluster per run is enough (``make test``).
"""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from hpcguard.settings import KafkaSettings

os.environ.setdefault("OMP_NUM_THREADS", "1")

_RUN_BROKER = None  # the controller's broker when xdist runs the tests


def _docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def _xdist_controller(config) -> bool:
    """This process hands tests to xdist workers (and runs none itself)."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))


def pytest_configure(config):
    global _RUN_BROKER
    if (_xdist_controller(config) and not os.environ.get("HPCGUARD_TEST_BOOTSTRAP")
            and os.environ.get("HPCGUARD_TEST_KAFKA") != "docker"):
        from hpcguard.connectors.broker import EmbeddedBroker

        _RUN_BROKER = EmbeddedBroker().start()
        os.environ["HPCGUARD_TEST_BOOTSTRAP"] = _RUN_BROKER.bootstrap  # the workers inherit it


def pytest_unconfigure(config):
    global _RUN_BROKER
    if _RUN_BROKER is not None:
        _RUN_BROKER.stop()
        os.environ.pop("HPCGUARD_TEST_BOOTSTRAP", None)
        _RUN_BROKER = None


@pytest.fixture(scope="session")
def kafka_bootstrap():
    """``host:port`` of the run's broker."""
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
