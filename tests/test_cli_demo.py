"""``hpcguard demo --json`` end to end: embedded broker, simulated cluster, worker,
summary — with the InfluxDB sink writing to a real InfluxDB and ``/metrics`` served
while the demo runs; and the same seed giving the same failures and action ids with
one worker at full speed and two workers paced (issue 12 item 8)."""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

pytestmark = [pytest.mark.broker, pytest.mark.influx, pytest.mark.slow]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_demo_json_with_influx_and_metrics(tmp_path, influxdb):
    metrics_port = _free_port()
    workdir = tmp_path / "demo"
    argv = [sys.executable, "-m", "hpcguard", "demo", "--nodes", "8", "--hours", "1", "--seed", "3", "--json",
            "--detector", "baseline", "--cache-dir", str(tmp_path / "cache"),
            "--workdir", str(workdir), "--influx", influxdb.url, "--influx-version", "1",
            "--metrics-port", str(metrics_port), "--timeout", "400",
            "--idle", "10"]  # the failed nodes go quiet: the summary waits idle_s for their last windows
    env = {**os.environ, "HPCGUARD_INFLUX__DATABASE": "demo_test", "HPCGUARD_INFLUX__FLUSH_INTERVAL_S": "0.5"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    scraped = ""
    deadline = time.monotonic() + 500
    while proc.poll() is None and time.monotonic() < deadline:
        try:  # the worker's /metrics while the demo runs
            text = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=2).text
            if "hpcguard_records_in_total{" in text:
                scraped = text
        except (requests.ConnectionError, requests.Timeout):
            pass  # not up yet, or busy for a moment: the loop asks again
        time.sleep(1.0)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads(out)

    failures = (workdir / "telemetry" / "failures.csv").read_text().splitlines()[1:]
    assert summary["broker"].startswith("embedded tansu 127.0.0.1:")
    assert summary["nodes"] == 8 and summary["model"] == "baseline-threshold"
    assert summary["false_alarm_budget"] == 0.0  # a demo's few node-days: the model's own threshold
    out = summary["published"]
    assert out["samples.ipmi"] > 0 and out["samples.os"] > 0 and out["samples.io"] > 0 and out["jobs"] > 0
    assert summary["dead_letters"]["total"] == 0
    f = summary["failures"]
    assert f["injected"] == len(failures) and f["warned"] + f["missed"] == f["injected"]
    assert len(f["lead_minutes"]) == f["warned"] and all(m > 0 for m in f["lead_minutes"])
    assert sum(summary["acks"].values()) == sum(summary["actions"].values())
    assert summary["predictions"]["total"] > 0 and summary["io_windows"]["total"] > 0
    assert summary["throughput_msgs_per_s"] > 0 and set(summary["latency_ms"]) >= {"p50", "p99"}
    sv = summary["savings"]  # the run's own actions, accounted (docs/savings.md)
    assert sv["net_node_hours"] == pytest.approx(sv["saved_node_hours"] - sv["spent_node_hours"], abs=2e-3)
    assert sv["by_kind"]["probes"]["spent"] > 0                     # CanarIO's probes are part of the bill
    assert {p["action_id"] for p in sv["protected"]} <= set(summary["action_ids"])
    assert {(p["failure_node"], round(p["failure_time"], 3)) for p in sv["protected"]} <= \
        {(r.split(",")[1], round(float(r.split(",")[0]), 3)) for r in failures}
    assert Path(sv["plot"]).is_file() and json.loads(Path(sv["report"]).read_text())["net"] == \
        pytest.approx(sv["net_node_hours"], abs=2e-3)

    assert "hpcguard_records_in_total{" in scraped and "hpcguard_predictions_total{" in scraped
    # the shadow figures: node-days judged (one 15 s step per prediction judged) and the episodes they hold
    judged = sum(float(line.rsplit(" ", 1)[1]) for line in scraped.splitlines()
                 if line.startswith("hpcguard_node_days_judged_total{"))
    assert 0 < judged <= summary["predictions"]["total"] * 15.0 / 86400.0 + 1e-9
    rows = influxdb.rows("SELECT count(failure_probability) FROM node_prediction", "demo_test")
    assert rows and rows[0]["count"] == summary["predictions"]["total"]
    io_rows = influxdb.rows("SELECT count(probability) FROM io_window", "demo_test")
    assert io_rows and io_rows[0]["count"] == summary["io_windows"]["total"]


def _demo(tmp_path, name, *extra):
    argv = [sys.executable, "-m", "hpcguard", "demo", "--nodes", "8", "--hours", "1", "--seed", "5", "--json",
            "--detector", "baseline", "--cache-dir", str(tmp_path / "cache"), "--workdir", str(tmp_path / name),
            "--timeout", "400", "--idle", "120", *extra]   # a loaded machine must not make a lagging source idle;
    # the demo waits that long after draining, for failed nodes' last windows
    done = subprocess.run(argv, capture_output=True, text=True, timeout=560)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.faults  # two full demos, one paced with two workers: the fault suite's (make test-faults)
def test_demo_is_deterministic_across_workers_and_speed(tmp_path):
    one = _demo(tmp_path, "one")
    two = _demo(tmp_path, "two", "--workers", "2", "--speed", "120")
    assert not one["model_from_cache"] and two["model_from_cache"]      # trained once, then cached
    assert two["replay"] == {"speed": 120.0, "workers": 2}
    assert one["failures"] == two["failures"]
    # every decision: failure prediction's and CanarIO's (one owner of the file system's IO state)
    assert one["actions"] == two["actions"] and one["action_ids"] == two["action_ids"]
    assert one["io_windows"] == two["io_windows"]
    assert one["published"] == two["published"] and one["predictions"] == two["predictions"]
    assert one["dead_letters"] == two["dead_letters"]  # no IO sample of the second worker's nodes judged late
    for s in (one, two):
        assert s["offline"]["warned"] == s["failures"]["warned"]          # = the offline scan's count
        assert s["offline"]["differences"]["identical"], s["offline"]["differences"]
        jc = s["actions_on_job_at_sample_time"]
        assert jc["right_job"] == jc["checked"]


@pytest.mark.faults  # the quick start's demo as shipped (trains the ensemble when the cache is cold): minutes
def test_the_default_demo_saves_more_node_hours_than_it_spends(tmp_path):
    argv = [sys.executable, "-m", "hpcguard", "demo", "--json", "--workdir", str(tmp_path / "demo")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    sv = summary["savings"]
    assert sv["net_node_hours"] > 0 and sv["saved_node_hours"] > sv["spent_node_hours"]
    kinds = {p["kind"] for p in sv["protected"]}
    assert {"checkpoint", "migrate"} <= kinds                       # running jobs protected before their nodes failed
    assert all(p["nodes"] >= 1 and p["node_hours_saved"] > 0 for p in sv["protected"])
    assert summary["acks"] == {"would_apply": sum(summary["actions"].values())}
    # the actions of both sides show (issue 55 item 5): failure prediction's on running jobs, CanarIO's while the
    # PFS degradation is detected and once it is seen to end, and a drain of the idle spare warned before it failed
    assert set(summary["actions"]) >= {"checkpoint", "migrate", "drain", "delay", "release", "reschedule"}
    io = summary["io_actions"]
    released = {a["job_id"] for a in io if a["kind"] == "release"}
    assert released and released <= {a["job_id"] for a in io if a["kind"] == "delay"}
    assert all(a.get("replacement_job_id") for a in io if a["kind"] == "reschedule")
    assert summary["offline"]["differences"]["identical"], summary["offline"]["differences"]
    assert summary["offline"]["io_actions"]["identical"], summary["offline"]["io_actions"]
