"""The FASRC layout (per-node ``ipmitool sdr`` logs with ``Timestamp: ... UTC`` lines) and the real 1,724-node day."""
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from hpcguard.cli import app
from hpcguard.connectors.errors import ParseError
from hpcguard.connectors.fasrc import SdrLineCache, is_archive, iter_archive_logs, scan_sdr_log
from hpcguard.connectors.ipmi import decode_ipmi_envelope, read_ipmi_file
from hpcguard.connectors.mapping import SensorMapping
from hpcguard.connectors.recorded import load_sensor_grid
from hpcguard.connectors.replay import dry_run, iter_recorded
from hpcguard.models.features import CANONICAL_SENSORS
from _shared import SHARED_DATA

ARCHIVE = SHARED_DATA / "fasrc-ipmi" / "ipmi-2025-06-03.tar.xz"
needs_archive = pytest.mark.skipif(not ARCHIVE.is_file(), reason=f"FASRC archive not found at {ARCHIVE}")
DAY0 = 1748908800.0  # 2025-06-03 00:00:00 UTC
FAN = CANONICAL_SENSORS.index("cpu_fan_rpm")

LOG = """Timestamp: 2025-06-03 00:00:01 UTC
CPU 1 Temp               | 41 degrees C      | ok
Fan1A_Tach               | 3456 RPM          | ok
Fan1B_Tach               | 2560 RPM          | ok
PSU1 FAN_A               | 8950 RPM          | ok
Fan 1                    | 0x00              | ok
Sys Power                | 10 Watts          | ok
Timestamp: 2025-06-03 00:01:01 UTC
Timestamp: 2025-06-03 00:02:02 UTC
CPU 1 Temp               | no reading        | ns
Fan1A_Tach               | 0 RPM             | cr
Fan1B_Tach               | 2432 RPM          | ok
Timestamp: 2025-06-03 00:03:01 UTC
Fan1B_Tach               | 2400 RPM          | ok
garbage without separators
"""


def small_archive(path: Path, logs: dict[str, str]) -> Path:
    with tarfile.open(path, "w:xz") as tf:
        for name, text in logs.items():
            data = text.encode()
            info = tarfile.TarInfo(f"home/jwells/ipmi/data/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_scan_matches_the_per_poll_decoder(tmp_path):
    mapping = SensorMapping.load()
    scan = scan_sdr_log(LOG, "holy1", SdrLineCache(mapping), "holy1.txt")
    assert scan.times.tolist() == [DAY0 + 1, DAY0 + 61, DAY0 + 122]
    got = {(int(p), CANONICAL_SENSORS[s]): v for p, s, v in zip(scan.poll, scan.sensor, scan.values)}
    # min over RPM fans (PSU fans and the discrete 'Fan 1' state do not count); a stopped fan (0 RPM, cr) does
    assert got == {(0, "cpu_temp"): 41.0, (0, "cpu_fan_rpm"): 2560.0, (2, "cpu_fan_rpm"): 0.0}
    # the last poll holds a malformed line: refused whole, here and by the per-poll decoder
    assert scan.lines == 9 and [(r.line, r.kind) for r in scan.rejected] == [(15, "bad_row")]
    p = tmp_path / "holy1-2025-06-03.txt"
    p.write_text(LOG)
    envs = list(read_ipmi_file(p))
    assert [e["host"] for e in envs if isinstance(e, dict)] == ["holy1"] * 3  # the empty poll has no block
    decoded = {}
    for env in (e for e in envs if isinstance(e, dict)):
        try:
            for s in decode_ipmi_envelope(env, mapping):
                decoded.update({(s["time"], k): v for k, v in s["values"].items()})
        except ParseError as exc:
            assert exc.kind == "bad_row" and exc.line == 15
    assert decoded == {(DAY0 + 1, "cpu_temp"): 41.0, (DAY0 + 1, "cpu_fan_rpm"): 2560.0,
                       (DAY0 + 122, "cpu_fan_rpm"): 0.0}


def test_a_full_line_cache_starts_afresh_with_the_same_results():
    mapping = SensorMapping.load()
    small = SdrLineCache(mapping, max_lines=3)
    first = scan_sdr_log(LOG, "a", small)
    text = LOG.replace("41 degrees", "42 degrees")
    second = scan_sdr_log(text, "b", small)  # the cache was over its limit: cleared first
    assert len(small.info) == len(set(text.split("\n")))
    assert first.values.tolist() == [41.0, 2560.0, 0.0] and second.values.tolist() == [42.0, 2560.0, 0.0]
    assert second.times.tolist() == first.times.tolist()


def test_loader_and_replay_accept_the_layout_as_files_and_as_archive(tmp_path):
    rec = tmp_path / "rec" / "ipmi"
    rec.mkdir(parents=True)
    (rec / "holy1-2025-06-03.txt").write_text(LOG)
    grid = load_sensor_grid(rec.parent, grid_s=60.0)
    assert grid.nodes == ["holy1"] and grid.t0 == DAY0
    assert grid.values[0, :, FAN].tolist() == [2560.0, pytest.approx(np.nan, nan_ok=True), 0.0]
    assert grid.skipped == {"ipmi_bad_row": 1}
    silent = LOG.split("\n")[0] + "\n"  # one timestamp, no sensor output
    arc = small_archive(tmp_path / "day.tar.xz", {"holy1-2025-06-03.txt": LOG, "holy2-2025-06-03.txt": silent})
    assert is_archive(arc) and [n for _, n, _ in iter_archive_logs(arc)] == ["holy1", "holy2"]
    rec2 = tmp_path / "rec2" / "ipmi"
    rec2.mkdir(parents=True)
    arc.rename(rec2 / "day.tar.xz")
    grid2 = load_sensor_grid(rec2.parent, grid_s=60.0)
    assert grid2.nodes == ["holy1"]  # holy2 polled, reported nothing
    np.testing.assert_array_equal(grid2.values, grid.values)
    report = dry_run([rec2 / "day.tar.xz"])
    assert report["records"] == {"ipmi": 4} and report["samples"] == {"ipmi": 2}
    assert report["errors"] == {"bad_row": 1}
    cov = report["coverage"]
    assert cov["nodes"] == 2 and cov["sensors"]["cpu_fan_rpm"]["share"] == 0.5  # 2 of 4 polls
    assert cov["sensors"]["cpu_fan_rpm"]["raw_names"] == {"Fan1A_Tach": 2, "Fan1B_Tach": 2}
    assert cov["unit_mismatch"] == []
    assert {"PSU1 FAN_A", "Sys Power"} <= {u["name"] for u in cov["unmapped"]}
    msgs = [m for m in iter_recorded([rec2 / "day.tar.xz"]) if not hasattr(m, "reason")]
    # replay publishes every non-empty poll; the worker's decoder refuses the malformed one
    assert [(m.key, m.time) for m in msgs] == [("holy1", DAY0 + 1), ("holy1", DAY0 + 122), ("holy1", DAY0 + 181)]


@needs_archive
def test_real_fasrc_prefix_parses_with_values_and_family_coverage():
    report = dry_run([ARCHIVE], limit=12)
    cov = report["coverage"]
    assert cov["nodes"] == 12 and report["records"]["ipmi"] == 12 * 1440 and report["errors"] == {}
    # holy2c0929..0934: timestamps only (BMC silent); holy2c1125/1126: Lenovo XCC, 278 of 1440 polls answered
    assert cov["groups"]["no-sensors"]["nodes"] == 8 and cov["groups"]["lenovo-xcc"]["nodes"] == 4
    assert report["samples"]["ipmi"] == 4 * 278 and report["sensor_lines"] == 4 * 38920
    assert cov["sensors"]["cpu_fan_rpm"]["share"] == pytest.approx(4 * 278 / (12 * 1440), abs=1e-4)
    assert set(cov["sensors"]["cpu_fan_rpm"]["raw_names"]) == {f"Fan{i}{ab}_Tach" for i in (1, 2, 3) for ab in "AB"}
    assert cov["sensors"]["cpu_temp"]["share"] == 0.0  # powered-down day: 'CPU 1 Temp | no reading | ns'
    assert any(w.startswith("cpu_temp: 0%") and "lenovo-xcc (4 nodes)" in w for w in report["coverage_warnings"])
    member, node, text = next(m for i, m in enumerate(iter_archive_logs(ARCHIVE, limit=9)) if i == 8)
    assert node == "holy2c112501" and member.endswith("holy2c112501-2025-06-03.txt")
    scan = scan_sdr_log(text, node, SdrLineCache(SensorMapping.load()), member)
    first = int(scan.poll.min())
    assert scan.times[0] == DAY0 + 1  # 'Timestamp: 2025-06-03 00:00:01 UTC'
    fan = scan.values[(scan.poll == first) & (scan.sensor == FAN)]
    assert fan.tolist() == [2560.0]  # min of Fan1A..Fan3B_Tach 3456/2560/3584/2560/3584/2560 RPM


@needs_archive
def test_cli_dry_run_streams_the_archive():
    result = CliRunner().invoke(app, ["replay", str(ARCHIVE), "--dry-run", "--json", "--limit", "9"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["coverage"]["nodes"] == 9 and report["files"] == 1
    assert report["coverage"]["groups"]["lenovo-xcc"]["shares"]["cpu_fan_rpm"] == pytest.approx(278 / 1440, abs=1e-4)
    assert len(report["mapping_digest"]) == 64 and report["sensor_lines"] == 38920


@pytest.mark.broker
def test_archive_replays_through_the_broker_into_the_workers_decoder(tmp_path, kafka_settings):
    """replay publishes one envelope per answered poll; the worker's door and decoder accept each."""
    import time

    from kafka import KafkaConsumer

    from hpcguard.connectors.kafka import kafka_python_config
    from hpcguard.connectors.replay import replay
    from hpcguard.connectors.validation import DoorLimits, check_record
    from hpcguard.settings import TopicSettings

    arc = small_archive(tmp_path / "day.tar.xz", {"holy1-2025-06-03.txt": LOG, "holy3-2025-06-03.txt": LOG})
    topics = TopicSettings(prefix=f"fa{int(time.time() * 1000) % 10**9}")
    report = replay([arc], kafka_settings, topics, progress=False)
    raw = topics.name("raw.ipmi")
    assert report["published"] == {raw: 6} and report["errors"] == {}
    consumer = KafkaConsumer(raw, **kafka_python_config(kafka_settings), auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, enable_auto_commit=False)
    values, failures, deadline = {}, [], time.time() + 30
    while len(values) + len(failures) < 6 and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            for m in batch:
                env = check_record("ipmi", json.loads(m.value), DoorLimits())
                try:
                    for s in decode_ipmi_envelope(env):
                        values[(m.key.decode(), s["time"])] = s["values"]
                except ParseError as exc:  # the poll holding the garbage line
                    failures.append((m.key.decode(), exc.kind))
    consumer.close()
    for n in ("holy1", "holy3"):
        assert values.pop((n, DAY0 + 1)) == {"cpu_temp": 41.0, "cpu_fan_rpm": 2560.0}
        assert values.pop((n, DAY0 + 122)) == {"cpu_fan_rpm": 0.0}
    assert values == {}
    assert sorted(failures) == [("holy1", "bad_row"), ("holy3", "bad_row")]
