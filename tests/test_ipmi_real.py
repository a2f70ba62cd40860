"""The IPMI parsers on real collector output written by other projects (../shared/data/real-formats/ipmi).

Like the corpus's own check, tool outputs get hpcguard's poll line prepended when a test
needs a node and time; Telegraf metric_version 1 lines are derived from the ipmitool
dumps by a line-for-line port of Telegraf's ``parseV1`` (no Telegraf binary here).
"""
import re

import numpy as np
import pytest

from hpcguard.connectors.coverage import SensorCoverage
from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.ipmi import (IpmiInput, TimeLine, decode_ipmi_envelope, parse_freeipmi, parse_ipmitool,
                                      parse_telegraf_line, read_ipmi_file, read_ipmi_lines)
from hpcguard.connectors.recorded import load_sensor_grid
from hpcguard.connectors.replay import dry_run
from _shared import SHARED_DATA

REAL = SHARED_DATA / "real-formats" / "ipmi"
pytestmark = pytest.mark.skipif(not REAL.is_dir(), reason=f"real-format corpus not found at {REAL}")
T0 = 1700000000.0


def polled(name: str, host: str = "node01", t: float = T0) -> str:
    return f"# hpcguard-poll host={host} time={t}\n" + (REAL / name).read_text()


def decode(text: str, source: str = "x", stats=None, coverage=None, **kw):
    out = []
    for env in read_ipmi_lines(text.splitlines(), source, **kw):
        out.append(env if isinstance(env, Rejected) else decode_ipmi_envelope(env, stats=stats, coverage=coverage))
    return out


def only_sample(text: str, **kw):
    (samples,) = decode(text, **kw)
    (s,) = samples
    return s["node"], s["time"], s["values"]


# --- FreeIPMI ------------------------------------------------------------------------------------
def test_freeipmi_with_header_supermicro_fans():
    rows = parse_freeipmi((REAL / "afancontrol_supermicro_freeipmi.csv").read_text())
    assert rows[:2] == [("FAN1", 1400.0, "RPM", 1), ("FAN2", 1800.0, "RPM", 2)]
    assert rows[2][1] is None  # FAN3 N/A: missing, not zero
    assert only_sample(polled("afancontrol_supermicro_freeipmi.csv")) == ("node01", T0, {"cpu_fan_rpm": 1400.0})


def test_freeipmi_output_sensor_state_without_header_reads_reading_not_state():
    text = polled("controlr_supermicro_freeipmi_state_noheader.csv")
    node, t, values = only_sample(text)
    # CPU Temp 38 C; fans 1100/700/N/A/1100 and FANA 300 RPM (min); Vcpu 1.84 V
    assert (node, t, values) == ("node01", T0, {"cpu_temp": 38.0, "cpu_fan_rpm": 300.0, "cpu_voltage": 1.84})
    # with FreeIPMI's header line the same rows give the same values
    header = "ID,Name,Type,State,Reading,Units,Event\n"
    with_header = text.replace("\n", "\n" + header, 1)
    assert only_sample(with_header)[2] == values


def test_freeipmi_without_header_six_columns_and_multi_event():
    assert only_sample(polled("gcm_freeipmi_noheader_pass.csv"))[2] == {"cpu_fan_rpm": 9999.0}
    stats = {}
    (samples,) = decode(polled("gcm_freeipmi_noheader_psu_fail.csv"), stats=stats)
    assert samples == [] and stats == {"unmapped": 6}  # PSU power in W: nothing canonical, nothing invented
    rows = parse_freeipmi((REAL / "gcm_freeipmi_noheader_psu_fail.csv").read_text())
    assert rows[0] == ("PWR_PSU0", 0.0, "W", 0) and rows[-1][:3] == ("REDUNDANCY_PSU", None, None)


def test_freeipmi_table_and_no_sensor_type_output():
    """FreeIPMI's default pipe table and --no-sensor-type-output, built from the controlr rows."""
    csv_rows = [r.split(",", 6) for r in
                (REAL / "controlr_supermicro_freeipmi_state_noheader.csv").read_text().splitlines()]
    table = "ID   | Name | Type | State | Reading | Units | Event\n" + "".join(
        " | ".join(r) + "\n" for r in csv_rows)
    no_type = "ID,Name,Reading,Units,Event\n" + "".join(",".join([r[0], r[1], r[4], r[5], r[6]]) + "\n"
                                                        for r in csv_rows)
    no_type_no_header = "".join(",".join([r[0], r[1], r[4], r[5], r[6]]) + "\n" for r in csv_rows)
    want = {"cpu_temp": 38.0, "cpu_fan_rpm": 300.0, "cpu_voltage": 1.84}
    for text in (table, no_type, no_type_no_header):
        assert only_sample("# hpcguard-poll host=n7 time=5\n" + text) == ("n7", 5.0, want)


def test_freeipmi_percent_fan_is_not_rpm():
    text = ("# hpcguard-poll host=n1 time=1\nID,Name,Type,Reading,Units,Event\n"
            "5,Fan 1,Fan,43.12,%,'OK'\n6,CPU Temp,Temperature,40.00,C,'OK'\n")
    stats = {}
    assert decode(text, stats=stats) == [[{"node": "n1", "time": 1.0, "source": "ipmi", "job_id": None,
                                           "values": {"cpu_temp": 40.0}}]]
    assert stats == {"unit_mismatch": 1}


# --- ipmitool ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,want", [
    ("datakit_R620v1.txt", {"cpu_temp": 47.0, "cpu_fan_rpm": 2040.0}),  # 3-column sdr: Temp 47/44; Fan4B 2040
    ("datakit_R620v2.txt", {"cpu_temp": 47.0, "cpu_fan_rpm": 2160.0}),  # sdr elist: Temp 47/45; Fan1A/6A/4B 2160
    ("datakit_R740v1.txt", {"cpu_temp": 45.0, "cpu_fan_rpm": 3480.0}),  # Fan1..Fan6 (Dell 14G names)
    ("datakit_R740v2.txt", {"cpu_temp": 45.0, "cpu_fan_rpm": 3240.0}),
    ("telegraf_ibm_sdr_v1.txt", {"cpu_fan_rpm": 1275.0}),  # IBM IMM Fan 2B Tach; 'Fan 1 | 0x00' is a state
    ("telegraf_sdr_elist_v2.txt", {"cpu_fan_rpm": 5040.0}),
])
def test_ipmitool_sdr_and_elist_values(name, want):
    assert only_sample(polled(name)) == ("node01", T0, want)


def test_ipmitool_rows_units_and_states():
    rows = parse_ipmitool((REAL / "telegraf_sdr_elist_v2.txt").read_text())
    by_name = {r[0]: r[1:3] for r in rows}
    assert by_name["SEL"] == (None, None) and by_name["Intrusion"] == (None, None)
    assert by_name["Fan1"] == (5040.0, "RPM") and by_name["Inlet Temp"] == (25.0, "degrees C")
    assert by_name["Current 1"] == (7.2, "Amps") and by_name["Power Supply 1"] == (110.0, "Watts")
    assert by_name["USB Cable Pres"] == (None, None)
    v1 = {r[0]: r[1:3] for r in parse_ipmitool((REAL / "telegraf_ibm_sdr_v1.txt").read_text())}
    assert v1["Fan 1"] == (None, None) and v1["Fan 1A Tach"] == (2610.0, "RPM")


def test_huawei_host_off_gives_no_values_and_counts_missing():
    stats, cov = {}, SensorCoverage(sensors=("cpu_temp", "cpu_fan_rpm", "cpu_voltage", "psu_temp"))
    (samples,) = decode(polled("datakit_RH2288V3.txt"), stats=stats, coverage=cov)
    assert samples == []  # powered off (S4/S5): every CPU sensor 'ns No Reading'
    assert stats["missing"] >= 8  # CPU1/2 Core Rem, CPU1/2 VCore, FAN1..FAN4 F/R Speed
    assert cov.report()["sensors"]["cpu_temp"]["share"] == 0.0 and cov.report()["node_steps"] == 1


# --- Telegraf ------------------------------------------------------------------------------------
def telegraf_v1(sdr_text: str, host: str | None = None, server: str | None = None, ts: int = 1517125513000000000):
    """Port of telegraf plugins/inputs/ipmi_sensor/ipmi_sensor.go parseV1 (metric_version 1)."""
    out = []
    for line in sdr_text.splitlines():
        m = re.match(r"^(?P<name>[^|]*)\|(?P<description>[^|]*)\|(?P<status_code>.*)", line)
        if m is None:
            continue
        tags = {"name": m["name"].strip().lower().replace(" ", "_")}
        if server:
            tags["server"] = server
        if host:
            tags["host"] = host
        status = 1 if m["status_code"].strip().lower() == "ok" else 0
        desc = m["description"].strip()
        if desc.startswith("0x"):
            value = float(int(desc, 16))
        elif " " in desc:
            val, unit = desc.split(" ", 1)
            try:
                value = float(val)
            except ValueError:
                continue
            tags["unit"] = unit.strip().lower().replace(" ", "_")
        else:
            value = 0.0
        tag_text = ",".join(f"{k}={v.replace(' ', chr(92) + ' ')}" for k, v in sorted(tags.items()))
        out.append(f"ipmi_sensor,{tag_text} status={status}i,value={value} {ts}")
    return "\n".join(out) + "\n"


def test_telegraf_v1_discrete_fan_is_not_zero_rpm():
    lp = telegraf_v1((REAL / "telegraf_ibm_sdr_v1.txt").read_text(), host="collector1")
    assert "name=fan_1,status" not in lp and re.search(r"name=fan_1 status=1i,value=0\.0", lp)
    assert only_sample(lp) == ("collector1", 1517125513.0, {"cpu_fan_rpm": 1275.0})
    dell = telegraf_v1((REAL / "datakit_R620v1.txt").read_text(), host="collector1")
    assert only_sample(dell)[2] == {"cpu_temp": 47.0, "cpu_fan_rpm": 2040.0}


def test_telegraf_remote_bmc_is_the_node_not_the_collector():
    lp = (telegraf_v1((REAL / "telegraf_ibm_sdr_v1.txt").read_text(), host="collector1", server="bmc-a")
          + telegraf_v1((REAL / "datakit_R620v1.txt").read_text(), host="collector1", server="bmc-b"))
    nodes = {s["node"]: s["values"] for samples in decode(lp) for s in samples}
    assert nodes == {"bmc-a": {"cpu_fan_rpm": 1275.0}, "bmc-b": {"cpu_temp": 47.0, "cpu_fan_rpm": 2040.0}}


def test_telegraf_readme_remote_percent_fan_is_refused():
    stats = {}
    out = decode((REAL / "telegraf_readme_v1_remote.lp").read_text(), stats=stats)
    assert out == [[]] and stats == {"unmapped": 5, "unit_mismatch": 1}
    host, name, value, unit, t = parse_telegraf_line((REAL / "telegraf_readme_v1_remote.lp").read_text()
                                                     .splitlines()[-1])
    assert (host, name, value, unit, t) == ("10.20.2.203", "fan_1", 43.12, "percent", 1517125513.0)


@pytest.mark.parametrize("name", ["telegraf_readme_v1_local.lp", "telegraf_readme_v2_local.lp"])
def test_telegraf_without_host_or_server_is_dead_lettered_or_uses_fallback(name):
    text = (REAL / name).read_text()
    out = decode(text, name)
    assert out and all(isinstance(r, Rejected) and r.kind == "missing_field" and "server" in r.reason for r in out)
    assert [r.line for r in out] == list(range(1, len(text.splitlines()) + 1))
    stats = {}
    samples = decode(text, name, stats=stats, options=IpmiInput(default_host="bmc9"))
    assert samples == [[]] and stats["unit_mismatch"] == 1  # fan_1 in percent, the rest unmapped
    host, *_ = parse_telegraf_line(text.splitlines()[0], default_host="bmc9")
    assert host == "bmc9"


def test_telegraf_v2_with_agent_host_keeps_telegraf_time():
    lp = (REAL / "telegraf_readme_v2_local.lp").read_text().replace("ipmi_sensor,", "ipmi_sensor,host=n5,")
    lp += "ipmi_sensor,host=n5,name=cpu_1_temp,status_code=ok,unit=degrees_c value=51 1517125474000000000\n"
    assert only_sample(lp) == ("n5", 1517125474.0, {"cpu_temp": 51.0})


# --- raw output without a poll wrapper, and the two load paths agreeing --------------------------
def test_raw_dump_without_poll_line_is_rejected_or_timed_by_mtime(tmp_path):
    (tmp_path / "ipmi").mkdir()
    p = tmp_path / "ipmi" / "r620-2020-01-02.txt"
    p.write_text((REAL / "datakit_R620v2.txt").read_text())
    out = list(read_ipmi_file(p))
    assert out and all(isinstance(r, Rejected) and r.kind == "missing_field" for r in out)
    assert "time_pattern" in out[0].reason
    (env,) = read_ipmi_file(p, options=IpmiInput(untimed="mtime"))
    assert env["host"] == "r620" and env["time"] == pytest.approx(p.stat().st_mtime)
    assert decode_ipmi_envelope(env)[0]["values"] == {"cpu_temp": 47.0, "cpu_fan_rpm": 2160.0}
    grid = load_sensor_grid(tmp_path, ipmi=IpmiInput(untimed="mtime"))
    assert grid.nodes == ["r620"] and grid.values[0, -1, :2].tolist() == [47.0, 2160.0]


def test_timestamp_lines_with_a_site_pattern():
    text = "=== 2024-05-01T10:00:00\n" + (REAL / "datakit_R740v2.txt").read_text()
    opts = IpmiInput(time_line=TimeLine(r"=== (\S+)", "%Y-%m-%dT%H:%M:%S"))
    (env,) = read_ipmi_lines(text.splitlines(), "x", options=opts, host="r740")
    assert (env["host"], env["time"]) == ("r740", 1714557600.0)
    with pytest.raises(ValueError, match="group"):
        IpmiInput(time_line=TimeLine(r"=== \S+"))


def test_replay_and_loader_agree_on_every_real_sample_and_survive_bad_rows(tmp_path):
    d = tmp_path / "rec"
    (d / "ipmi").mkdir(parents=True)
    names = sorted(p.name for p in REAL.iterdir() if not p.name.endswith(".lp"))
    for i, name in enumerate(names):
        (d / "ipmi" / f"n{i:02d}.{name.rsplit('.', 1)[1]}").write_text(polled(name, f"n{i:02d}", 30.0 * i))
    # a broken file in the same directory: a bad reading and a row outside any poll
    (d / "ipmi" / "zz.csv").write_text("9,CPU1 Temp,Temperature,51.00,C,'OK'\n# hpcguard-poll host=zz time=0\n"
                                       "ID,Name,Type,Reading,Units,Event\n3,CPU1 Temp,Temperature,hot,C,'OK'\n")
    grid = load_sensor_grid(d, grid_s=15.0)
    report = dry_run([d])
    assert report["errors"] == {"missing_field": 1, "bad_number": 1}
    assert grid.skipped == {"ipmi_missing_field": 1, "ipmi_bad_number": 1}
    replayed = {}
    for env in (e for f in sorted((d / "ipmi").iterdir()) for e in read_ipmi_file(f) if isinstance(e, dict)):
        try:
            for s in decode_ipmi_envelope(env):
                replayed[s["node"]] = s["values"]
        except ParseError:
            pass
    loaded = {}
    for k, node in enumerate(grid.nodes):
        row = grid.values[k][~np.isnan(grid.values[k]).all(axis=1)]
        if len(row):
            loaded[node] = {s: float(v) for s, v in zip(
                ("cpu_temp", "cpu_fan_rpm", "cpu_voltage", "psu_temp"), row[0, :4]) if not np.isnan(v)}
    assert loaded == replayed and len(loaded) == 9  # RH2288V3 (host off) and the PSU-only fixture give none
    assert report["samples"]["ipmi"] == 9
