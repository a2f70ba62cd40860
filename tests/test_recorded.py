import json
import math

import numpy as np
import pytest

from hpcguard.connectors.ipmi import decode_ipmi_envelope, read_ipmi_file
from hpcguard.connectors.ldms import LdmsDecoder, read_store_csv
from hpcguard.connectors.recorded import load_anomalies, load_failures, load_meta, load_sensor_grid
from hpcguard.models.features import CANONICAL_SENSORS

GRID = 15.0
T0 = 1_700_000_010.0  # a multiple of 15 s


def write_recording(root, seed=0, hours=0.25):
    """A small recording with every sampler, jitter, a counter reset, a gap and N/A readings."""
    rng = np.random.default_rng(seed)
    (root / "ldms").mkdir()
    (root / "ipmi").mkdir()
    nodes = ["n001", "n002", "n003"]
    steps = int(hours * 3600 / GRID)
    schemas = {
        "procstat": ["cpu_user", "cpu_nice", "cpu_sys", "cpu_idle", "cpu_iowait"],
        "loadavg": ["load1min", "load5min", "load15min"],
        "meminfo": ["MemTotal", "MemFree", "MemAvailable"],
        "diskusage": ["used_kb", "size_kb"],
        "procnetdev": ["rx_bytes#eth0", "tx_bytes#eth0"],
    }
    for schema, cols in schemas.items():
        lines = []
        counters = {n: np.zeros(len(cols)) for n in nodes}
        for k in range(steps):
            for i, n in enumerate(nodes):
                if n == "n003" and 20 <= k < 30:
                    continue  # down: a gap
                if n == "n002" and k == 40:
                    counters[n][:] = 0  # reboot: counter reset
                t = T0 + k * GRID + rng.uniform(0, 3)
                if schema in ("procstat", "procnetdev"):
                    counters[n] += rng.integers(1, 1000, len(cols))
                    vals = counters[n]
                elif schema == "meminfo":
                    vals = [1000, 100, rng.integers(100, 900)]
                elif schema == "diskusage":
                    vals = [rng.integers(1, 100), 100]
                else:
                    vals = rng.uniform(0, 8, 3).round(2)
                lines.append(f"{t:.6f},0,{n},{i + 1},0," + ",".join(str(int(v)) if schema != "loadavg" else str(v)
                                                                   for v in vals))
        header = "#Time,Time_usec,ProducerName,component_id,job_id," + ",".join(cols) + "\n"
        if schema == "meminfo":  # altheader
            (root / "ldms" / f"{schema}.HEADER").write_text(header)
            (root / "ldms" / f"{schema}.csv").write_text("\n".join(lines) + "\n")
        else:
            (root / "ldms" / f"{schema}.csv").write_text(header + "\n".join(lines) + "\n")
    (root / "ldms" / "lustre_client.csv").write_text("#Time,Time_usec,ProducerName,component_id,job_id,read_bytes,"
                                                     "write_bytes\n")
    for i, n in enumerate(nodes):
        out = []
        for k in range(steps):
            for extra in ((0.5, 8.0) if k % 7 == 0 else (0.5,)):  # sometimes two polls in a step
                t = T0 + k * GRID + extra
                temp = "N/A" if rng.random() < 0.05 else f"{rng.uniform(40, 60):.2f}"
                out.append(f"# hpcguard-poll host={n} time={t:.3f}\nID,Name,Type,Reading,Units,Event\n"
                           f"3,CPU1 Temp,Temperature,{temp},C,'OK'\n4,CPU2 Temp,Temperature,{rng.uniform(40, 60):.2f},C,'OK'\n"
                           f"7,Vcore,Voltage,{rng.uniform(1, 1.2):.2f},V,'OK'\n9,FAN1A,Fan,{rng.integers(3000, 9000)},RPM,'OK'\n"
                           f"10,FAN1B,Fan,{rng.integers(3000, 9000)},RPM,'OK'\n5,PS1 Temp,Temperature,N/A,C,N/A\n"
                           f"1,Inlet Temp,Temperature,21.00,C,'OK'\n")
        (root / "ipmi" / f"{n}.csv").write_text("".join(out))
    (root / "meta.json").write_text(json.dumps({"nodes": nodes, "start": T0, "end": T0 + steps * GRID}))
    (root / "failures.csv").write_text("time,node,job_id,cause\n1700000100.5,n002,4242,fan\n1700000200.0,n001,,psu\n")
    (root / "anomalies.csv").write_text("start,end,node,kind,leads_to_failure\n1.0,2.0,n001,fan,1\n3.0,4.0,n002,stall,0\n")
    return nodes, steps


def streamed_grid(root, nodes, steps):
    """Reference: the streaming decoders, then mean (LDMS) / last value (IPMI) per step in plain Python."""
    dec = LdmsDecoder()
    acc: dict = {}
    for f in sorted((root / "ldms").glob("*.csv")):
        schema = f.stem
        if schema == "lustre_client":
            continue
        for row in read_store_csv(f):
            s = dec.decode(schema, row)
            if s:
                for k, v in s["values"].items():
                    acc.setdefault((s["node"], int(s["time"] // GRID), k), []).append(v)
    last: dict = {}
    for f in sorted((root / "ipmi").glob("*.csv")):
        for env in read_ipmi_file(f):
            for s in decode_ipmi_envelope(env):
                for k, v in s["values"].items():
                    last[(s["node"], int(s["time"] // GRID), k)] = v
    out = np.full((len(nodes), steps, len(CANONICAL_SENSORS)), np.nan)
    base = int(T0 // GRID)
    for (node, step, k), vs in acc.items():
        if 0 <= step - base < steps:
            out[nodes.index(node), step - base, CANONICAL_SENSORS.index(k)] = sum(vs) / len(vs)
    for (node, step, k), v in last.items():
        if 0 <= step - base < steps:
            out[nodes.index(node), step - base, CANONICAL_SENSORS.index(k)] = v
    return out


def test_grid_matches_the_streaming_decoders(tmp_path):
    nodes, steps = write_recording(tmp_path)
    grid = load_sensor_grid(tmp_path, grid_s=GRID)
    assert grid.nodes == nodes and grid.t0 == T0 and grid.values.shape == (3, steps, 10)
    ref = streamed_grid(tmp_path, nodes, steps)
    np.testing.assert_array_equal(np.isnan(grid.values), np.isnan(ref))
    np.testing.assert_allclose(grid.values[~np.isnan(ref)], ref[~np.isnan(ref)], rtol=1e-12)
    # missing values stay missing: the down node, and PS1 Temp which always reads N/A
    assert np.isnan(grid.values[2, 21:29, 4]).all()
    assert np.isnan(grid.values[:, :, CANONICAL_SENSORS.index("psu_temp")]).all()
    # every other sensor present somewhere; counter reset on n002 at step 40 leaves cpu_user missing there
    assert not np.isnan(grid.values[:, :, [0, 1, 2, 4, 5, 6, 7, 8, 9]]).all(axis=(0, 1)).any()
    assert np.isnan(grid.values[1, 40, CANONICAL_SENSORS.index("cpu_user")])
    assert math.isclose(grid.times[1] - grid.times[0], GRID)


def test_failures_anomalies_meta(tmp_path):
    write_recording(tmp_path, hours=0.05)
    f = load_failures(tmp_path)
    assert f["node"].tolist() == ["n002", "n001"] and f["time"][0] == 1700000100.5 and f["job_id"][1] == ""
    a = load_anomalies(tmp_path)
    assert a["leads_to_failure"].tolist() == [True, False] and a["kind"][1] == "stall"
    assert load_meta(tmp_path)["nodes"] == ["n001", "n002", "n003"]
    assert load_meta(tmp_path / "ldms") == {}
    with pytest.raises(FileNotFoundError):
        load_sensor_grid(tmp_path / "nope")


def test_bad_ipmi_rows_are_counted_not_used(tmp_path):
    nodes, steps = write_recording(tmp_path, hours=0.05)
    with open(tmp_path / "ipmi" / "n001.csv", "a") as fh:
        fh.write("garbage line\n")
    grid = load_sensor_grid(tmp_path)
    assert grid.skipped == {"ipmi_bad_row": 1}
    assert grid.values.shape == (3, steps, 10)


def test_ipmitool_and_telegraf_recordings(tmp_path):
    (tmp_path / "ipmi").mkdir()
    (tmp_path / "ipmi" / "n001.txt").write_text(
        "# hpcguard-poll host=n001 time=0.5\nCPU1 Temp | 30h | ok | 3.1 | 45 degrees C\n"
        "# hpcguard-poll host=n001 time=9.5\nCPU1 Temp | 30h | ok | 3.1 | 47 degrees C\n"
        "# hpcguard-poll host=n001 time=15.5\nCPU1 Temp | 30h | ns | 3.1 | No Reading\n")
    (tmp_path / "ipmi" / "n002.lp").write_text(
        "ipmi_sensor,host=n002,name=fan1a,status_code=ok,unit=rpm value=3000 16000000000\n")
    grid = load_sensor_grid(tmp_path)
    assert grid.nodes == ["n001", "n002"] and grid.t0 == 0.0 and grid.values.shape == (2, 2, 10)
    assert grid.values[0, :, 0].tolist()[0] == 47.0 and np.isnan(grid.values[0, 1, 0])  # last value; N/A stays NaN
    assert grid.values[1, 1, 1] == 3000.0
    cov = grid.coverage.report()
    assert cov["sensors"]["cpu_fan_rpm"]["raw_names"] == {"fan1a": 1}  # Telegraf names reach the coverage too
    assert cov["sensors"]["cpu_temp"]["raw_names"] == {"CPU1 Temp": 2} and cov["node_steps"] == 4


def test_failure_labels_need_only_time_and_node_and_take_iso_times_and_hostlists(tmp_path):
    from hpcguard.connectors.errors import ParseError

    def labels(text):
        (tmp_path / "failures.csv").write_text(text, encoding="utf-8")
        return load_failures(tmp_path)

    epoch = labels("time,node\n1700000100.5,n002\n1700000200,n001\n")
    iso = labels("node,time\nn002,2023-11-14T22:15:00.5Z\n\nn001,2023-11-14T23:16:40+01:00\n")
    assert iso["node"].tolist() == epoch["node"].tolist() == ["n002", "n001"]
    assert iso["time"].tolist() == epoch["time"].tolist() == [1700000100.5, 1700000200.0]
    assert epoch["family"].tolist() == ["", ""] and epoch["job_id"].tolist() == ["", ""]
    exported = labels("\ufefftime,node\r\n1700000100.5,n002\r\n1700000200,n001\r\n")   # spreadsheet export
    assert exported["time"].tolist() == epoch["time"].tolist()
    # a failure that took a chassis: one row per node; the family falls back to the cause, lower case
    both = labels("time,node,cause\n1700000100,n[001-003],PSU\n")
    assert both["node"].tolist() == ["n001", "n002", "n003"] and set(both["family"]) == {"psu"}
    assert set(both["cause"]) == {"PSU"}
    for text, kind, line, words in (
            ("time,node\n1700000100,n001\n2023-11-14 22:15:00,n002\n", "bad_time", 3, "no UTC offset"),
            ("time,node\nyesterday,n001\n", "bad_time", 2, "neither epoch seconds nor ISO 8601"),
            ("time,node\n1700000100,n[003-001]\n", "bad_hostlist", 2, ""),
            ("time,node\n1700000100,\n", "missing_field", 2, "no node"),
            ("when,node\n1700000100,n001\n", "bad_header", 1, "time,node")):
        with pytest.raises(ParseError) as err:
            labels(text)
        assert (err.value.kind, err.value.line) == (kind, line) and words in str(err.value)


def test_a_history_labelled_with_time_and_node_only_counts_every_failure_as_a_precursor_failure(tmp_path):
    from hpcguard.simulators.failure_training import load_recorded as _load_recorded
    from hpcguard.simulators.failure_training import read_recorded as _read_recorded
    from hpcguard.simulators.failure_training import save_recorded as _save_recorded

    write_recording(tmp_path, hours=0.05)
    with_family = _load_recorded(str(tmp_path))
    assert with_family.precursor.tolist() == [True, True] and with_family.family == ["fan", "psu"]
    (tmp_path / "failures.csv").write_text("time,node\n2023-11-14T22:15:00.5Z,n002\n1700000200,n001\n")
    bare = _load_recorded(str(tmp_path))
    assert bare.precursor is None and bare.family == ["", ""]
    assert bare.failure_times.tolist() == with_family.failure_times.tolist()
    assert bare.failure_nodes.tolist() == with_family.failure_nodes.tolist()
    _save_recorded(bare, tmp_path / "bare.npz")                  # the prior cache keeps "unknown" unknown
    assert _read_recorded(tmp_path / "bare.npz").precursor is None
    _save_recorded(with_family, tmp_path / "known.npz")
    assert _read_recorded(tmp_path / "known.npz").precursor.tolist() == [True, True]
    (tmp_path / "failures.csv").write_text("time,node,family\n1700000100.5,n002,sudden\n1700000200,n001,fan\n")
    assert _load_recorded(str(tmp_path)).precursor.tolist() == [False, True]
