import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcguard.connectors.errors import Rejected
from hpcguard.connectors.replay import RawMessage, dry_run, iter_recorded, pace_delay, replay
from hpcguard.settings import TopicSettings

LOAD = "#Time,Time_usec,ProducerName,component_id,job_id,load1min,load5min,load15min\n"
NET = "#Time,Time_usec,ProducerName,component_id,job_id,rx_bytes#eth0,tx_bytes#eth0\n"
SACCT = ("JobID|JobName|User|Partition|NNodes|NodeList|Submit|Start|End|Timelimit|State|ExitCode\n"
         "7|a|u|p|1|n001|1970-01-01T00:00:05|1970-01-01T00:00:20|1970-01-01T00:01:00|10:00|COMPLETED|0:0\n"
         "8|b|u|p|1|n002|1970-01-01T00:00:10|1970-01-01T00:00:12|Unknown|10:00|RUNNING|0:0\n")


def recording(root):
    (root / "ldms").mkdir()
    (root / "ipmi").mkdir()
    (root / "slurm").mkdir()
    (root / "ldms" / "loadavg.csv").write_text(LOAD + "".join(f"{t}.0,0,n00{n},{n},0,{t / 100},0,0\n"
                                                               for t in range(0, 61, 15) for n in (1, 2)))
    (root / "ldms" / "procnetdev.HEADER").write_text(NET)  # altheader
    (root / "ldms" / "procnetdev.csv").write_text("".join(f"{t}.5,0,n001,1,0,{t * 100},{t * 10}\n"
                                                          for t in range(0, 61, 15)) + "75.5,0,n001,1,0,oops,1\n")
    (root / "ipmi" / "n001.csv").write_text("".join(
        f"# hpcguard-poll host=n001 time={t}.2\nID,Name,Type,Reading,Units,Event\n3,CPU1 Temp,Temperature,{40 + t},C,'OK'\n"
        for t in (0, 15, 30)))
    (root / "slurm" / "sacct.txt").write_text(SACCT)
    (root / "failures.csv").write_text("time,node,job_id,cause\n")
    (root / "anomalies.csv").write_text("start,end,node,kind,leads_to_failure\n")
    (root / "meta.json").write_text("{}")
    (root / "notes.txt").write_text("hello\n")
    return root


def test_merged_in_time_order_with_topics(tmp_path):
    rec = recording(tmp_path)
    (Path(rec) / "ipmi" / "n009.csv").write_text("")  # a BMC that never answered: an empty log, said as such
    items = list(iter_recorded([rec], topics=TopicSettings(prefix="site")))
    msgs = [m for m in items if isinstance(m, RawMessage)]
    times = [m.time for m in msgs]
    assert times == sorted(times)
    topics = {m.topic for m in msgs}
    assert topics == {"ldms.loadavg", "ldms.procnetdev", "site.raw.ipmi", "site.raw.slurm"}
    slurm = [(m.value["event"], m.key, m.time) for m in msgs if m.topic == "site.raw.slurm"]
    assert slurm == [("submit", "7", 5.0), ("submit", "8", 10.0), ("start", "8", 12.0), ("start", "7", 20.0),
                     ("end", "7", 60.0)]
    rejected = sorted((r.source, r.line, r.kind) for r in items if isinstance(r, Rejected))
    assert rejected == [("ipmi/n009.csv", None, "empty_file"), ("ldms/procnetdev.csv", 6, "bad_number"),
                        ("notes.txt", None, "unknown_format")]
    ipmi = next(m for m in msgs if m.topic == "site.raw.ipmi")
    assert ipmi.value["source"] == "ipmi/n001.csv:1" and ipmi.key == "n001"
    ldms = next(m for m in msgs if m.topic == "ldms.procnetdev")
    assert ldms.value == {"timestamp": 0.5, "component_id": 1, "ProducerName": "n001", "job_id": 0,
                          "rx_bytes#eth0": 0, "tx_bytes#eth0": 0}


def test_slurm_node_events_ride_on_the_job_topic_at_their_start(tmp_path):
    """``sacctmgr -n -P show event`` output beside sacct is found by its content and replayed on raw.slurm, one
    envelope per node of a hostlist, at the event's start, keyed by the node; a bad row is rejected by line."""
    rec = recording(tmp_path)
    (rec / "slurm" / "events.txt").write_text(
        "n[001-002]|1970-01-01T00:00:30|1970-01-01T00:01:40|DOWN*|Not responding|slurm(64030)\n"
        "n003|1970-01-01T00:00:08|Unknown|DRAIN|Kill task failed|slurm(64030)\n"
        "n004|yesterday|Unknown|DOWN|x|root(0)\n")
    items = list(iter_recorded([rec], topics=TopicSettings(prefix="site")))
    events = [(m.key, m.time, m.value["state"], m.value.get("end")) for m in items
              if isinstance(m, RawMessage) and m.value.get("format") == "sacctmgr-event"]
    assert events == [("n003", 8.0, "DRAIN", None), ("n001", 30.0, "DOWN*", 100.0), ("n002", 30.0, "DOWN*", 100.0)]
    assert [(r.source, r.line) for r in items if isinstance(r, Rejected) and r.source.endswith("events.txt")] == [
        ("slurm/events.txt", 3)]
    from hpcguard.simulators.parity import load_job_events
    states = [(e["nodes"], e["time"]) for e in load_job_events(str(rec)) if e["event"] == "node-state"]
    assert sorted(states) == [(["n001"], 30.0), (["n002"], 30.0), (["n003"], 8.0)]  # offline: the same events


def test_forced_format_and_single_files(tmp_path):
    recording(tmp_path)
    msgs = list(iter_recorded([tmp_path / "slurm" / "sacct.txt", tmp_path / "ipmi" / "n001.csv"]))
    assert len(msgs) == 5 + 3
    forced = list(iter_recorded([tmp_path / "ipmi" / "n001.csv"], fmt="sacct"))
    assert len(forced) == 1 and forced[0].kind == "bad_header"
    with pytest.raises(ValueError):
        list(iter_recorded([tmp_path], fmt="xml"))
    with pytest.raises(FileNotFoundError):
        list(iter_recorded([tmp_path / "nope"]))


def test_dry_run_counts(tmp_path):
    report = dry_run([recording(tmp_path)])
    assert report["records"] == {"ldms:loadavg": 10, "ldms:procnetdev": 5, "ipmi": 3, "slurm": 5}
    # procnetdev: first row has no rate; four rates
    assert report["samples"] == {"ldms:loadavg": 10, "ldms:procnetdev": 4, "ipmi": 3, "jobs": 5}
    assert report["errors"] == {"bad_number": 1, "unknown_format": 1}
    assert report["files"] == 5
    assert report["counters"]["first"] == 2 and report["counters"]["ok"] == 8


def test_cli_dry_run_and_missing_path(tmp_path):
    recording(tmp_path)
    run = subprocess.run([sys.executable, "-m", "hpcguard", "replay", str(tmp_path), "--dry-run", "--json"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["samples"]["ipmi"] == 3
    run = subprocess.run([sys.executable, "-m", "hpcguard", "replay", str(tmp_path / "missing"), "--dry-run"],
                         capture_output=True, text=True)
    assert run.returncode != 0 and "no such file" in run.stderr
    run = subprocess.run([sys.executable, "-m", "hpcguard", "replay", str(tmp_path), "--dry-run", "--format", "xml"],
                         capture_output=True, text=True)
    assert run.returncode != 0 and "unknown --format" in run.stderr


@pytest.mark.broker
def test_replay_through_the_broker(tmp_path, kafka_settings):
    from kafka import KafkaConsumer

    from hpcguard.connectors.kafka import kafka_python_config

    topics = TopicSettings(prefix=f"rp{int(time.time() * 1000) % 10**9}")
    report = replay([recording(tmp_path)], kafka_settings, topics, speed=None, progress=False)
    dlq = topics.name("dlq")
    markers = report["job_progress_markers"]  # the job source's progress, among the raw.slurm records
    assert markers >= 2 and report["published"] == {"ldms.loadavg": 10, "ldms.procnetdev": 5,
                                                    topics.name("raw.ipmi"): 3, topics.name("raw.slurm"): 5 + markers,
                                                    dlq: 2}
    assert report["errors"] == {"bad_number": 1, "unknown_format": 1}
    consumer = KafkaConsumer(topics.name("raw.slurm"), dlq, **kafka_python_config(kafka_settings),
                             auto_offset_reset="earliest", consumer_timeout_ms=5000, enable_auto_commit=False)
    got = {}
    deadline = time.time() + 30
    while sum(len(v) for v in got.values()) < 7 + markers and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            for m in batch:
                got.setdefault(m.topic, []).append((m.key.decode(), json.loads(m.value)))
    consumer.close()
    assert [(k, v["event"]) for k, v in got[topics.name("raw.slurm")] if v["event"] != "progress"] == [
        ("7", "submit"), ("8", "submit"), ("8", "start"), ("7", "start"), ("7", "end")]
    progress = [v["time"] for k, v in got[topics.name("raw.slurm")] if v["event"] == "progress" and k == ""]
    assert len(progress) == markers and progress == sorted(progress)  # one partition (key ""), in time order
    letters = sorted((v["error_kind"], v["source"], v["line"]) for _, v in got[dlq])
    assert letters == [("bad_number", "ldms/procnetdev.csv", 6), ("unknown_format", "notes.txt", None)]
    assert all(v["v"] == 1 and "reason" in v for _, v in got[dlq])


def test_pacing():
    assert pace_delay(160.0, 100.0, speed=60.0, elapsed_s=0.25) == pytest.approx(0.75)
    assert pace_delay(160.0, 100.0, speed=1.0, elapsed_s=70.0) < 0  # behind: publish at once
    assert pace_delay(100.0, 100.0, speed=2.0, elapsed_s=0.0) == 0.0


@pytest.mark.broker
def test_paced_replay_publishes_everything(tmp_path, kafka_settings):
    recording(tmp_path)
    topics = TopicSettings(prefix=f"rq{int(time.time() * 1000) % 10**9}")
    report = replay([tmp_path / "ldms" / "loadavg.csv"], kafka_settings, topics, speed=600.0, progress=False)
    assert report["published"] == {"ldms.loadavg": 10} and report["errors"] == {}
