import json

import numpy as np
import pytest

from hpcguard.connectors.coverage import SensorCoverage, coverage_of_grid
from hpcguard.connectors.recorded import load_sensor_grid
from hpcguard.models.features import CANONICAL_SENSORS


def test_shares_per_sensor_node_and_group():
    cov = SensorCoverage()
    values = np.full((3, 10, len(CANONICAL_SENSORS)), np.nan)
    values[:, :, 0] = 50.0  # cpu_temp everywhere
    values[0, :, 1] = 6000.0  # cpu_fan_rpm on n1 only
    values[1, :4, 1] = 6000.0  # ... and 4 of 10 steps on n2
    cov.add_grid(["n1", "n2", "n3"], values)
    for node in ("n1", "n2"):
        cov.set_group(node, "gen-a")
    cov.set_group("n3", "gen-b")
    r = cov.report()
    assert r["nodes"] == 3 and r["node_steps"] == 30
    assert r["sensors"]["cpu_temp"]["share"] == 1.0
    assert r["sensors"]["cpu_fan_rpm"]["share"] == pytest.approx(14 / 30, abs=1e-4)
    assert r["sensors"]["cpu_fan_rpm"]["nodes_below_half"] == 2
    assert r["groups"]["gen-a"]["shares"]["cpu_fan_rpm"] == pytest.approx(14 / 20)
    assert r["groups"]["gen-b"]["shares"]["cpu_fan_rpm"] == 0.0
    json.dumps(r)  # JSON-able
    warn = {w.split(":")[0]: w for w in cov.warnings(0.5)}
    assert "cpu_temp" not in warn and "cpu_fan_rpm" in warn
    assert "n2, n3" in warn["cpu_fan_rpm"] and "gen-b (1 nodes)" in warn["cpu_fan_rpm"]
    assert "n1" not in warn["cpu_fan_rpm"].split("below:")[1]
    assert "47%" in warn["cpu_fan_rpm"]


def test_raw_names_unmapped_and_unit_mismatch_are_reported():
    cov = SensorCoverage(sensors=("cpu_temp", "cpu_fan_rpm"))
    cov.add_raw("n1", "CPU1 Temp", "cpu_temp", 5)
    cov.add_raw("n2", "CPU 1 Temp", "cpu_temp", 3)
    for node in ("n1", "n2"):
        cov.add_raw(node, "Inlet Temp", None, 4)
    cov.add_raw("n1", "Sys Power", None, 9, unit="Watts")
    cov.add_unit_mismatch("n1", "fan_1", "cpu_fan_rpm", "percent", 2)
    cov.add_counts("n1", {"cpu_temp": 5}, 5)
    cov.add_counts("n2", {"cpu_temp": 3}, 5)
    r = cov.report()
    assert r["sensors"]["cpu_temp"]["raw_names"] == {"CPU1 Temp": 5, "CPU 1 Temp": 3}
    assert r["sensors"]["cpu_temp"]["share"] == 0.8
    # a measured quantity (a unit) comes first: a candidate for the site's mapping
    assert [(u["name"], u["readings"], u["nodes"], u["units"]) for u in r["unmapped"]] == [
        ("Sys Power", 9, 1, ["Watts"]), ("Inlet Temp", 8, 2, [])]
    assert r["unit_mismatch"] == [{"name": "fan_1", "canonical": "cpu_fan_rpm", "unit": "percent", "readings": 2,
                                   "nodes": 1}]
    # nodes with different raw-name sets fall into different signature groups
    assert r["signature_count"] == 2 and cov.signature_of("n1") != cov.signature_of("n2")


def test_merge_adds_counts_and_names():
    a, b = SensorCoverage(), SensorCoverage()
    a.add_grid(["n1"], np.full((1, 4, 10), 1.0))
    b.add_grid(["n1", "n2"], np.full((2, 4, 10), np.nan))
    b.add_raw("n2", "FAN1", "cpu_fan_rpm")
    a.merge(b)
    r = a.report()
    assert r["node_steps"] == 12 and r["sensors"]["load_1min"]["share"] == pytest.approx(4 / 12, abs=1e-4)
    assert r["sensors"]["cpu_fan_rpm"]["raw_names"] == {"FAN1": 1}


def test_grid_shape_must_match():
    with pytest.raises(ValueError, match="does not match"):
        coverage_of_grid(["n1", "n2"], np.zeros((1, 3, 10)))
    assert SensorCoverage().warnings() == ["no node-steps seen: coverage unknown"]


def test_loaded_grid_carries_its_coverage(tmp_path):
    (tmp_path / "ipmi").mkdir()
    # two hardware generations: one whose fans the mapping knows, one that reports fans in percent
    (tmp_path / "ipmi" / "a1.csv").write_text(
        "# hpcguard-poll host=a1 time=0\nID,Name,Type,Reading,Units,Event\n1,CPU1 Temp,Temperature,50.00,C,'OK'\n"
        "2,FAN1,Fan,5000.00,RPM,'OK'\n3,Inlet Temp,Temperature,20.00,C,'OK'\n"
        "# hpcguard-poll host=a1 time=15\nID,Name,Type,Reading,Units,Event\n1,CPU1 Temp,Temperature,51.00,C,'OK'\n"
        "2,FAN1,Fan,5100.00,RPM,'OK'\n3,Inlet Temp,Temperature,20.00,C,'OK'\n")
    (tmp_path / "ipmi" / "b1.txt").write_text(
        "# hpcguard-poll host=b1 time=0\nCPU 1 Temp | 30h | ok | 3.1 | 44 degrees C\n"
        "Fan 1 | 40h | ok | 7.1 | 43 percent\n"
        "# hpcguard-poll host=b1 time=15\nCPU 1 Temp | 30h | ok | 3.1 | 45 degrees C\n"
        "Fan 1 | 40h | ok | 7.1 | 44 percent\n")
    grid = load_sensor_grid(tmp_path)
    assert grid.nodes == ["a1", "b1"] and grid.values.shape == (2, 2, 10)
    assert grid.values[1, :, 0].tolist() == [44.0, 45.0] and np.isnan(grid.values[1, :, 1]).all()
    r = grid.coverage.report()
    assert r["sensors"]["cpu_temp"]["share"] == 1.0 and r["sensors"]["cpu_fan_rpm"]["share"] == 0.5
    assert r["sensors"]["cpu_temp"]["raw_names"] == {"CPU1 Temp": 2, "CPU 1 Temp": 2}
    assert r["unit_mismatch"][0]["name"] == "Fan 1" and r["unit_mismatch"][0]["unit"] == "percent"
    assert r["unmapped"][0]["name"] == "Inlet Temp"
    fan = next(w for w in grid.coverage.warnings(0.6) if w.startswith("cpu_fan_rpm"))
    assert "b1" in fan and "a1" not in fan.split("below:")[1]
