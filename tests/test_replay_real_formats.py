"""Replay and offline loading of the real samples in ``../shared/data/real-formats/`` and the FASRC day.

sacct ``--format=ALL`` and ``-p`` dumps are detected by their columns and read with the
``[sacct]`` settings of ``--config``; every LDMS ``store_csv`` header variant is detected
and loads offline to the same rows as replay; ``as_is`` schema names reach a topic the
worker subscribes to; an archive of per-node logs is replayed in time order across nodes;
the FASRC day goes through a real worker with as many samples as the dry run counts.
"""
import io
import json
import subprocess
import sys
import tarfile
import time
import types
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from hpcguard.cli import app
from hpcguard.connectors import replay as replay_mod
from hpcguard.connectors.errors import Rejected
from hpcguard.connectors.fasrc import SdrLineCache, buffer_archive_polls, iter_archive_logs, scan_sdr_log
from hpcguard.connectors.ipmi import read_ipmi_lines
from hpcguard.connectors.ldms import LdmsDecoder
from hpcguard.connectors.mapping import SensorMapping
from hpcguard.connectors.recorded import load_sensor_grid, read_store_csv_arrays
from hpcguard.connectors.replay import RawMessage, detect_format, dry_run, iter_recorded, ldms_topic
from hpcguard.connectors.sacct import SacctDialect, decode_slurm_envelope, job_events, read_sacct
from hpcguard.models.features import CANONICAL_SENSORS
from hpcguard.settings import Settings, TopicSettings
from hpcguard.streams.topics import TopicNames
from _replay_clock import FakeClock
from _shared import SHARED_DATA

SHARED = SHARED_DATA
REAL = SHARED / "real-formats"
ARCHIVE = SHARED / "fasrc-ipmi" / "ipmi-2025-06-03.tar.xz"
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason=f"real-format samples not found at {REAL}")
needs_archive = pytest.mark.skipif(not ARCHIVE.is_file(), reason=f"FASRC archive not found at {ARCHIVE}")
BYTES_IN = CANONICAL_SENSORS.index("bytes_in")
DAY0 = 1748908800.0  # 2025-06-03 00:00:00 UTC


def _items(paths, **kw):
    items = list(iter_recorded(paths, **kw))
    return [m for m in items if isinstance(m, RawMessage)], [r for r in items if isinstance(r, Rejected)]


# --- 1. sacct --format=ALL and friends are detected by their columns --------------------------------
def test_sacct_format_all_is_detected_and_read_not_rejected_whole():
    gcm = REAL / "sacct" / "gcm_sample-sacct-output.txt"
    assert gcm.read_text().startswith("Account|AdminComment|")
    assert detect_format(gcm) == "sacct"
    stats = {}
    assert list(read_sacct(gcm, stats=stats)) == [] and stats == {"jobs": 0, "steps": 68, "rejected": 0}
    msgs, rejected = _items([gcm])
    assert msgs == [] and rejected == []  # 68 job steps (8012944_24093.0 ...): counted and skipped, no dead letter
    # the broken-record sample: its one bad line is dead-lettered, not the whole file
    broken = REAL / "sacct" / "gcm_sample-sacct-output-with-invalid-lines.txt"
    msgs, rejected = _items([broken])
    assert [(r.line, r.kind) for r in rejected] == [(2, "bad_row")] and "broken across lines" in rejected[0].reason
    # sacct -P -o JobID,State,End: no Submit/Start, the end events only, keyed by job id
    midnight = REAL / "sacct" / "gcm_sample-sacct-output-midnight-edge-case-small.txt"
    msgs, rejected = _items([midnight])
    end = datetime(2021, 4, 7, 23, 59, 38, tzinfo=timezone.utc).timestamp()
    assert rejected == [] and [(m.key, m.value["event"], m.time) for m in msgs] == [
        ("39125549", "end", end), ("39125551", "end", end), ("39125552", "end", end)]
    assert {decode_slurm_envelope(m.value)["state"] for m in msgs} == {"CANCELLED"}


def test_sacct_header_with_the_configured_delimiter(tmp_path):
    lines = (REAL / "sacct" / "gcm_sample-sacct-output-midnight-edge-case-small.txt").read_text().splitlines()
    p = tmp_path / "sacct.txt"
    p.write_text("\n".join(line.replace("|", ";") for line in lines) + "\n")
    assert detect_format(p) is None and detect_format(p, SacctDialect(delimiter=";")) == "sacct"
    cfg = tmp_path / "site.toml"
    cfg.write_text('[sacct]\ndelimiter = ";"\n')
    plain = CliRunner().invoke(app, ["replay", str(p), "--dry-run", "--json"])
    configured = CliRunner().invoke(app, ["replay", str(p), "--dry-run", "--json", "--config", str(cfg)])
    assert json.loads(plain.stdout)["errors"] == {"unknown_format": 1}
    report = json.loads(configured.stdout)
    assert report["errors"] == {} and report["samples"] == {"jobs": 3}  # three jobs, eight steps skipped


# --- 3. replay --config applies the file's [sacct] section ------------------------------------------
def _cirrus_oracle() -> dict[str, dict[str, float]]:
    """SAFE's expected parse of the Cirrus dump: epoch Submit/Start/End per job (Europe/London)."""
    rows = ET.parse(REAL / "sacct" / "safe_cirrus_expected.xml").getroot().findall("CirrusSlurm")
    return {r.findtext("JobID"): {e: float(r.findtext(e.capitalize())) for e in ("submit", "start", "end")}
            for r in rows if r.findtext("SubJob") == "false"}


def test_cirrus_dump_with_its_time_zone_matches_the_safe_oracle():
    oracle = _cirrus_oracle()
    assert len(oracle) == 28
    msgs, rejected = _items([REAL / "sacct" / "safe_cirrus_acct.txt"], sacct=SacctDialect(timezone="Europe/London"))
    assert rejected == []
    got: dict[str, dict[str, float]] = {}
    for m in msgs:
        got.setdefault(m.key, {})[m.value["event"]] = m.time
        assert m.value["tz"] == "Europe/London"
    assert {job: got[job] for job in oracle} == oracle
    utc, _ = _items([REAL / "sacct" / "safe_cirrus_acct.txt"], sacct=SacctDialect())
    job = next(iter(oracle))
    assert next(m.time for m in utc if m.key == job and m.value["event"] == "submit") == oracle[job]["submit"] + 3600


@pytest.mark.broker
def test_cli_replay_applies_the_config_files_sacct_section(tmp_path, kafka_settings):
    from kafka import KafkaConsumer

    from hpcguard.connectors.kafka import kafka_python_config

    cfg = tmp_path / "cirrus.toml"
    cfg.write_text('[sacct]\ntimezone = "Europe/London"\n')
    prefix = f"rc{int(time.time() * 1000) % 10**9}"
    run = subprocess.run([sys.executable, "-m", "hpcguard", "replay", str(REAL / "sacct" / "safe_cirrus_acct.txt"),
                          "--bootstrap", kafka_settings.bootstrap, "--prefix", prefix, "--config", str(cfg), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    topic = f"{prefix}.raw.slurm"
    events = sum(len(job_events(rec)) for rec in read_sacct(REAL / "sacct" / "safe_cirrus_acct.txt",
                                                            dialect=SacctDialect()))
    report = json.loads(run.stdout)  # the job events and the replay's job-progress markers (no job: key "")
    assert report["job_progress_markers"] >= 1 and report["published"] == {topic: events + report["job_progress_markers"]}
    consumer = KafkaConsumer(topic, **kafka_python_config(kafka_settings), auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, enable_auto_commit=False)
    got: dict[str, dict[str, float]] = {}
    for m in consumer:
        env = json.loads(m.value)
        got.setdefault(m.key.decode(), {})[env["event"]] = env["time"]
    consumer.close()
    oracle = _cirrus_oracle()
    assert {job: got[job] for job in oracle} == oracle


# --- 2. store_csv header variants: detected, replayed and loaded offline alike ------------------------
def _variant(text: str, kind: str) -> str:
    """The real quick-start procnetdev file rewritten as LDMS writes ``kind`` (time_format=1, ietfcsv, userdata)."""
    header, *rows = text.strip().split("\n")
    cols = header.split(",")
    if kind == "msec":
        cols[0] = "#Time_msec"
        out = []
        for row in rows:
            f = row.split(",")
            sec, frac = f[0].split(".")
            f[0], f[1] = sec + frac[:3], str(int(frac[3:6]))  # whole ms, the µs within it
            out.append(",".join(f))
        return ",".join(cols) + "\n" + "\n".join(out) + "\n"
    if kind == "quoted":
        return ",".join(f'"{c}"' for c in cols) + "\n" + "\n".join(rows) + "\n"
    if kind == "userdata":
        head = cols[:3] + [f"{c}.{part}" for c in cols[3:] for part in ("userdata", "value")]
        body = [",".join(f[:3] + [x for v in f[3:] for x in ("0", v)]) for f in (r.split(",") for r in rows)]
        return ",".join(head) + "\n" + "\n".join(body) + "\n"
    return text


@pytest.mark.parametrize("kind", ["msec", "quoted", "userdata"])
def test_store_csv_variants_replay_and_load_like_the_classic_file(tmp_path, kind):
    real = (REAL / "ldms" / "ovis_quickstart" / "procnetdev").read_text()
    eth = real.replace("#lo", "#eth0")  # the sample's only interface is lo, which never counts
    for name, text in (("classic", eth), (kind, _variant(eth, kind))):
        (tmp_path / name / "ldms").mkdir(parents=True)
        (tmp_path / name / "ldms" / "procnetdev").write_text(text)
    f = tmp_path / kind / "ldms" / "procnetdev"
    assert detect_format(f) == "store_csv"
    classic, c_rej = _items([tmp_path / "classic"])
    rows, rej = _items([tmp_path / kind])
    assert rej == c_rej == [] and len(rows) == len(classic) == real.count("\n") - 1
    for a, b in zip(rows, classic):
        assert a.topic == b.topic == "ldms.procnetdev" and a.key == b.key
        assert a.value["timestamp"] == pytest.approx(b.value["timestamp"], abs=1e-6)
        assert {**a.value, "timestamp": 0} == {**b.value, "timestamp": 0}
    assert rows[0].value["rx_bytes#eth0"] == 12328527 and rows[0].key == "s0"
    # offline: the fast loader takes every variant, to the same grid as the classic file
    t, names, cols = read_store_csv_arrays(f)
    assert t[0] == pytest.approx(1558387831.001798, abs=1e-6) and cols["rx_bytes"][0] == 12328527
    g, g0 = load_sensor_grid(tmp_path / kind), load_sensor_grid(tmp_path / "classic")
    assert g.nodes == g0.nodes == ["s0", "s1"] and g.skipped == {}
    np.testing.assert_allclose(g.values, g0.values, rtol=1e-5, equal_nan=True)  # ms + µs: times within 1e-6 s
    # and the stream decoder's rates of the replayed rows agree with the grid's first step
    dec, rates = LdmsDecoder(), []
    for m in rows:
        s = dec.decode("procnetdev", m.value)
        if s is not None and s["node"] == "s0" and s["time"] < g.t0 + g.grid_s:
            rates.append(s["values"]["bytes_in"])
    assert rates and g.values[0, 0, BYTES_IN] == pytest.approx(np.mean(rates))


def test_loopback_only_and_bad_rows_are_counted_offline_never_fatal(tmp_path):
    (tmp_path / "ldms").mkdir()
    real = (REAL / "ldms" / "ovis_quickstart" / "procnetdev").read_text()
    n_rows = real.count("\n") - 1
    (tmp_path / "ldms" / "procnetdev").write_text(real + "1558387840.0,0,s0,0,0,0,oops" + ",0" * 15 + "\n")
    grid = load_sensor_grid(tmp_path)
    # lo never counts: every row lacks bytes_in/bytes_out, as the stream dead-letters it; the bad row is counted too
    assert grid.skipped == {"ldms_bad_number": 1, "ldms_missing_field": 2 * n_rows}
    assert np.isnan(grid.values).all()
    report = dry_run([tmp_path])
    assert report["errors"] == {"bad_number": 1, "missing_field": n_rows}


# --- 4. as_is schema names ---------------------------------------------------------------------------
def test_as_is_schema_names_reach_a_subscribed_topic_and_decode(tmp_path):
    (tmp_path / "ldms").mkdir()
    text = (REAL / "ldms" / "ovis_quickstart" / "procnetdev").read_text().replace("#lo", "#eth0")
    (tmp_path / "ldms" / "procnetdev_8d2b8bd").write_text(text)
    default = TopicSettings()
    msgs, _ = _items([tmp_path], topics=default)
    assert {m.topic for m in msgs} == {"ldms.procnetdev"} and "ldms.procnetdev" in TopicNames.from_settings(default).ldms
    assert {m.kind for m in msgs} == {"ldms:procnetdev_8d2b8bd"}
    site = TopicSettings(ldms_schemas=default.ldms_schemas + ("procnetdev_8d2b8bd",))
    assert ldms_topic("procnetdev_8d2b8bd", site) == "ldms.procnetdev_8d2b8bd"
    assert "ldms.procnetdev_8d2b8bd" in TopicNames.from_settings(site).ldms
    # the worker decodes a topic's rows under its ldms_schemas name: the digest name resolves to procnetdev
    a, b = LdmsDecoder(), LdmsDecoder()
    by_digest = [a.decode("procnetdev_8d2b8bd", m.value) for m in msgs]
    by_base = [b.decode("procnetdev", m.value) for m in msgs]
    assert by_digest == by_base and sum(s is not None for s in by_digest) == len(msgs) - 2  # first row per node
    grid = load_sensor_grid(tmp_path)
    assert grid.nodes == ["s0", "s1"] and np.isfinite(grid.values[:, :, BYTES_IN]).any()


# --- 5. archives replay in time order across nodes ---------------------------------------------------
def _archive(path: Path, logs: dict[str, str]) -> Path:
    with tarfile.open(path, "w:xz") as tf:
        for name, text in logs.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _log(minutes, temp=40):
    return "".join(f"Timestamp: 2025-06-03 00:{m:02d}:01 UTC\nCPU 1 Temp | {temp + m} degrees C | ok\n"
                   for m in minutes)


def test_archive_polls_are_merged_in_time_order_across_nodes(tmp_path):
    arc = _archive(tmp_path / "day.tar.xz", {"a-2025-06-03.txt": _log([2, 3, 4]) + "garbage\n",
                                            "b-2025-06-03.txt": _log([0, 1, 3, 5])})
    msgs, rejected = _items([arc])
    assert [(m.key, m.time - DAY0) for m in msgs] == [("b", 1), ("b", 61), ("a", 121), ("a", 181), ("b", 181),
                                                      ("a", 241), ("b", 301)]
    assert msgs[2].value["text"] == "CPU 1 Temp | 42 degrees C | ok\n"
    assert msgs[2].value["source"] == "day.tar.xz:a-2025-06-03.txt:1"
    # a line outside the grammar stays in its poll (the decoder refuses that poll); nothing is lost
    assert rejected == [] and msgs[5].value["text"].endswith("garbage\n")
    polls = buffer_archive_polls(arc)
    assert len(polls) == 7 and polls.ids.dtype == np.uint32 and len(polls.lines) == 7  # 6 readings + garbage


@needs_archive
def test_real_archive_prefix_replays_every_poll_in_time_order():
    msgs, rejected = _items([ARCHIVE], limit=12)
    times = [m.time for m in msgs]
    assert rejected == [] and times == sorted(times)
    # the same envelopes as cutting every node's log on its own, only reordered
    per_node = [e for name, node, text in iter_archive_logs(ARCHIVE, limit=12)
                for e in read_ipmi_lines(text.split("\n"), f"{ARCHIVE.name}:{name}", "ipmitool-sdr", host=node)]
    assert sorted((e["time"], e["host"], e["text"]) for e in per_node) == \
        sorted((m.time, m.key, m.value["text"]) for m in msgs)
    assert len({m.key for m in msgs}) == 4 and msgs[0].time == DAY0 + 1  # the four Lenovo nodes answer




@pytest.mark.broker
def test_paced_archive_replay_follows_record_time_across_nodes(tmp_path, kafka_settings, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(replay_mod, "_time", types.SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep,
                                                                  time=clock.time))
    arc = _archive(tmp_path / "day.tar.xz", {"a-2025-06-03.txt": _log([2, 4]), "b-2025-06-03.txt": _log([0, 1, 3])})
    topics = TopicSettings(prefix=f"pa{int(time.time() * 1000) % 10**9}")
    report = replay_mod.replay([arc], kafka_settings, topics, speed=60.0, progress=False)
    assert report["published"] == {topics.name("raw.ipmi"): 5}
    # one minute of record time is one second at 60×, before every later poll of either node
    assert clock.sleeps == pytest.approx([1.0] * 4)


# --- 6. the FASRC day through a running worker --------------------------------------------------------
@needs_archive
@pytest.mark.broker
def test_fasrc_prefix_through_the_worker_gives_the_dry_runs_samples(tmp_path, kafka_settings):
    from _pipeline import WorkerProcess

    limit = 9  # eight silent BMCs and one Lenovo XCC node (278 of 1,440 polls answered)
    dry = dry_run([ARCHIVE], limit=limit)
    expected = dry["samples"]["ipmi"]
    assert expected == 278 and dry["errors"] == {}
    with WorkerProcess(kafka_settings, tmp_path, roles=["normalize"]) as w:
        run = subprocess.run([sys.executable, "-m", "hpcguard", "replay", str(ARCHIVE), "--bootstrap",
                              kafka_settings.bootstrap, "--prefix", w.prefix, "--limit", str(limit), "--json"],
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        report = json.loads(run.stdout)
        published = report["published"][w.topics.raw_ipmi]
        assert report["errors"] == {} and published == expected  # the silent polls printed no rows: no envelope
        samples = w.wait_for(w.topics.samples_ipmi, lambda r: len(r) >= expected, timeout_s=240)
        dead = w.wait_for(w.topics.dlq, lambda r: True)
    assert len(samples) == expected and dead == []
    assert {s["node"] for s in samples} == {"holy2c112501"}
    # the worker's values are the dry run's scan of that node's log, poll by poll
    name, node, text = list(iter_archive_logs(ARCHIVE, limit=limit))[-1]
    scan = scan_sdr_log(text, node, SdrLineCache(SensorMapping.load()), name)
    offline: dict[float, dict[str, float]] = {}
    for p, k, v in zip(scan.poll.tolist(), scan.sensor.tolist(), scan.values.tolist()):
        offline.setdefault(float(scan.times[p]), {})[CANONICAL_SENSORS[k]] = v
    assert {s["time"]: s["values"] for s in samples} == offline
    assert offline[DAY0 + 1] == {"cpu_fan_rpm": 2560.0}


# --- 7. load_sensor_grid takes [ipmi] from settings -------------------------------------------------
def test_loader_takes_ipmi_input_from_settings(tmp_path, monkeypatch):
    (tmp_path / "ipmi").mkdir()
    p = tmp_path / "ipmi" / "r740.txt"
    p.write_text((REAL / "ipmi" / "datakit_R740v1.txt").read_text())  # bare `ipmitool sdr`, no poll line
    monkeypatch.delenv("HPCGUARD_IPMI__UNTIMED", raising=False)
    monkeypatch.delenv("HPCGUARD_CONFIG", raising=False)
    strict = load_sensor_grid(tmp_path)
    assert strict.nodes == [] and strict.skipped["ipmi_missing_field"] > 0
    cfg = tmp_path / "site.toml"
    cfg.write_text('[ipmi]\nuntimed = "mtime"\n')
    grid = load_sensor_grid(tmp_path, settings=Settings.load(cfg))
    assert grid.nodes == ["r740"] and grid.t0 == pytest.approx(15.0 * (p.stat().st_mtime // 15.0))
    assert grid.values[0, -1, :2].tolist() == [45.0, 3480.0]  # max of the two 'Temp', min of Fan1..Fan6
    monkeypatch.setenv("HPCGUARD_IPMI__UNTIMED", "mtime")  # the default settings read the environment
    np.testing.assert_array_equal(load_sensor_grid(tmp_path).values, grid.values)
