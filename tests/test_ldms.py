import math

import pytest

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.ldms import LdmsDecoder, read_store_csv
from hpcguard.connectors.mapping import SensorMapping

HEADER = "#Time,Time_usec,ProducerName,component_id,job_id,MemTotal,MemFree,MemAvailable\n"


def test_store_csv_rows_are_avro_kafka_json_rows(tmp_path):
    p = tmp_path / "meminfo.csv"
    p.write_text(HEADER + "1679682808.001751,1751,n001,1,4242,1000,100,250\n"
                 "1679682823.5,500000,n002,2,0,2000,10,1500.5\n")
    rows = list(read_store_csv(p))
    assert rows[0] == {"timestamp": 1679682808.001751, "component_id": 1, "ProducerName": "n001", "job_id": 4242,
                       "MemTotal": 1000, "MemFree": 100, "MemAvailable": 250}
    assert isinstance(rows[1]["MemAvailable"], float) and rows[1]["job_id"] == 0


def test_malformed_rows_are_rejected_with_line_numbers(tmp_path):
    p = tmp_path / "meminfo.csv"
    p.write_text(HEADER + "1.0,0,n001,1,0,1000,100,250\n"
                 "2.0,0,n001,1,0,1000,100\n"           # line 3: short
                 "x,0,n001,1,0,1000,100,250\n"         # line 4: bad time
                 "4.0,0,n001,1,0,1000,abc,250\n"       # line 5: bad number
                 "\n"
                 "5.0,0,,1,0,1000,100,250\n"           # line 7: no producer
                 "6.0,0,n001,1,0,1000,100,250\n")
    out = list(read_store_csv(p))
    rejected = [(r.line, r.kind) for r in out if isinstance(r, Rejected)]
    assert rejected == [(3, "bad_row"), (4, "bad_time"), (5, "bad_number"), (7, "missing_field")]
    assert [r["timestamp"] for r in out if isinstance(r, dict)] == [1.0, 6.0]
    assert "abc" in next(r for r in out if isinstance(r, Rejected) and r.line == 5).payload


def test_altheader(tmp_path):
    (tmp_path / "meminfo.HEADER").write_text(HEADER)
    (tmp_path / "meminfo.csv").write_text("1.0,0,n001,1,0,1000,100,250\n2.0,0,n001,1,0,1000,100,x\n")
    out = list(read_store_csv(tmp_path / "meminfo.csv"))
    assert out[0]["MemTotal"] == 1000
    assert isinstance(out[1], Rejected) and out[1].line == 2  # line numbers of the data file itself
    # rolled files: meminfo.<epoch> with meminfo.HEADER.<epoch>
    (tmp_path / "meminfo.HEADER.1700000000").write_text(HEADER)
    (tmp_path / "meminfo.1700000000").write_text("3.0,0,n002,2,0,10,1,5\n")
    assert next(read_store_csv(tmp_path / "meminfo.1700000000"))["ProducerName"] == "n002"


def test_missing_or_bad_header(tmp_path):
    (tmp_path / "x.csv").write_text("1.0,0,n001,1,0,1000\n")
    with pytest.raises(ParseError) as err:
        list(read_store_csv(tmp_path / "x.csv"))
    assert err.value.kind == "bad_header" and "HEADER" in err.value.reason
    (tmp_path / "y.csv").write_text("#Stamp,foo\n1,2\n")
    with pytest.raises(ParseError, match="#Time"):
        list(read_store_csv(tmp_path / "y.csv"))


def row(t, node="n001", **metrics):
    return {"timestamp": t, "component_id": 1, "ProducerName": node, "job_id": 0, **metrics}


def test_decoder_gauges_and_ratios():
    dec = LdmsDecoder()
    s = dec.decode("diskusage", row(10.0, used_kb=250, size_kb=1000))
    assert s == {"node": "n001", "time": 10.0, "source": "ldms:diskusage", "values": {"disk_usage": 25.0},
                 "job_id": None}
    assert dec.decode("loadavg", {**row(1.0, load1min=2.5, load5min=1, load15min=1), "job_id": 77})["job_id"] == "77"
    assert dec.decode("meminfo", row(1.0, MemTotal=0, MemFree=0, MemAvailable=0)) is None  # no invented ratio


def test_decoder_counters_procstat_and_procnetdev():
    dec = LdmsDecoder(max_gap_factor=5)
    cols = ["cpu_user", "cpu_nice", "cpu_sys", "cpu_idle", "cpu_iowait"]
    a = dict(zip(cols, [100, 0, 50, 800, 50]))
    b = dict(zip(cols, [130, 0, 60, 850, 60]))  # Δ = 30, 0, 10, 50, 10 → user share 30 %
    assert dec.decode("procstat", row(0.0, **a)) is None
    assert dec.decode("procstat", row(15.0, **b))["values"] == {"cpu_user": pytest.approx(30.0)}
    net = {"rx_bytes#eth0": 0, "tx_bytes#eth0": 0}
    assert dec.decode("procnetdev", row(0.0, **net)) is None
    s = dec.decode("procnetdev", row(15.0, **{"rx_bytes#eth0": 1500, "tx_bytes#eth0": 300}))
    assert s["values"] == {"bytes_in": 100.0, "bytes_out": 20.0}
    # reset (reboot) and gap (> 5 × 15 s) give no value and are counted
    assert dec.decode("procnetdev", row(30.0, **net)) is None
    assert dec.decode("procnetdev", row(200.0, **{"rx_bytes#eth0": 10, "tx_bytes#eth0": 10})) is None
    stats = dec.counter_stats()
    assert stats["reset"] == 2 and stats["gap"] == 2  # two counters each
    assert dec.stats["no_value"] == 4


def test_decoder_errors():
    dec = LdmsDecoder()
    with pytest.raises(ParseError) as err:
        dec.decode("nosuch", row(1.0))
    assert err.value.kind == "unknown_schema"
    with pytest.raises(ParseError) as err:
        dec.decode("loadavg", row(1.0, load5min=1))
    assert err.value.kind == "missing_field"
    with pytest.raises(ParseError) as err:
        dec.decode("loadavg", row(1.0, load1min="high"))
    assert err.value.kind == "bad_number"
    with pytest.raises(ParseError) as err:
        dec.decode("loadavg", row(math.inf, load1min=1))
    assert err.value.kind == "bad_time"
    with pytest.raises(ParseError) as err:
        dec.decode("loadavg", {"timestamp": 1.0, "load1min": 1})
    assert err.value.kind == "missing_field"


def test_site_mapping_overrides_schema(tmp_path):
    site = tmp_path / "site.toml"
    site.write_text('[ldms.procnetdev]\nperiod_s = 10.0\n'
                    'derive.bytes_in = { kind = "rate", column = "rx_bytes#ib0" }\n')
    m = SensorMapping.load(site)
    dec = LdmsDecoder(m)
    dec.decode("procnetdev", row(0.0, **{"rx_bytes#ib0": 0}))
    assert dec.decode("procnetdev", row(10.0, **{"rx_bytes#ib0": 50}))["values"] == {"bytes_in": 5.0}
    assert "meminfo" in m.ldms  # other schemas keep the defaults
    bad = tmp_path / "bad.toml"
    bad.write_text('[ldms.x]\nderive.nonsense = { kind = "gauge", column = "a" }\n')
    with pytest.raises(ParseError, match="not a canonical"):
        SensorMapping.load(bad)
