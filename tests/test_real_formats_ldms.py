"""LDMS output written by the LDMS project itself (../shared/data/real-formats/ldms, PROVENANCE.md there)."""
import json

import pytest

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.ldms import LdmsColumns, LdmsDecoder, read_store_csv
from _shared import SHARED_DATA

DIR = SHARED_DATA / "real-formats/ldms"
pytestmark = pytest.mark.skipif(not DIR.is_dir(), reason="real-formats corpus not available")
NET = DIR / "ovis_quickstart" / "procnetdev"
COLUMNS = LdmsColumns()  # LDMS's own names, not the environment's settings


def _rows(path, **kw):
    out = list(read_store_csv(path, **kw))
    assert not [r for r in out if isinstance(r, Rejected)]
    return out


def _as_eth0(tmp_path, name="procnetdev"):
    """The quick-start procnetdev file with its only interface renamed lo → eth0 (lo never counts)."""
    p = tmp_path / name
    p.write_text(NET.read_text().replace("#lo", "#eth0"))
    return p


def _rate(rows, node, col):
    mine = [r for r in rows if r["ProducerName"] == node]
    return (mine[1][col] - mine[0][col]) / (mine[1]["timestamp"] - mine[0]["timestamp"])


def test_store_test_csv_four_columns():
    """ldms_csv_time_drops' input: #Time,Time_usec,ProducerName,component_id only, one time out of order."""
    rows = _rows(DIR / "ovis_store_test" / "test.csv")
    assert len(rows) == 14
    assert rows[0] == {"timestamp": 1.1, "ProducerName": "host1", "component_id": 1}
    assert [r["timestamp"] for r in rows if r["ProducerName"] == "host1"] == [1.1, 2.1, 3.1, 4.1, 5.1, 2.1]
    assert {r["ProducerName"]: r["component_id"] for r in rows} == {"host1": 1, "host2": 2, "host3": 3}
    with pytest.raises(ParseError) as err:  # a schema hpcguard derives nothing from: dead-lettered, named
        LdmsDecoder(columns=COLUMNS).decode("test", rows[0])
    assert err.value.kind == "unknown_schema" and "'test'" in err.value.reason


def test_quickstart_procnetdev_loopback_only_is_never_counted():
    rows = _rows(NET)
    assert len(rows) == 9 and {r["ProducerName"] for r in rows} == {"s0", "s1"}
    assert rows[0]["timestamp"] == 1558387831.001798 and rows[0]["rx_bytes#lo"] == 12328527
    assert rows[0]["app_id"] == 0 and rows[2]["rx_multicast#lo"] == 12898
    dec = LdmsDecoder(columns=COLUMNS)
    with pytest.raises(ParseError) as err:
        dec.decode("procnetdev", rows[0])
    assert err.value.kind == "missing_field" and "lo never counts" in err.value.reason and "among lo" in err.value.reason


def test_quickstart_procnetdev_rates_on_a_counted_interface(tmp_path):
    rows = _rows(_as_eth0(tmp_path))
    dec = LdmsDecoder(columns=COLUMNS)
    samples = [s for s in (dec.decode("procnetdev", r) for r in rows) if s is not None]
    s0 = [s for s in samples if s["node"] == "s0"]
    assert len(samples) == 7 and len(s0) == 4
    assert s0[0]["time"] == 1558387832.001906
    assert s0[0]["values"]["bytes_in"] == pytest.approx((12342153 - 12328527) / (1558387832.001906 - 1558387831.001798))
    s1 = [s for s in samples if s["node"] == "s1"]
    assert s1[0]["values"] == {"bytes_in": 0.0, "bytes_out": 0.0}  # s1's counters did not move
    assert s1[1]["values"]["bytes_out"] == pytest.approx((342875727 - 342874081) / (1558387834.00113 - 1558387833.002025))


def test_interfaces_summed_ib_and_eno_configurable(tmp_path):
    text = NET.read_text()
    header, *body = text.splitlines()
    # three interfaces: lo (never), ib0 and eno1 (summed)
    cols = header.split(",")[6:]
    header3 = ",".join(header.split(",")[:6] + cols + [c.replace("#lo", "#ib0") for c in cols]
                       + [c.replace("#lo", "#eno1") for c in cols])
    lines = [",".join(r.split(",") + r.split(",")[6:] + [str(2 * int(v)) for v in r.split(",")[6:]]) for r in body]
    p = tmp_path / "procnetdev.csv"
    p.write_text("\n".join([header3] + lines) + "\n")
    rows = _rows(p)
    one = _rate(rows, "s0", "rx_bytes#lo")
    dec = LdmsDecoder(columns=COLUMNS)
    s = [x for x in (dec.decode("procnetdev", r) for r in rows) if x is not None and x["node"] == "s0"][0]
    assert s["values"]["bytes_in"] == pytest.approx(3 * one)  # ib0 (×1) + eno1 (×2); lo left out
    only_ib = LdmsDecoder(columns=LdmsColumns(netdev_interfaces=("ib*",)))
    s = [x for x in (only_ib.decode("procnetdev", r) for r in rows) if x is not None and x["node"] == "s0"][0]
    assert s["values"]["bytes_in"] == pytest.approx(one)


def test_store_csv_variants_give_the_same_rows(tmp_path):
    """altheader, time_format=1 (#Time_msec), ietfcsv quoted names, userdata pairs, as_is digest names."""
    base = _rows(_as_eth0(tmp_path))
    header, *body = (tmp_path / "procnetdev").read_text().splitlines()
    # altheader: header in procnetdev.HEADER, data alone
    (tmp_path / "alt").mkdir()
    (tmp_path / "alt" / "procnetdev.HEADER").write_text(header + "\n")
    (tmp_path / "alt" / "procnetdev").write_text("\n".join(body) + "\n")
    assert _rows(tmp_path / "alt" / "procnetdev") == base
    # time_format=1 and quoted header names
    names = header.split(",")
    quoted = ",".join(f'"{n}"' for n in ["#Time_msec"] + names[1:])
    msec = []
    for line in body:
        f = line.split(",")
        sec, frac = f[0].split(".")
        us = int(frac)
        msec.append(",".join([str(int(sec) * 1000 + us // 1000), str(us % 1000)] + f[2:]))
    p = tmp_path / "msec.csv"
    p.write_text("\n".join([quoted] + msec) + "\n")
    got = _rows(p)
    assert [r["timestamp"] for r in got] == pytest.approx([r["timestamp"] for r in base], abs=1e-6)
    assert [r["rx_bytes#eth0"] for r in got] == [r["rx_bytes#eth0"] for r in base]
    # userdata=1: <metric>.userdata,<metric>.value
    ud_header = ",".join(names[:3] + [x for n in names[3:] for x in (f"{n}.userdata", f"{n}.value")])
    ud = [",".join(line.split(",")[:3] + [x for v in line.split(",")[3:] for x in ("0", v)]) for line in body]
    p = tmp_path / "ud.csv"
    p.write_text("\n".join([ud_header] + ud) + "\n")
    assert _rows(p) == base
    # as_is decomposition: the schema name carries a digest
    dec = LdmsDecoder(columns=COLUMNS)
    samples = [dec.decode("procnetdev_8d2b8bd", r) for r in base]
    assert sum(s is not None for s in samples) == 7
    assert {s["source"] for s in samples if s is not None} == {"ldms:procnetdev"}


def test_avro_kafka_rows_producer_column_from_ldms_decomposition():
    """LDMS's example decomposition names the producer column 'producer': the default columns accept it."""
    decomp = json.loads((DIR / "avro_kafka_flex_decomp.json").read_text())
    producer_cols = {c["dst"] for spec in decomp["decomposition"].values() for r in spec.get("rows", [])
                     for c in r["cols"] if c["src"] == "producer"}
    assert producer_cols == {"producer"} and "producer" in COLUMNS.producer
    rows = _rows(NET.parent / "procnetdev")
    dec = LdmsDecoder(columns=COLUMNS)
    json_rows = [json.loads(json.dumps({**{k: v for k, v in r.items() if k != "ProducerName"},
                                        "producer": r["ProducerName"]}).replace("#lo", "#eth0")) for r in rows]
    samples = [s for s in (dec.decode("procnetdev", r) for r in json_rows) if s is not None]
    assert [s["node"] for s in samples][:2] == ["s0", "s0"] and len(samples) == 7


def test_avro_kafka_doc_row_decomposed_procnetdev2():
    """The documented JSON row (procnetdev2: dev_name + packet counters, no producer column)."""
    row = json.loads((DIR / "avro_kafka_doc_example.json").read_text())
    assert row["dev_name"] == "veth1709f8b" and row["component_id"] == 8 and row["timestamp"] == 1679682808.001751
    dec = LdmsDecoder(columns=COLUMNS)
    with pytest.raises(ParseError) as err:
        dec.decode("procnetdev2", row)
    assert err.value.kind == "missing_field" and "no producer column" in err.value.reason
    # with a producer column (the example decomposition's name), the row is read; it has packets, not bytes
    dec.decode("procnetdev2", {**row, "producer": "n8"})
    with pytest.raises(ParseError, match="no column 'rx_bytes'"):
        dec.decode("procnetdev2", {**row, "producer": "n8", "timestamp": row["timestamp"] + 1})


def test_decomposed_rows_merge_per_time_and_negative_u64(tmp_path):
    """procnetdev2 rows (one interface each) sum per node and time; U64 counters past 2**63 arrive negative."""
    big = 2**64 - 10_000  # a u64 counter near wrap-around, sent by store_avro_kafka as -10000
    dec = LdmsDecoder(columns=COLUMNS)

    def rows(t, eth, ib):
        return [{"timestamp": t, "producer": "n1", "component_id": 1, "dev_name": dev, "rx_bytes": v - 2**64
                 if v >= 2**63 else v, "tx_bytes": 0} for dev, v in (("lo", 10**9), ("eth0", eth), ("ib0", ib))]
    out = [dec.decode("procnetdev2", r) for r in rows(0.0, big, 100) + rows(15.0, big + 3000, 100 + 1500)
           + rows(30.0, big + 3000, 1600)]
    samples = [s for s in out if s is not None]
    assert len(samples) == 1  # time 15 is complete once time 30 arrives; time 0 had no previous step
    assert samples[0]["time"] == 15.0 and samples[0]["values"]["bytes_in"] == pytest.approx(4500 / 15)
    assert dec.stats["unsigned"] > 0 and samples[0]["source"] == "ldms:procnetdev"


def test_procdiskstats_rows_parse_and_schema_is_named():
    rows = _rows(DIR / "ovis_quickstart" / "procdiskstats")
    assert {r["ProducerName"] for r in rows} == {"s0", "s1"}
    first = rows[0]
    assert first["timestamp"] == 1558387831.001731 and first["reads_comp#sda"] == 197797
    assert first["disk.byte_read#sda"] == 1327776668 and first["disk.byte_written.rate#sda"] == 0
    with pytest.raises(ParseError) as err:
        LdmsDecoder(columns=COLUMNS).decode("procdiskstats", first)
    assert err.value.kind == "unknown_schema" and "procdiskstats" in err.value.reason


def test_columns_from_settings():
    from hpcguard.settings import Settings

    s = Settings.load(env={"HPCGUARD_LDMS__PRODUCER_COLUMNS": "hostname", "HPCGUARD_LDMS__NETDEV_INTERFACES": "bond*"})
    cols = LdmsColumns.from_settings(s)
    assert cols.producer == ("hostname",) and cols.netdev_interfaces == ("bond*",)
    assert LdmsColumns.from_settings(Settings()) == COLUMNS
    dec = LdmsDecoder(columns=cols)
    assert dec.decode("loadavg", {"timestamp": 1.0, "hostname": "gpu7", "load1min": 3.0})["node"] == "gpu7"
