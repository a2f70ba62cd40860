import pytest

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.ipmi import decode_ipmi_envelope, parse_ipmitool, parse_telegraf_line, read_ipmi_file
from hpcguard.connectors.mapping import SensorMapping

FREEIPMI = """# hpcguard-poll host=n001 time=1679682808.000
ID,Name,Type,Reading,Units,Event
1,Inlet Temp,Temperature,22.00,C,'OK'
3,CPU1 Temp,Temperature,57.00,C,'OK'
4,CPU2 Temp,Temperature,61.00,C,'OK'
5,PS1 Temp,Temperature,40.00,C,'OK'
7,Vcore,Voltage,N/A,V,N/A
9,FAN1A,Fan,8040.00,RPM,'OK'
10,FAN1B,Fan,7680.00,RPM,'OK'
13,PS1 Status,Power Supply,N/A,N/A,'Presence detected'
# hpcguard-poll host=n001 time=1679682823.000
ID,Name,Type,Reading,Units,Event
3,CPU1 Temp,Temperature,58.00,C,'OK'
7,Vcore,Voltage,1.10,V,'OK'
"""

IPMITOOL = """# hpcguard-poll host=n002 time=1679682808.5
CPU1 Temp        | 30h | ok  |  3.1 | 45 degrees C
FAN1A            | 41h | ok  |  7.1 | 2400 RPM
Vcore            | 50h | ns  |  3.1 | No Reading
PS1 Temp         | 60h | ok  | 10.1 | 39 degrees C
PS1 Status       | 70h | ok  | 10.1 | Presence detected
"""

TELEGRAF = """ipmi_sensor,host=n003,name=cpu1_temp,status_code=ok,status_desc=ok,unit=degrees_c value=45 1679682808000000000
ipmi_sensor,host=n003,name=fan1a,status_code=ok,status_desc=ok,unit=rpm value=3000 1679682808000000000
ipmi_sensor,host=n003,name=vcore,status_code=ok,status_desc=ok,unit=volts value=1.02 1679682808000000000
ipmi_sensor,host=n003,name=cpu1_temp,status_code=ok,status_desc=ok,unit=degrees_c value=46 1679682823000000000
"""


def decode_file(path, stats=None):
    return [s for env in read_ipmi_file(path) for s in decode_ipmi_envelope(env, stats=stats)]


def test_freeipmi_blocks(tmp_path):
    p = tmp_path / "n001.csv"
    p.write_text(FREEIPMI)
    envs = list(read_ipmi_file(p, source="ipmi/n001.csv"))
    assert [(e["format"], e["host"], e["time"], e["source"]) for e in envs] == [
        ("freeipmi-csv", "n001", 1679682808.0, "ipmi/n001.csv:1"), ("freeipmi-csv", "n001", 1679682823.0,
                                                                     "ipmi/n001.csv:11")]
    stats = {}
    samples = decode_file(p, stats)
    # cpu_temp = max of CPU1/CPU2, fan = min of fans, Vcore N/A → missing, not invented
    assert samples[0]["values"] == {"cpu_temp": 61.0, "psu_temp": 40.0, "cpu_fan_rpm": 7680.0}
    assert samples[1]["values"] == {"cpu_temp": 58.0, "cpu_voltage": 1.1}
    assert samples[0]["source"] == "ipmi" and samples[0]["node"] == "n001"
    assert stats == {"unmapped": 2, "missing": 1}


def test_ipmitool_and_telegraf(tmp_path):
    (tmp_path / "a.txt").write_text(IPMITOOL)
    (tmp_path / "b.lp").write_text(TELEGRAF)
    s = decode_file(tmp_path / "a.txt")
    assert s == [{"node": "n002", "time": 1679682808.5, "source": "ipmi", "job_id": None,
                  "values": {"cpu_temp": 45.0, "cpu_fan_rpm": 2400.0, "psu_temp": 39.0}}]
    envs = list(read_ipmi_file(tmp_path / "b.lp"))
    assert [len(e["text"].splitlines()) for e in envs] == [3, 1]
    s = decode_file(tmp_path / "b.lp")
    assert [(x["node"], x["time"], x["values"]) for x in s] == [
        ("n003", 1679682808.0, {"cpu_temp": 45.0, "cpu_fan_rpm": 3000.0, "cpu_voltage": 1.02}),
        ("n003", 1679682823.0, {"cpu_temp": 46.0})]


def test_telegraf_escapes_and_errors():
    host, name, value, unit, t = parse_telegraf_line(
        r"ipmi_sensor,host=n\ 1,name=cpu1\,temp,status_code=ok value=45i 1000000000")
    assert (host, name, value, unit, t) == ("n 1", "cpu1,temp", 45.0, None, 1.0)
    with pytest.raises(ParseError) as err:
        parse_telegraf_line("ipmi_sensor,name=x value=1 1000")
    assert err.value.kind == "missing_field"
    with pytest.raises(ParseError) as err:
        parse_telegraf_line("ipmi_sensor,host=a,name=x value=abc 1000")
    assert err.value.kind == "bad_number"
    with pytest.raises(ParseError) as err:
        parse_telegraf_line("ipmi_sensor,host=a,name=x value=1 soon")
    assert err.value.kind == "bad_time"


def test_malformed_rows_and_envelopes(tmp_path):
    p = tmp_path / "n9.csv"
    p.write_text("3,CPU1 Temp,Temperature,58.00,C,'OK'\n"            # line 1: outside a poll
                 "# hpcguard-poll host=n9 time=soon\n"                # line 2: bad poll time
                 "# hpcguard-poll host=n9 time=100.0\n"
                 "ID,Name,Type,Reading,Units,Event\n"
                 "3,CPU1 Temp,Temperature,hot,C,'OK'\n")             # line 5: bad reading
    out = list(read_ipmi_file(p))
    rejected = [(r.line, r.kind) for r in out if isinstance(r, Rejected)]
    assert rejected == [(1, "missing_field"), (2, "bad_time")]
    env = next(x for x in out if isinstance(x, dict))
    with pytest.raises(ParseError) as err:
        decode_ipmi_envelope(env)
    assert err.value.kind == "bad_number" and err.value.line == 5
    for bad, kind in [({"format": "csv", "text": ""}, "unknown_format"),
                      ({"format": "freeipmi-csv", "text": "", "time": 1.0}, "missing_field"),
                      ({"format": "freeipmi-csv", "text": "", "host": "n1", "time": "x"}, "bad_time"),
                      ({"format": "freeipmi-csv", "host": "n1", "time": 1.0}, "missing_field")]:
        with pytest.raises(ParseError) as err:
            decode_ipmi_envelope(bad)
        assert err.value.kind == kind
    with pytest.raises(ParseError) as err:
        parse_ipmitool("CPU1 Temp | 30h | ok | 45 degrees C")
    assert err.value.kind == "bad_row"


def test_mapping_is_case_and_separator_insensitive_and_site_overridable(tmp_path):
    m = SensorMapping.load()
    assert m.ipmi_canonical("cpu1_temp") == m.ipmi_canonical("CPU1-TEMP") == m.ipmi_canonical("Cpu1 Temp") == "cpu_temp"
    assert m.ipmi_canonical("System Temp") is None
    site = tmp_path / "site.toml"
    site.write_text('[ipmi.cpu_temp]\nnames = ["Proc Temp A", "Proc Temp B"]\nreduce = "first"\n')
    ms = SensorMapping.load(site)
    assert ms.ipmi_canonical("proc_temp_b") == "cpu_temp" and ms.ipmi_canonical("CPU1 Temp") is None
    env = {"format": "ipmitool-sdr", "host": "x", "time": 1.0,
           "text": "Proc Temp B | 1h | ok | 3.1 | 50 degrees C\nProc Temp A | 2h | ok | 3.1 | 40 degrees C\n"}
    assert decode_ipmi_envelope(env, ms)[0]["values"] == {"cpu_temp": 40.0}  # first by priority
    assert ms.ipmi_canonical("FAN1A") == "cpu_fan_rpm"  # other sensors keep the defaults
    short = tmp_path / "short.toml"
    short.write_text('[ipmi]\ncpu_voltage = ["VCCIN A"]\ncpu_fan_rpm = ["FAN1", "FAN2", "Fan Pct"]\n')
    ms = SensorMapping.load(short)
    assert ms.ipmi_canonical("vccin-a") == "cpu_voltage"
    # a list names the sensors; the quantity's rules stay: fans combine by their minimum, in RPM only
    assert ms.ipmi_reduce("cpu_fan_rpm") == "min" and ms.ipmi_reduce("cpu_voltage") == "first"
    env = {"format": "ipmitool-sdr", "host": "x", "time": 1.0,
           "text": "FAN1 | 1h | ok | 7.1 | 7200 RPM\nFAN2 | 2h | ok | 7.1 | 2900 RPM\nFan Pct | 3h | ok | 7.1 | 40 percent\n"}
    assert decode_ipmi_envelope(env, ms)[0]["values"] == {"cpu_fan_rpm": 2900.0}
    assert SensorMapping.load(site).ipmi_reduce("cpu_temp") == "first"   # a reduce the site sets wins


def test_every_documented_ipmi_variant_parses_to_a_value():
    """The example line of each row of docs/formats.md's IPMI table goes through the parsers."""
    import re
    from pathlib import Path

    from hpcguard.connectors.ipmi import TimeLine, detect_ipmi_format, parse_freeipmi

    doc = (Path(__file__).resolve().parents[1] / "docs" / "formats.md").read_text()
    section = doc[doc.index("### IPMI"):doc.index("### Slurm")]
    rows = [r for r in section.splitlines() if r.startswith("| ") and "`" in r and not r.startswith("| variant")]
    assert len(rows) >= 10
    for row in rows:
        example = re.search(r"`([^`]+)`", row.split(" | ")[1]).group(1).replace("\\|", "|")
        if example.endswith(".tar.xz"):
            continue
        if example.startswith("Timestamp:"):
            assert TimeLine().parse(example) == 1748908801.0
            continue
        if example.startswith("ipmi_sensor"):
            node, name, value, unit, t = parse_telegraf_line(example)
            assert value is not None and unit and t > 1.5e9
            assert node == ("10.0.0.7" if "server=" in example else "c1")  # the BMC, not the collector
            continue
        fmt = detect_ipmi_format([example])
        rows_ = parse_freeipmi(example) if fmt == "freeipmi-csv" else parse_ipmitool(example)
        assert fmt and rows_[0][1] is not None and rows_[0][2], (row, rows_)
