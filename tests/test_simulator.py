"""Telemetry simulator: ground truth, written formats (docs/formats.md), reproducibility."""
from __future__ import annotations

import hashlib
import os
import re

import numpy as np
import pytest
from scipy.special import gamma

from hpcguard.simulators.telemetry import (
    LDMS_SCHEMAS,
    TelemetryParams,
    _place_anomalies,
    expected_failures,
    failure_schedule,
    generate_telemetry,
    simulate_telemetry,
)
from hpcguard.connectors.hostlist import expand_hostlist as expand

# The contract of docs/formats.md ("Schemas the simulator writes").
DOC_SCHEMAS = {
    "lustre_client": ["read_bytes", "write_bytes"],
    "procstat": ["cpu_user", "cpu_nice", "cpu_sys", "cpu_idle", "cpu_iowait"],
    "loadavg": ["load1min", "load5min", "load15min"],
    "meminfo": ["MemTotal", "MemFree", "MemAvailable"],
    "diskusage": ["used_kb", "size_kb"],
    "procnetdev": ["rx_bytes#eth0", "tx_bytes#eth0"],
}
SACCT_HEADER = "JobID|JobName|User|Partition|NNodes|NodeList|Submit|Start|End|Timelimit|State|ExitCode"
POLL = re.compile(r"^# hpcguard-poll host=(\S+) time=(\d+\.\d{3})$")


# ----------------------------------------------------------------------------- readers (test-local)
def read_csv(path):
    with open(path) as fh:
        header = fh.readline().rstrip("\n").split(",")
        rows = [line.rstrip("\n").split(",") for line in fh]
    return header, rows


def read_ldms(path):
    """LDMS store_csv → dict of column arrays (ProducerName as str)."""
    header, rows = read_csv(path)
    cols = list(zip(*rows))
    names = [h.lstrip("#") for h in header]
    out = {n: np.array(c, dtype=float) for n, c in zip(names, cols) if n != "ProducerName"}
    out["ProducerName"] = np.array(cols[2])
    return out


def read_ipmi(path):
    """FreeIPMI blocks → (poll times, {sensor: readings with NaN for N/A})."""
    times, readings = [], {}
    with open(path) as fh:
        for line in fh:
            line = line.rstrip("\n")
            m = POLL.match(line)
            if m:
                times.append(float(m.group(2)))
                continue
            if line.startswith("ID,"):
                assert line == "ID,Name,Type,Reading,Units,Event"
                continue
            _, name, _, reading, _, _ = line.split(",")
            readings.setdefault(name, []).append(np.nan if reading == "N/A" else float(reading))
    return np.array(times), {k: np.array(v) for k, v in readings.items()}


def read_sacct(path):
    with open(path) as fh:
        header = fh.readline().rstrip("\n")
        rows = [dict(zip(header.split("|"), line.rstrip("\n").split("|"))) for line in fh]
    return header, [r for r in rows if "." not in r["JobID"]]


def epoch(slurm_time):
    import calendar
    import time

    return calendar.timegm(time.strptime(slurm_time, "%Y-%m-%dT%H:%M:%S"))


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    """8 nodes × 2 h with a short MTBF: several failures, all with precursors."""
    out = str(tmp_path_factory.mktemp("failing"))
    summary = simulate_telemetry(out, nodes=8, hours=2, seed=11, mtbf_hours=1.5, precursor_fraction=1.0,
                                 anomaly_rate=12.0)
    return out, summary


# ----------------------------------------------------------------------------- failure model
@pytest.mark.parametrize("mtbf_h", [3.0, 10.0])
def test_failure_rate_matches_weibull_renewal_mean(mtbf_h):
    shape, repair = 0.7, (600.0, 2400.0)
    n, T = 400, 24 * 3600.0 * 20
    s = failure_schedule(np.random.default_rng(5), n, T, mtbf_h * 3600.0, shape, repair)
    count = int(np.sum(s["fail"] >= 0))
    expected = expected_failures(n, T, mtbf_h * 3600.0, repair)
    # renewal CLT: Var N(T) ≈ n T σ²/μ³ for cycle = Weibull up-time + uniform repair
    scale = mtbf_h * 3600.0 / gamma(1 + 1 / shape)
    var_up = scale ** 2 * (gamma(1 + 2 / shape) - gamma(1 + 1 / shape) ** 2)
    mu = mtbf_h * 3600.0 + np.mean(repair)
    sd = np.sqrt(n * T * (var_up + (repair[1] - repair[0]) ** 2 / 12) / mu ** 3)
    assert abs(count - expected) < 4 * sd, (count, expected, sd)


def test_default_cluster_gets_a_handful_of_failures():
    counts = [len(generate_telemetry(32, 2, seed).failures) for seed in range(6)]
    assert 3 <= np.mean(counts) <= 10, counts


def test_precursors_lead_their_failures_by_2_to_10_minutes(failing):
    out, summary = failing
    _, fails = read_csv(os.path.join(out, "failures.csv"))
    _, anomalies = read_csv(os.path.join(out, "anomalies.csv"))
    precursors = [a for a in anomalies if a[4] == "1"]
    warned = [f for f in fails if f[3] != "no_precursor"]
    # precursor_fraction=1: only a failure soon after a repair (up-time < 2 min) has none
    assert len(fails) >= 3 and len(precursors) == len(warned) >= 0.8 * len(fails)
    for start, end, node, kind, *_ in precursors:
        match = [f for f in fails if f[1] == node and abs(float(f[0]) - float(end)) < 1e-3]
        assert len(match) == 1, (start, end, node)
        assert 120.0 - 1e-3 <= float(end) - float(start) <= 600.0 + 1e-3
        lo, hi = summary["parameters"]["precursor_lead_minutes"]  # the configured sub-range of 2–10 min
        assert lo * 60 - 1e-3 <= float(end) - float(start) <= hi * 60 + 1e-3
        assert match[0][3] == kind  # cause names the precursor kind


def test_precursor_lead_range_is_configurable():
    tel = generate_telemetry(8, 2, 11, mtbf_hours=1.5, precursor_fraction=1.0, anomaly_rate=0.0,
                             precursor_lead_minutes=(2.0, 3.0))
    leads = [a["end"] - a["start"] for a in tel.anomalies if a["leads_to_failure"]]
    assert len(leads) >= 3 and all(120.0 <= x <= 180.0 for x in leads), leads


def _early_fan_drop(out):
    """Relative FAN1A drop in the first quarter of each precursor window vs. the 10 min before it."""
    _, anomalies = read_csv(os.path.join(out, "anomalies.csv"))
    drops = []
    for start, end, node, *_ in anomalies:
        start, end = float(start), float(end)
        times, readings = read_ipmi(os.path.join(out, "ipmi", f"{node}.csv"))
        fan = readings["FAN1A"]
        before = fan[(times > start - 600) & (times < start - 60)]
        early = fan[(times >= start + 15) & (times < start + 0.25 * (end - start))]
        if np.sum(np.isfinite(before)) >= 5 and np.sum(np.isfinite(early)) >= 3:
            drops.append(1.0 - np.nanmedian(early) / np.nanmedian(before))
    return np.array(drops)


def test_front_loaded_precursor_shows_right_after_onset_in_written_ipmi(tmp_path):
    common = dict(nodes=8, hours=3, seed=2, mtbf_hours=2.0, precursor_fraction=1.0, anomaly_rate=0.0,
                  utilization=0.001, kind_weights=(1, 0, 0, 0))
    simulate_telemetry(str(tmp_path / "front"), **common)  # defaults: step to 0.3–0.6 of the strength
    simulate_telemetry(str(tmp_path / "ramp"), precursor_step=(0.0, 0.0), precursor_power=(2.5, 2.5), **common)
    front, ramp = _early_fan_drop(str(tmp_path / "front")), _early_fan_drop(str(tmp_path / "ramp"))
    assert front.size >= 3 and ramp.size >= 3
    # a step to >= 0.3 × 0.6 strength drops the fans by >= 0.55 × 0.18 × 0.85 ≈ 8 % at once
    assert front.min() > 0.04 and front.mean() > 0.08, front
    # a late ramp x^2.5 reaches at most 3 % of its strength in the first quarter
    assert ramp.mean() < 0.03, ramp


def test_benign_anomalies_are_rarer_weaker_and_shorter_than_precursors_but_overlap():
    p = TelemetryParams(mtbf_hours=2.0, anomaly_rate=4.0)
    dur = 48 * 3600.0
    rng = np.random.default_rng(5)
    sched = failure_schedule(rng, 32, dur, p.mtbf_hours * 3600.0, p.weibull_shape, (600.0, 2400.0))
    anomalies = _place_anomalies(rng, sched, 32, dur, p)
    pre = [a for a in anomalies if a["leads_to_failure"]]
    ben = [a for a in anomalies if not a["leads_to_failure"]]
    assert len(pre) > 100 and len(ben) > 100
    strength = {k: np.array([a["strength"] for a in v]) for k, v in (("pre", pre), ("ben", ben))}
    length = {k: np.array([a["end"] - a["start"] for a in v]) for k, v in (("pre", pre), ("ben", ben))}
    assert strength["ben"].mean() < strength["pre"].mean() and length["ben"].mean() < length["pre"].mean()
    onset = np.array([a["strength"] * a["step"] for a in pre])  # level a precursor steps to at onset
    assert strength["ben"].max() > onset.min()  # overlap: a benign anomaly can look like an early precursor
    assert TelemetryParams().anomaly_rate <= 0.5  # default: at most 0.5 benign anomalies per node-day


def test_benign_anomalies_do_not_end_in_failures(failing):
    out, _ = failing
    _, fails = read_csv(os.path.join(out, "failures.csv"))
    _, anomalies = read_csv(os.path.join(out, "anomalies.csv"))
    benign = [a for a in anomalies if a[4] == "0"]
    assert len(benign) >= 3
    for start, end, node, *_ in benign:
        assert not any(f[1] == node and float(start) <= float(f[0]) <= float(end) + 60 for f in fails)


@pytest.mark.parametrize("kind, sensor, sign, margin", [
    ("fan", "FAN1A", -1, 0.08),        # relative drop
    ("fan", "CPU1 Temp", +1, 3.0),     # °C rise
    ("voltage", "Vcore", -1, 0.025),   # V sag
    ("psu", "PS1 Temp", +1, 2.5),      # °C rise
])
def test_precursor_signature_is_visible_in_written_ipmi(tmp_path, kind, sensor, sign, margin):
    weights = tuple(float(k == kind) for k in ("fan", "voltage", "psu", "stall"))
    out = str(tmp_path)
    simulate_telemetry(out, nodes=8, hours=3, seed=2, mtbf_hours=2.0, precursor_fraction=1.0, anomaly_rate=0.0,
                       utilization=0.001, kind_weights=weights)
    _, anomalies = read_csv(os.path.join(out, "anomalies.csv"))
    checked = 0
    for start, end, node, k, *_ in anomalies:
        assert k == kind
        times, readings = read_ipmi(os.path.join(out, "ipmi", f"{node}.csv"))
        values = readings[sensor]
        before = values[(times > float(start) - 600) & (times < float(start) - 60)]
        last = values[(times < float(end)) & (times > float(end) - 15.0)]
        if np.sum(np.isfinite(before)) < 5 or not np.isfinite(last).any():
            continue
        baseline = np.nanmedian(before)
        change = (last[-1] - baseline) / baseline if sensor.startswith("FAN") else last[-1] - baseline
        assert sign * change > margin, (node, start, end, baseline, last)
        checked += 1
    assert checked >= 2


def test_stall_precursor_drops_cpu_user_and_raises_load_of_the_running_job(tmp_path):
    out = str(tmp_path)
    simulate_telemetry(out, nodes=16, hours=3, seed=4, mtbf_hours=3.0, precursor_fraction=1.0, anomaly_rate=0.0,
                       utilization=1.0, kind_weights=(0, 0, 0, 1))
    ps = read_ldms(os.path.join(out, "ldms", "procstat.csv"))
    load = read_ldms(os.path.join(out, "ldms", "loadavg.csv"))
    _, anomalies = read_csv(os.path.join(out, "anomalies.csv"))
    checked = 0
    for start, end, node, *_ in anomalies:
        sel = ps["ProducerName"] == node
        t, job = ps["Time"][sel], ps["job_id"][sel]
        cols = ["cpu_user", "cpu_nice", "cpu_sys", "cpu_idle", "cpu_iowait"]
        d = np.diff(np.column_stack([ps[c][sel] for c in cols]), axis=0)
        user_pct = 100 * d[:, 0] / d.sum(axis=1)
        tt, jj = t[1:], job[1:]
        before = (tt > float(start) - 300) & (tt < float(start))
        last = np.flatnonzero(tt < float(end))[-1]
        if before.sum() < 4 or jj[last] == 0 or np.any(jj[before] != jj[last]):
            continue  # need the same job running before and at the end of the window
        assert user_pct[last] < 0.8 * np.median(user_pct[before]), (node, user_pct[before], user_pct[last])
        # hung tasks (state D) count as load: load1min climbs although the CPU idles
        la = load["ProducerName"] == node
        lt, l1 = load["Time"][la], load["load1min"][la]
        l_before = np.median(l1[(lt > float(start) - 300) & (lt < float(start))])
        assert l1[np.flatnonzero(lt < float(end))[-1]] > l_before + 5, (node, l_before)
        checked += 1
    assert checked >= 1


# ----------------------------------------------------------------------------- jobs
def test_jobs_on_a_failed_node_end_at_the_failure(failing):
    out, _ = failing
    header, jobs = read_sacct(os.path.join(out, "slurm", "sacct.txt"))
    assert header == SACCT_HEADER
    by_id = {j["JobID"]: j for j in jobs}
    _, fails = read_csv(os.path.join(out, "failures.csv"))
    hit = [f for f in fails if f[2]]
    assert hit, "expected at least one failure to hit a running job"
    for t, node, job_id, *_ in hit:
        job = by_id[job_id]
        assert job["State"] == "NODE_FAIL"
        assert node in expand(job["NodeList"])
        assert epoch(job["End"]) == int(np.floor(float(t)))
    node_fail = [j for j in jobs if j["State"] == "NODE_FAIL" and epoch(j["End"]) >= float(fails[0][0]) - 1]
    assert {j["JobID"] for j in node_fail} <= {f[2] for f in hit}


def test_job_sizes_and_runtimes_are_realistic():
    tel = generate_telemetry(64, 3, seed=9, mtbf_hours=1e6)
    sizes, runtime = tel.jobs["num_nodes"], tel.jobs["runtime_s"]
    assert sizes.size > 100 and sizes.max() <= 64 and np.mean(sizes <= 4) > 0.7 and np.any(sizes >= 8)
    assert np.median(runtime) < 3600 < runtime.max() and runtime.min() > 0
    occupancy = (tel.job1 > 0).mean()
    assert 0.2 < occupancy <= 1.0


def test_ldms_job_id_matches_sacct_allocation(failing):
    out, _ = failing
    _, jobs = read_sacct(os.path.join(out, "slurm", "sacct.txt"))
    by_id = {j["JobID"]: j for j in jobs}
    lc = read_ldms(os.path.join(out, "ldms", "loadavg.csv"))
    for jid in np.unique(lc["job_id"][lc["job_id"] > 0]):
        job = by_id[str(int(jid))]
        sel = lc["job_id"] == jid
        assert set(lc["ProducerName"][sel]) <= set(expand(job["NodeList"]))
        assert lc["Time"][sel].min() >= epoch(job["Start"])
        if job["End"] != "Unknown":
            assert lc["Time"][sel].max() <= epoch(job["End"]) + 1
    busy = lc["job_id"] > 0
    assert np.median(lc["load1min"][busy]) > 5 * np.median(lc["load1min"][~busy])


# ----------------------------------------------------------------------------- formats
def test_files_have_the_documented_headers(failing):
    out, summary = failing
    for schema, metrics in DOC_SCHEMAS.items():
        with open(os.path.join(out, "ldms", f"{schema}.csv")) as fh:
            assert fh.readline().rstrip("\n") == ",".join(
                ["#Time", "Time_usec", "ProducerName", "component_id", "job_id"] + metrics)
            row = fh.readline().rstrip("\n").split(",")
        assert re.fullmatch(r"\d+\.\d{6}", row[0]) and int(row[0].split(".")[1]) == int(row[1])
        assert row[2] == f"n{int(row[3]):03d}"
    assert list(LDMS_SCHEMAS) == list(DOC_SCHEMAS)
    with open(os.path.join(out, "ipmi", "n001.csv")) as fh:
        first, second = fh.readline().rstrip("\n"), fh.readline().rstrip("\n")
    assert POLL.match(first) and POLL.match(first).group(1) == "n001"
    assert second == "ID,Name,Type,Reading,Units,Event"
    assert read_csv(os.path.join(out, "failures.csv"))[0] == ["time", "node", "job_id", "cause", "family",
                                                              "onset_minutes", "onset_time"]
    assert read_csv(os.path.join(out, "anomalies.csv"))[0] == ["start", "end", "node", "kind", "leads_to_failure",
                                                               "family"]
    with open(os.path.join(out, "slurm", "sacct.txt")) as fh:
        assert fh.readline().rstrip("\n") == SACCT_HEADER
    for key in ("nodes", "start", "end", "seed", "parameters", "counts"):
        assert key in summary


def test_ipmi_has_vendor_names_unmapped_extras_and_na(failing):
    out, _ = failing
    names, na = set(), 0
    for node in range(1, 9):
        _, readings = read_ipmi(os.path.join(out, "ipmi", f"n{node:03d}.csv"))
        names |= set(readings)
        na += sum(int(np.isnan(v).sum()) for k, v in readings.items() if k != "PS1 Status")
        fan = readings["FAN1A"][np.isfinite(readings["FAN1A"])]
        temp = readings["CPU1 Temp"][np.isfinite(readings["CPU1 Temp"])]
        assert 2000 < np.median(fan) < 9500 and 30 < np.median(temp) < 70
    assert {"CPU1 Temp", "FAN1A", "Vcore", "PS1 Temp", "System Temp"} <= names
    assert na > 0


def test_altheader_writes_header_files(tmp_path):
    simulate_telemetry(str(tmp_path), nodes=2, hours=0.05, seed=1, altheader=True)
    for schema, metrics in DOC_SCHEMAS.items():
        with open(tmp_path / "ldms" / f"{schema}.HEADER") as fh:
            assert fh.read() == "#Time,Time_usec,ProducerName,component_id,job_id," + ",".join(metrics) + "\n"
        with open(tmp_path / "ldms" / f"{schema}.csv") as fh:
            assert re.match(r"\d+\.\d{6},", fh.readline())


def _digest(path):
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(path)):
        for f in sorted(files):
            h.update(f.encode())
            with open(os.path.join(root, f), "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def test_same_seed_same_bytes_different_seed_different(tmp_path):
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        simulate_telemetry(str(tmp_path / name), nodes=4, hours=0.25, seed=seed)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")


def test_down_node_writes_nothing_and_counters_reset_after_reboot(failing):
    out, summary = failing
    _, fails = read_csv(os.path.join(out, "failures.csv"))
    lc = read_ldms(os.path.join(out, "ldms", "lustre_client.csv"))
    repair_min = summary["parameters"]["repair_minutes"][0] * 60
    resets = 0
    for t, node, *_ in fails:
        t = float(t)
        sel = lc["ProducerName"] == node
        times, read = lc["Time"][sel], lc["read_bytes"][sel]
        assert not np.any((times >= t) & (times < t + repair_min))
        times_i, _ = read_ipmi(os.path.join(out, "ipmi", f"{node}.csv"))
        assert not np.any((times_i >= t) & (times_i < t + repair_min))
        after = np.flatnonzero(times > t)
        if after.size and np.any(times < t):
            assert read[after[0]] < read[np.flatnonzero(times < t)[-1]]  # reboot reset the counter
            resets += 1
    assert resets >= 1


def test_io_slowdown_hook_divides_lustre_rates():
    base = generate_telemetry(4, 0.25, seed=7)
    slow = generate_telemetry(4, 0.25, seed=7, io_slowdown=np.full(900, 2.0))
    d_base, d_slow = np.diff(base.lustre, axis=1), np.diff(slow.lustre, axis=1)
    ok = base.up1[:, 1:] & base.up1[:, :-1]
    np.testing.assert_allclose(d_slow[ok], d_base[ok] / 2, atol=1.0)
    assert base.job_dicts() and {"job_id", "nodes", "start", "read_rate"} <= set(base.job_dicts()[0])


def test_bad_parameters_raise_clear_errors():
    with pytest.raises(ValueError, match="mtbf_hours"):
        generate_telemetry(4, 1, 0, mtbf_hours=0)
    with pytest.raises(ValueError, match="io_slowdown"):
        generate_telemetry(4, 0.25, 0, io_slowdown=np.ones(10))
    with pytest.raises(ValueError, match="node-seconds"):
        generate_telemetry(10000, 24 * 365, 0)
    with pytest.raises(ValueError, match="precursor_fraction"):
        generate_telemetry(4, 1, 0, precursor_fraction=1.5)
    with pytest.raises(ValueError, match="precursor_step"):
        generate_telemetry(4, 1, 0, precursor_step=(0.5, 1.2))
    with pytest.raises(ValueError, match="anomaly_strength"):
        generate_telemetry(4, 1, 0, anomaly_strength=(0.6, 0.3))


def test_cli_writes_recording_and_rejects_bad_input(tmp_path):
    import json

    from typer.testing import CliRunner

    from hpcguard.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["simulate", "telemetry", "--nodes", "3", "--hours", "0.1", "--seed", "2",
                              "--out", str(tmp_path / "rec"), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["nodes"] == ["n001", "n002", "n003"] and summary["seed"] == 2
    with open(tmp_path / "rec" / "meta.json") as fh:
        assert json.load(fh)["counts"] == summary["counts"]
    shaped = runner.invoke(app, ["simulate", "telemetry", "--nodes", "2", "--hours", "0.1", "--out",
                                 str(tmp_path / "shaped"), "--json", "--precursor-lead", "2", "4",
                                 "--precursor-step", "0", "0.2", "--anomaly-strength", "0.1", "0.3"])
    assert shaped.exit_code == 0, shaped.output
    params = json.loads(shaped.stdout)["parameters"]
    assert params["precursor_lead_minutes"] == [2.0, 4.0] and params["precursor_step"] == [0.0, 0.2]
    assert params["anomaly_strength"] == [0.1, 0.3]
    bad = runner.invoke(app, ["simulate", "telemetry", "--hours", "-1", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "hours must be > 0" in bad.output


def test_counter_resets_without_gap_are_listed_in_meta(tmp_path):
    import json

    summary = simulate_telemetry(str(tmp_path), nodes=6, hours=1, seed=8, counter_reset_rate=48.0, mtbf_hours=1e6)
    with open(tmp_path / "meta.json") as fh:
        listed = json.load(fh)["counter_resets"]
    assert listed == summary["counter_resets"] and len(listed) >= 4
    for schema, period in (("lustre_client", 1), ("procnetdev", 15)):
        rows = read_ldms(os.path.join(tmp_path, "ldms", f"{schema}.csv"))
        counter = rows["read_bytes"] if schema == "lustre_client" else rows["rx_bytes#eth0"]
        found = set()
        for node in np.unique(rows["ProducerName"]):
            sel = rows["ProducerName"] == node
            t, c = rows["Time"][sel], counter[sel]
            drop = (np.diff(c) < 0) & (np.diff(t) < 2 * period)
            found |= {(node, float(np.floor(x))) for x in t[1:][drop]}
        assert found == {(r["node"], r["time"]) for r in listed if r["schema"] == schema}


def test_project_parsers_read_the_recording_without_rejects(failing):
    """Helper parsers in connectors/ (docs/formats.md) decode every file of the recording."""
    ldms = pytest.importorskip("hpcguard.connectors.ldms")
    ipmi = pytest.importorskip("hpcguard.connectors.ipmi")
    from hpcguard.connectors.errors import Rejected
    from hpcguard.models.features import CANONICAL_SENSORS, IO_METRICS

    out, _ = failing
    dec, seen = ldms.LdmsDecoder(), {}
    for schema in DOC_SCHEMAS:
        for row in ldms.read_store_csv(os.path.join(out, "ldms", f"{schema}.csv")):
            assert not isinstance(row, Rejected), row
            sample = dec.decode(schema, row)
            for k, v in (sample or {}).get("values", {}).items():
                seen.setdefault(k, []).append(v)
    for node in range(1, 9):
        for env in ipmi.read_ipmi_file(os.path.join(out, "ipmi", f"n{node:03d}.csv")):
            assert not isinstance(env, Rejected), env
            for sample in ipmi.decode_ipmi_envelope(env):
                for k, v in sample["values"].items():
                    seen.setdefault(k, []).append(v)
    assert set(CANONICAL_SENSORS) | set(IO_METRICS) <= set(seen)
    med = {k: float(np.median(v)) for k, v in seen.items()}
    assert 35 < med["cpu_temp"] < 65 and 2500 < med["cpu_fan_rpm"] < 9500 and 0.95 < med["cpu_voltage"] < 1.25
    assert 28 < med["psu_temp"] < 48 and 0 <= med["cpu_user"] <= 100 and 0 < med["mem_usage"] < 100
