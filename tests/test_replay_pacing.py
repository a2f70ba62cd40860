"""Paced replay starts its clock at the first telemetry record, not at the earliest job event."""
import time
import types

import pytest

from hpcguard.connectors import replay as replay_mod
from hpcguard.settings import TopicSettings
from _replay_clock import FakeClock

T0 = 1_700_000_000  # first telemetry record


def _iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))




def _recording(tmp_path):
    (tmp_path / "slurm").mkdir()
    (tmp_path / "ldms").mkdir()
    sacct = "JobID|JobName|User|Partition|NNodes|NodeList|Submit|Start|End|Timelimit|State|ExitCode\n"
    sacct += f"7|cfd|alice|batch|1|n001|{_iso(T0 - 21 * 3600)}|{_iso(T0 - 20 * 3600)}|{_iso(T0 + 30)}|1-00:00:00|COMPLETED|0:0\n"
    (tmp_path / "slurm" / "sacct.txt").write_text(sacct)
    rows = "".join(f"{T0 + 15 * i}.0,0,n001,1,7,0.5,0.4,0.3\n" for i in range(5))  # 60 s of telemetry
    (tmp_path / "ldms" / "loadavg.csv").write_text(
        "#Time,Time_usec,ProducerName,component_id,job_id,load1min,load5min,load15min\n" + rows)
    return tmp_path


@pytest.mark.broker
def test_history_before_telemetry_is_sent_at_once(tmp_path, kafka_settings, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(replay_mod, "_time", types.SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep,
                                                                  time=clock.time))
    topics = TopicSettings(prefix=f"pace{int(time.time() * 1000) % 10**9}")
    report = replay_mod.replay([_recording(tmp_path)], kafka_settings, topics, speed=60.0, progress=False)
    # the job-progress markers ride on raw.slurm and are never waited for (each carries a time already passed)
    markers = report["job_progress_markers"]
    assert markers >= 3 and report["published"] == {"ldms.loadavg": 5, topics.name("raw.slurm"): 3 + markers}
    assert report["errors"] == {}
    # 60 s of telemetry at 60× is 1 s of waiting; the 21 h job history would have been 21 min
    assert sum(clock.sleeps) == pytest.approx(1.0)
    # one 15 s step (0.25 s) before each later loadavg row; the job's end shares T0 + 30 s with a row
    assert clock.sleeps == pytest.approx([0.25] * 4)


@pytest.mark.broker
def test_job_history_alone_is_paced_by_its_own_events(tmp_path, kafka_settings, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(replay_mod, "_time", types.SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep,
                                                                  time=clock.time))
    topics = TopicSettings(prefix=f"pacej{int(time.time() * 1000) % 10**9}")
    sacct = _recording(tmp_path) / "slurm" / "sacct.txt"
    report = replay_mod.replay([sacct], kafka_settings, topics, speed=3600.0, progress=False)
    assert report["published"] == {topics.name("raw.slurm"): 3 + report["job_progress_markers"]}
    # submit → start 1 h → end 20 h + 30 s later, at 3600×: 1 s and 20.008 s
    assert clock.sleeps == pytest.approx([1.0, (20 * 3600 + 30) / 3600])
