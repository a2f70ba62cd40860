"""Coverage reports group nodes by BMC family (issue 59, item 3).

``sensors.toml`` ``[families]`` lists marker names per vendor; a node reporting one is in
that family, whatever the spelling (FreeIPMI ``Fan1A RPM``, Telegraf ``fan1a_rpm``), with
the default mapping and with a site map.  Checked through ``hpcguard replay DIR --dry-run
--json`` on one-line files and on the real samples of ``../shared/data/real-formats/``.
"""
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hpcguard.cli import app
from hpcguard.connectors.coverage import SensorCoverage
from hpcguard.connectors.mapping import SensorMapping
from hpcguard.connectors.recorded import load_sensor_grid
from hpcguard.connectors.replay import dry_run
from _shared import SHARED_DATA
from test_ipmi_real import telegraf_v1

REAL = SHARED_DATA / "real-formats" / "ipmi"
T0 = 1_700_000_010.0
NS = int(T0) * 10**9
runner = CliRunner()

# family: (node, FreeIPMI name, type, reading, unit) — one marker reading each, as the repro
ONE_LINE = {
    "hpe-ilo": ("hpe1", "02-CPU 1", "Temperature", "40.00", "C"),
    "gigabyte": ("gb1", "CPU0_TEMP", "Temperature", "45.00", "C"),
    "dell-idrac": ("dell1", "Fan1A RPM", "Fan", "4000.00", "RPM"),
    "supermicro": ("smc1", "Vcpu", "Voltage", "1.80", "V"),
}
TELEGRAF_UNITS = {"C": "degrees_c", "RPM": "rpm", "V": "volts"}


def _telegraf_name(name: str) -> str:
    """Telegraf's ipmi_sensor name tag: lower case, spaces to underscores (``Fan1A RPM`` → ``fan1a_rpm``)."""
    return name.lower().replace(" ", "_")


def _dry_run_json(*args: str) -> dict:
    r = runner.invoke(app, ["replay", *args, "--dry-run", "--json"], env={"HPCGUARD_CONFIG": ""})
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _freeipmi_dir(root):
    (root / "ipmi").mkdir(parents=True)
    for node, name, kind, reading, unit in ONE_LINE.values():
        (root / "ipmi" / f"{node}.csv").write_text(f"# hpcguard-poll host={node} time={T0}\n"
                                                   f"1,{name},{kind},{reading},{unit},'OK'\n")
    return root


def _telegraf_dir(root):
    (root / "ipmi").mkdir(parents=True)
    v2 = [f"ipmi_sensor,host={node},name={_telegraf_name(name)},status_code=ok,unit={TELEGRAF_UNITS[unit]} "
          f"value={float(reading)} {NS}" for node, name, _, reading, unit in ONE_LINE.values()]
    (root / "ipmi" / "metrics.out").write_text("\n".join(v2) + "\n")
    return root


def _groups(report: dict) -> dict[str, list[str]]:
    return {g: rep["example_nodes"] for g, rep in report["coverage"]["groups"].items()}


def test_one_line_freeipmi_files_are_four_families_not_four_signatures(tmp_path):
    out = _dry_run_json(str(_freeipmi_dir(tmp_path / "rec")))
    assert out["errors"] == {}
    assert _groups(out) == {f: [node] for f, (node, *_) in ONE_LINE.items()}
    # the signatures stay, each naming its family
    assert sorted(s["group"] for s in out["coverage"]["signatures"].values()) == sorted(ONE_LINE)


def test_telegraf_spellings_are_the_same_families(tmp_path):
    out = _dry_run_json(str(_telegraf_dir(tmp_path / "rec")))
    assert out["errors"] == {} and out["records"]["ipmi"] == 4
    assert _groups(out) == {f: [node] for f, (node, *_) in ONE_LINE.items()}
    # the other HPE marker in Telegraf's spelling (beside a fan, so the node has a value on the grid),
    # and the offline loader agrees
    lp = (f"ipmi_sensor,host=hpe2,name=01-inlet_ambient,status_code=ok,unit=degrees_c value=21 {NS}\n"
          f"ipmi_sensor,host=hpe2,name=fan_1,status_code=ok,unit=rpm value=5200 {NS}\n")
    (tmp_path / "rec" / "ipmi" / "hpe2.lp").write_text(lp)
    grid = load_sensor_grid(tmp_path / "rec")
    groups = {g: r["example_nodes"] for g, r in grid.coverage.report()["groups"].items()}
    assert groups["hpe-ilo"] == ["hpe1", "hpe2"] and groups["dell-idrac"] == ["dell1"]


def test_with_a_site_map_the_packaged_and_the_sites_own_families(tmp_path):
    site = tmp_path / "site.toml"
    # the site renames its names (short form) and adds a family of its own, listed before the vendors'
    site.write_text('[ipmi]\ncpu_temp = ["CPU0_TEMP", "02-CPU 1"]\n[families]\ngen2 = ["CPU0_TEMP"]\n')
    out = _dry_run_json(str(_freeipmi_dir(tmp_path / "rec")), "--sensor-map", str(site))
    assert _groups(out) == {"gen2": ["gb1"], "hpe-ilo": ["hpe1"], "dell-idrac": ["dell1"], "supermicro": ["smc1"]}
    out = _dry_run_json(str(_telegraf_dir(tmp_path / "tg")), "--sensor-map", str(site))
    assert set(_groups(out)) == {"gen2", "hpe-ilo", "dell-idrac", "supermicro"}
    assert SensorMapping.load(site).family_of({"cpu0_temp"}) == "gen2"


def test_unrecognised_names_keep_their_signature_group():
    m = SensorMapping.load()
    cov = SensorCoverage(sensors=("cpu_temp",), families=m.family_of)
    cov.add_raw("a", "SPD_FAN_SYS0_R", None)
    cov.add_raw("b", "Fan1A RPM", None)
    cov.add_counts("a", {"cpu_temp": 0}, 1)
    cov.add_counts("b", {"cpu_temp": 0}, 1)
    groups = cov.report()["groups"]
    assert set(groups) == {"dell-idrac", cov.signature_of("a")} and cov.signature_of("a").startswith("names-")
    # an explicit label still wins; merging keeps the family rule
    total = SensorCoverage(sensors=("cpu_temp",))
    total.merge(cov)
    assert total.group_of("b") == "dell-idrac"
    cov.set_group("b", "rack-7")
    assert cov.group_of("b") == "rack-7"


# --- the real samples -------------------------------------------------------------------------
# sample → its BMC family (None: no marker of any family: fan-only and Meta's own boards)
REAL_FAMILIES = {
    "datakit_R620v1.txt": "dell-idrac", "datakit_R620v2.txt": "dell-idrac",
    "datakit_R740v1.txt": "dell-idrac", "datakit_R740v2.txt": "dell-idrac",
    "datakit_RH2288V3.txt": "huawei-ibmc", "telegraf_ibm_sdr_v1.txt": "ibm-imm",
    "controlr_supermicro_freeipmi_state_noheader.csv": "supermicro",
    "afancontrol_supermicro_freeipmi.csv": None,
    "gcm_freeipmi_noheader_pass.csv": None, "gcm_freeipmi_noheader_psu_fail.csv": None,
    "telegraf_sdr_elist_v2.txt": None,
    "telegraf_readme_v1_local.lp": "hpe-ilo", "telegraf_readme_v2_local.lp": "hpe-ilo",  # iLO's "power_supplies"
}


@pytest.mark.skipif(not REAL.is_dir(), reason=f"real-format corpus not found at {REAL}")
def test_real_samples_are_grouped_by_family_in_both_spellings(tmp_path):
    d = tmp_path / "rec"
    (d / "ipmi").mkdir(parents=True)
    want = {}
    for i, (name, family) in enumerate(sorted(REAL_FAMILIES.items())):
        text = (REAL / name).read_text()
        if name.endswith(".lp"):  # the README lines, with the host tag Telegraf's agent adds
            node = f"lp{i:02d}"
            (d / "ipmi" / f"{node}.lp").write_text(text.replace("ipmi_sensor,", f"ipmi_sensor,host={node},")
                                                   .replace("1517125513", "1700000010").replace("1517125474",
                                                                                                "1700000010"))
            want[node] = family
            continue
        node = f"n{i:02d}"
        (d / "ipmi" / f"{node}.{name.rsplit('.', 1)[1]}").write_text(
            f"# hpcguard-poll host={node} time={T0}\n" + text)
        want[node] = family
        if name.endswith(".txt"):  # the same dump as Telegraf metric_version 1 lines (lower case, underscores)
            tg = f"t{i:02d}"
            (d / "ipmi" / f"{tg}.out").write_text(telegraf_v1(text, host=tg, ts=NS))
            want[tg] = family
    out = _dry_run_json(str(d))
    got = {n: g for g, rep in out["coverage"]["groups"].items() for n in rep["example_nodes"]}
    # example_nodes lists three per group: check every node through its signature's group too
    for sig in out["coverage"]["signatures"].values():
        for n in sig["example_nodes"]:
            got.setdefault(n, sig["group"])
    assert set(got) == set(want)
    for node, family in want.items():
        if family is None:
            assert got[node].startswith("names-"), (node, got[node])
        else:
            assert got[node] == family, (node, got[node])
    # the offline loader groups them alike
    grid = load_sensor_grid(d)
    assert {n: grid.coverage.group_of(n) for n in want} == got
    assert np.isfinite(grid.values).any()
