"""InfluxDB sink against a real InfluxDB 1.6 (fixture ``influxdb``) and, with Docker, InfluxDB 2."""
from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import time

import pytest
import requests

from hpcguard.connectors.influx import InfluxSink, InfluxWriteError, V1Writer
from hpcguard.connectors.lineprotocol import SCHEMA
from hpcguard.settings import InfluxSettings
from hpcguard.streams.metrics import REGISTRY

pytestmark = pytest.mark.influx
T0 = 1_700_000_000.123456  # µs-precise epoch seconds
_db_ids = itertools.count()


def _db() -> str:
    return f"hpcg_test_{next(_db_ids)}"


def _v1_sink(server, db, **kw) -> InfluxSink:
    kw.setdefault("background", False)
    kw.setdefault("backoff_s", 0.05)
    kw.setdefault("backoff_max_s", 0.2)
    return InfluxSink(V1Writer(server.url, db, timeout_s=2.0), **kw)


def _metric(outcome: str) -> float:
    return REGISTRY.get_sample_value("hpcguard_sink_points_total", {"outcome": outcome}) or 0.0


def _sample(node="n001", t=T0, temp=51.5, source="ipmi"):
    return {"node": node, "time": t, "source": source, "values": {"cpu_temp": temp, "load_1min": 2.0}}


NASTY = 'a b,c=d\\e "q" ü'


def test_every_kind_round_trips_with_escaping(influxdb):
    db = _db()
    sink = _v1_sink(influxdb, db)
    records = {
        "NodeSample": {"node": "n 1,x=y", "time": T0, "source": "ldms:meminfo",
                       "values": {"mem_usage": 41.25, "cpu_temp": float("nan"), "bytes_in": 3}},
        "NodePrediction": {"node": "n001", "time": T0 + 1, "model": "ensemble", "model_version": "1",
                           "failure_probability": 0.93, "warn": True, "lead_minutes": 4.0,
                           "network_probabilities": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]},
        "IoDegradation": {"system": "lustre", "window_start": T0 - 60, "window_end": T0, "model": "knn",
                          "features": {"read_mean": 1.5e9, "write_std": 2.0e7}, "degraded": False,
                          "probability": 0.125},
        "Action": {"action_id": "a-1", "kind": "checkpoint", "source": "failure-ensemble", "time": T0 + 2,
                   "job_id": "4242", "nodes": ["n001", "n002"], "deadline": T0 + 240,
                   "reason": {"lead_minutes": 4, "note": NASTY}},
        "ActionAck": {"action_id": "a-1", "status": "applied", "adapter": "dry-run", "time": T0 + 3,
                      "kind": "checkpoint", "job_id": "4242", "nodes": ["n001"], "detail": NASTY + "\nline 2"},
        "ProbeResult": {"probe_id": "p-7", "probe_type": "ior easy", "start": T0 - 30, "end": T0 - 10,
                        "runtime_s": 20.0, "ratio": 1.07},
    }
    for kind, rec in records.items():
        assert sink.add(kind, rec) == 1
    assert sink.flush() == len(records)
    assert sink.stats["written"] == len(records) and sink.stats["buffered"] == 0

    sample, = influxdb.rows('SELECT * FROM "node_sample"', db)
    assert sample["node"] == "n 1,x=y" and sample["source"] == "ldms:meminfo"
    assert sample["mem_usage"] == 41.25 and sample["bytes_in"] == 3.0 and "cpu_temp" not in sample
    assert sample["time"] == 1_700_000_000_123_456_000

    pred, = influxdb.rows('SELECT * FROM "node_prediction"', db)
    assert pred["warn"] is True and pred["failure_probability"] == 0.93 and pred["lead_minutes"] == 4.0
    assert [pred[f"p{i}"] for i in range(6)] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]

    io, = influxdb.rows('SELECT * FROM "io_window"', db)
    assert io["system"] == "lustre" and io["degraded"] is False and io["read_mean"] == 1.5e9
    assert io["window_s"] == pytest.approx(60.0) and io["time"] == 1_700_000_000_123_456_000

    action, = influxdb.rows('SELECT * FROM "action"', db)
    assert (action["kind"], action["source"], action["job_id"]) == ("checkpoint", "failure-ensemble", "4242")
    assert action["nodes"] == "n001,n002" and action["node_count"] == 2
    assert json.loads(action["reason"]) == {"lead_minutes": 4, "note": NASTY}
    assert action["deadline"] == pytest.approx(T0 + 240)

    ack, = influxdb.rows('SELECT * FROM "action_ack"', db)
    assert (ack["status"], ack["adapter"], ack["action_id"]) == ("applied", "dry-run", "a-1")
    assert ack["detail"] == NASTY + "\nline 2"

    probe, = influxdb.rows('SELECT * FROM "probe"', db)
    assert probe["probe_type"] == "ior easy" and probe["ratio"] == 1.07 and probe["runtime_s"] == 20.0

    measurements = {r["name"] for r in influxdb.rows("SHOW MEASUREMENTS", db)}
    assert measurements == {s.measurement for s in SCHEMA.values()}
    sink.close()


def test_batches_of_batch_size(influxdb):
    db = _db()
    writer = V1Writer(influxdb.url, db)
    bodies = []
    original = writer.write
    writer.write = lambda body: (bodies.append(body), original(body))[1]
    sink = InfluxSink(writer, batch_size=3, background=False)
    for i in range(10):
        sink.add("NodeSample", _sample(t=T0 + 15 * i))
    assert sink.flush() == 10
    assert [b.count("\n") + 1 for b in bodies] == [3, 3, 3, 1]
    assert influxdb.rows('SELECT count("cpu_temp") FROM "node_sample"', db)[0]["count"] == 10


def test_background_thread_flushes_without_explicit_call(influxdb):
    db = _db()
    sink = _v1_sink(influxdb, db, background=True, flush_interval_s=0.1)
    for i in range(5):
        sink.add("NodeSample", _sample(t=T0 + i))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and sink.stats["written"] < 5:
        time.sleep(0.05)
    assert sink.stats["written"] == 5
    assert influxdb.rows('SELECT count("cpu_temp") FROM "node_sample"', db)[0]["count"] == 5
    sink.close()


def test_outage_keeps_points_and_overflow_is_counted(influxdb):
    db_keep, db_overflow = _db(), _db()
    keep = _v1_sink(influxdb, db_keep)
    overflow = _v1_sink(influxdb, db_overflow, buffer_points=5)
    retried0, dropped0 = _metric("retried"), _metric("dropped_overflow")
    influxdb.stop()
    try:
        for i in range(20):
            keep.add("NodeSample", _sample(t=T0 + i))
        for i in range(12):
            overflow.add("NodeSample", _sample(t=T0 + i))
        assert keep.flush() == 0 and overflow.flush() == 0
        s = keep.stats
        assert s["buffered"] == 20 and s["written"] == 0 and s["retried"] > 0 and s["dropped_overflow"] == 0
        assert "unreachable" in s["last_error"] and s["consecutive_failures"] == 1
        o = overflow.stats
        assert o["buffered"] == 5 and o["dropped_overflow"] == 7
        assert _metric("dropped_overflow") - dropped0 == 7
        assert _metric("retried") - retried0 == s["retried"] + o["retried"]
    finally:
        influxdb.start()  # same directories and port
    assert keep.flush() == 20 and overflow.flush() == 5
    assert influxdb.rows('SELECT count("cpu_temp") FROM "node_sample"', db_keep)[0]["count"] == 20
    times = [r["time"] for r in influxdb.rows('SELECT "cpu_temp" FROM "node_sample"', db_overflow)]
    assert times == [1_700_000_000_123_456_000 + i * 1_000_000_000 for i in range(7, 12)]  # newest kept
    assert keep.stats["consecutive_failures"] == 0


def test_close_counts_unsent_points(influxdb):
    sink = _v1_sink(influxdb, _db())
    influxdb.stop()
    try:
        for i in range(4):
            sink.add("NodeSample", _sample(t=T0 + i))
        before = _metric("dropped_unsent")
        stats = sink.close(timeout_s=0.3)
    finally:
        influxdb.start()
    assert stats["dropped_unsent"] == 4 and stats["buffered"] == 0
    assert _metric("dropped_unsent") - before == 4


def test_refused_batch_is_rejected_not_retried(influxdb):
    db = _db()
    influxdb.query(f'CREATE DATABASE "{db}"')
    string_point = 'node_sample,node=n001 cpu_temp="hot" 1700000000000000000'  # same shard as T0
    requests.post(f"{influxdb.url}/write", params={"db": db}, data=string_point, timeout=5).raise_for_status()
    sink = _v1_sink(influxdb, db)
    sink.add("NodeSample", _sample(t=T0))  # cpu_temp float → field type conflict
    assert sink.flush() == 0
    s = sink.stats
    assert s["rejected"] == 1 and s["buffered"] == 0 and s["retried"] == 0
    assert "400" in s["last_error"] and "conflict" in s["last_error"]


def test_downsampling_keeps_one_sample_per_node_per_period(influxdb):
    db = _db()
    sink = _v1_sink(influxdb, db, sample_every_s=60)
    kept = sum(sink.add("NodeSample", _sample(node=n, t=T0 + 15 * i)) for n in ("n1", "n2") for i in range(20))
    sink.add("NodePrediction", {"node": "n1", "time": T0, "model": "m", "model_version": "1",
                                "failure_probability": 0.1, "warn": False, "lead_minutes": 0.0})
    assert kept == 10 and sink.stats["downsampled"] == 30
    sink.flush()
    counts = {r["node"]: r["count"] for r in
              influxdb.rows('SELECT count("cpu_temp") FROM "node_sample" GROUP BY "node"', db)}
    assert counts == {"n1": 5, "n2": 5}


def test_from_settings_validates():
    with pytest.raises(ValueError, match="influx.url"):
        InfluxSink.from_settings(InfluxSettings(url=""))
    with pytest.raises(ValueError, match="version must be 1 or 2"):
        InfluxSink.from_settings(InfluxSettings(url="http://127.0.0.1:1", version=3))
    with pytest.raises(ValueError, match="org"):
        InfluxSink.from_settings(InfluxSettings(url="http://127.0.0.1:1", version=2, org=""))


def test_from_settings_v1(influxdb):
    db = _db()
    sink = InfluxSink.from_settings(InfluxSettings(url=influxdb.url, version=1, database=db), background=False)
    sink.add("ProbeResult", {"probe_id": "p", "probe_type": "ior", "start": T0, "end": T0 + 5, "runtime_s": 5.0})
    assert sink.close()["written"] == 1
    assert influxdb.rows('SELECT "runtime_s" FROM "probe"', db)[0]["runtime_s"] == 5.0
    with pytest.raises(RuntimeError, match="closed"):
        sink.add("ProbeResult", {"probe_id": "p", "probe_type": "ior", "start": 0, "end": 1, "runtime_s": 1})


def test_unreachable_server_error_is_retryable():
    from _influx_fixture import free_port

    w = V1Writer(f"http://127.0.0.1:{free_port()}", "db", timeout_s=0.5)
    with pytest.raises(InfluxWriteError) as info:
        w.write("m x=1 1")
    assert info.value.retryable


def test_v2_writer_errors_are_mapped_and_points_kept(influxdb):
    """InfluxDB 1.6 has no /api/v2/write: the 2.x backend's failure is reported, points stay buffered."""
    settings = InfluxSettings(url=influxdb.url, version=2, org="o", bucket="b", token="t", timeout_s=2.0)
    sink = InfluxSink.from_settings(settings, background=False)
    sink.add("NodeSample", _sample())
    assert sink.flush() == 0
    s = sink.stats
    assert s["buffered"] == 1 and s["retried"] == 1 and "404" in s["last_error"]
    sink.close(timeout_s=0.05)


def _docker_engine() -> bool:
    return bool(shutil.which("docker")) and subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def test_v2_sink_against_influxdb2_container():
    """InfluxDB 2.x path through influxdb-client, against a real InfluxDB 2 (testcontainers)."""
    if not _docker_engine():
        pytest.skip("no Docker engine answers `docker info`: InfluxDB 2 container test not run")
    tc = pytest.importorskip("testcontainers.influxdb2", reason="testcontainers (pip install .[docker]) missing")
    token, org, bucket = "hpcguard-test-token", "hpcguard", "hpcguard"
    with tc.InfluxDb2Container(image="influxdb:2.7", init_mode="setup", admin_token=token, org_name=org,
                               bucket=bucket, username="hpcguard", password="hpcguard-secret") as container:
        url = container.get_url()
        sink = InfluxSink.from_settings(InfluxSettings(url=url, version=2, org=org, bucket=bucket, token=token),
                                        background=False)
        for i in range(7):
            sink.add("NodeSample", _sample(t=time.time() - 60 + i))
        assert sink.flush() == 7
        sink.close()
        from influxdb_client import InfluxDBClient

        with InfluxDBClient(url=url, token=token, org=org) as client:
            tables = client.query_api().query(
                f'from(bucket:"{bucket}") |> range(start: -1h) |> filter(fn: (r) => r._measurement == "node_sample"'
                f' and r._field == "cpu_temp")')
            assert sum(len(t.records) for t in tables) == 7


def test_sink_agent_writes_every_sample_of_a_batch(influxdb, tmp_path):
    """The sink agent (Faust's test context) writes a NodeSamples batch sample by sample, a single
    NodeSample as it is; a sample it cannot write is a dead letter, the rest of the batch is written."""
    import asyncio

    from hpcguard.settings import Settings
    from hpcguard.streams.app import Pipeline, create_app
    from hpcguard.streams.topics import TopicNames

    db = _db()
    sink = _v1_sink(influxdb, db)
    s = Settings()
    s.worker.data_dir = str(tmp_path / "state")
    box: list = []
    topics = TopicNames.from_settings(s.topics)
    app = create_app(Pipeline(settings=s, topics=topics, sink=sink, outbox=box, roles=frozenset({"sink"})))
    app.finalize()
    app.conf.store = "memory://"
    app.flow_control.resume()
    batch = {"samples": [_sample("n001", T0 + i, source="ldms:meminfo") for i in range(3)]
             + [{"node": "n002", "time": T0, "source": "ldms:meminfo", "values": "not a mapping"}], "v": 1}

    async def feed() -> None:
        agent = next(a for a in app.agents.values() if a.name.endswith("influx-sink"))
        async with agent.test_context() as a:
            a._get_strtopic = lambda channel: topics.samples_os  # the test wrapper cannot name a multi-topic channel
            await a.put(json.dumps(batch).encode(), key=b"n001")
            await a.put(json.dumps(_sample("n003", T0)).encode(), key=b"n003")
            await asyncio.sleep(0.2)

    asyncio.run(feed())
    sink.flush()
    rows = influxdb.rows('SELECT * FROM "node_sample"', db)
    assert sorted(r["node"] for r in rows) == ["n001", "n001", "n001", "n003"]
    assert [v["error_kind"] for t, _, v in box if t.endswith("dlq")] == ["sink_rejected"]
