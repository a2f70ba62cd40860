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


def _consume(bootstrap: str, topic: str, group: str | None, n_max: int, timeout_ms: int = 30000) -> list[int]:
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=timeout_ms)
    out: list[int] = []
    for m in c:
        out.append(json.loads(m.value)["i"])
        if len(out) == n_max:
            break
    if group is not None:
        c.commit()
    c.close()
    return out


def test_persistent_broker_keeps_records_and_offsets_across_a_kill(tmp_path):
    from kafka.admin import KafkaAdminClient, NewTopic

    from hpcguard.connectors.broker import LocalS3

    with LocalS3(log_path=str(tmp_path / "s3.log")) as s3, \
            EmbeddedBroker(storage=s3.storage_url, env=s3.tansu_env(), log_path=str(tmp_path / "b.log")) as broker:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("persist.t", 1, 1)])
        admin.close()
        p = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for i in range(200):
            p.send("persist.t", key=b"k", value=json.dumps({"i": i}).encode())
        p.flush()
        p.close()
        assert _consume(broker.bootstrap, "persist.t", "g1", 120) == list(range(120))
        old = broker.process
        broker.restart(kill=True)
        assert old.returncode == -9 and broker.process.poll() is None
        assert _consume(broker.bootstrap, "persist.t", None, 200, 10000) == list(range(200))
        assert _consume(broker.bootstrap, "persist.t", "g1", 80) == list(range(120, 200))  # committed offset kept


def _answers(broker: EmbeddedBroker, timeout_s: float = 1.5) -> bool:
    """Does the broker answer a Kafka ApiVersions v0 request within the timeout?"""
    import socket
    import struct

    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    with socket.create_connection((broker.host, broker.port), timeout=timeout_s) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        try:
            size, correlation = struct.unpack(">ii", sock.recv(8))
        except (socket.timeout, struct.error):
            return False
    return correlation == 7 and size > 0


def test_frozen_broker_does_not_answer_until_thawed_and_still_stops():
    b = EmbeddedBroker().start()
    assert _answers(b)
    b.freeze()
    assert not _answers(b)
    b.thaw()
    assert _answers(b)
    b.freeze()
    proc = b.process
    b.stop()  # a frozen broker still stops
    assert proc.poll() is not None


# -- LocalS3 leaves nothing behind (issue 58 item 7: a moto.server outlived `make test`) --------------------

def _running(pid: int) -> bool:
    """Is ``pid`` a live process (a zombie has ended: only its exit status waits to be collected)?"""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid``."""
    import os

    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    state, _ppid, pgrp = f.read().rpartition(")")[2].split()[:3]
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(pgrp) == pgid and state != "Z":
                out.append(int(name))
    return out


def _gone_within(pid: int, timeout_s: float) -> bool:
    """Poll until neither ``pid`` nor anything of its process group runs, at most ``timeout_s``."""
    import time

    deadline = time.monotonic() + timeout_s
    while _running(pid) or _group_members(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _needs_moto_and_proc():
    import os

    import pytest

    pytest.importorskip("moto.server")
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs /proc to see processes")


def test_local_s3_stop_ends_its_whole_process_group():
    from hpcguard.connectors.broker import LocalS3

    _needs_moto_and_proc()
    with LocalS3() as s3:
        pid = s3.process.pid
        assert _running(pid) and _group_members(pid) == [pid]
    # stop() returns only once the group is gone: no waiting needed, the short bound only absorbs /proc lag
    assert _gone_within(pid, 1.0), f"LocalS3 left {_group_members(pid)} running"


def test_local_s3_failed_start_leaves_no_server(monkeypatch):
    import urllib.request

    import pytest

    from hpcguard.connectors import broker

    _needs_moto_and_proc()
    s3 = broker.LocalS3()
    seen = []

    def refuse(request, timeout=None):
        seen.append(s3.process.pid)
        raise OSError("bucket creation refused")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    with pytest.raises(OSError, match="bucket creation refused"):
        with s3:  # __exit__ never runs when __enter__ raises
            pass
    assert seen and s3.process is None
    assert _gone_within(seen[0], 1.0), f"a failed start left {_group_members(seen[0])} running"


def test_local_s3_ends_when_the_process_that_started_it_is_killed():
    import os
    import signal
    import subprocess
    import sys

    _needs_moto_and_proc()
    code = ("import time; from hpcguard.connectors.broker import LocalS3; "
            "print(LocalS3().start().process.pid, flush=True); time.sleep(600)")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(owner.stdout.readline())
    finally:
        owner.kill()  # kill -9: no __exit__, no atexit in the owner
        owner.wait()
        owner.stdout.close()
    try:
        assert _gone_within(pid, 10.0), f"moto's server {pid} outlived the process that started it"
    finally:
        if _running(pid):
            os.killpg(pid, signal.SIGKILL)
