"""Helpers for tests that run a worker process against the session broker."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer

from hpcguard.connectors.kafka import ensure_topics, kafka_python_config
from hpcguard.settings import KafkaSettings, TopicSettings
from hpcguard.streams.topics import TopicNames


HEALTHY = dict(cpu_temp=50.0, cpu_fan_rpm=6000.0, cpu_voltage=1.1, psu_temp=40.0, load_1min=8.0, cpu_user=80.0,
               disk_usage=30.0, mem_usage=40.0, bytes_in=1e6, bytes_out=1e6)


def baseline_model(directory: Path, persistence: int = 2) -> str:
    """A baseline model directory learned on healthy windows around ``HEALTHY``."""
    import numpy as np

    from hpcguard.models.baseline import BaselineDetector
    from hpcguard.models.features import CANONICAL_SENSORS

    rng = np.random.default_rng(0)
    base = np.array([HEALTHY[s] for s in CANONICAL_SENSORS])
    det = BaselineDetector(persistence=persistence).learn_many(base * (1 + 0.02 * rng.standard_normal((2000, 16, 10))))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "baseline.json").write_text(json.dumps({**det.to_state(), "version": "test-baseline"}))
    return str(directory)


def samples_of(records: list[dict]) -> list[dict]:
    """The samples of samples-topic records: a ``NodeSamples`` batch's items, or the record itself."""
    return [s for r in records for s in r.get("samples", [r])]


class WorkerProcess:
    """``hpcguard worker`` in a subprocess with its own topic prefix and group."""

    def __init__(self, kafka: KafkaSettings, tmp: Path, model_dir: str | None = None, roles=(), extra=(),
                 env=None, prefix: str | None = None, partitions: int = 1):
        """``prefix`` shared by several instances makes them one consumer group on one topic set."""
        self.kafka = kafka
        self.partitions = partitions
        self.prefix = prefix or f"t{uuid.uuid4().hex[:8]}"
        self.topics = TopicNames.from_settings(TopicSettings(prefix=self.prefix,
                                                             ldms_format=self.prefix + ".ldms.{schema}"))
        self.tmp = tmp
        self.audit_log = tmp / "audit.jsonl"
        self.log_path = tmp / "worker.log"
        argv = [sys.executable, "-m", "hpcguard", "worker", "--bootstrap", kafka.bootstrap, "--prefix", self.prefix,
                "--app-id", f"app-{self.prefix}", "--data-dir", str(tmp / "state"), "--audit-log",
                str(self.audit_log)]
        if model_dir:
            argv += ["--model", model_dir]
        for r in roles:
            argv += ["--role", r]
        self.argv = argv + list(extra)
        self.env = {**os.environ, "HPCGUARD_TOPICS__LDMS_FORMAT": self.prefix + ".ldms.{schema}",
                    "HPCGUARD_TOPICS__PARTITIONS": str(partitions),
                    "HPCGUARD_ADAPTER__LEDGER": str(tmp / "ledger.sqlite"), **(env or {})}
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "WorkerProcess":
        ensure_topics(self.kafka, self.topics.all(), self.partitions)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)
        return self

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def produce(self, topic: str, items: list[tuple[str, object]]) -> None:
        p = KafkaProducer(**kafka_python_config(self.kafka), linger_ms=5)
        for key, value in items:
            payload = value if isinstance(value, bytes) else json.dumps(value).encode()
            p.send(topic, key=key.encode(), value=payload)
        p.flush()
        p.close()

    def produce_many(self, items: list[tuple[str, tuple[str, object]]]) -> None:
        """Produce ``(topic, (key, value))`` items in order."""
        p = KafkaProducer(**kafka_python_config(self.kafka), linger_ms=5)
        for topic, (key, value) in items:
            p.send(topic, key=key.encode(), value=json.dumps(value).encode())
        p.flush()
        p.close()

    def wait_for(self, topic: str, predicate, timeout_s: float = 90.0) -> list[dict]:
        """Consume ``topic`` from the start until ``predicate(records)`` holds."""
        c = KafkaConsumer(topic, **kafka_python_config(self.kafka), auto_offset_reset="earliest", group_id=None,
                          consumer_timeout_ms=1000)
        records: list[dict] = []
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                for m in c:
                    records.append(json.loads(m.value))
                if predicate(records):
                    return records
                if self.proc and self.proc.poll() is not None:
                    raise AssertionError(f"worker exited ({self.proc.returncode}):\n{self.log()[-3000:]}")
            raise AssertionError(f"timed out on {topic} with {len(records)} records:\n{self.log()[-3000:]}")
        finally:
            c.close()
