"""Site profiles of the telemetry simulator: ground truth consistent with the data, formats, determinism."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from hpcguard.cli import app
from hpcguard.connectors.ipmi import detect_ipmi_format
from hpcguard.connectors.recorded import load_anomalies, load_failures, load_sensor_grid
from hpcguard.models.features import CANONICAL_SENSORS
from hpcguard.simulators.profiles import FAN_ROLES, GENERATIONS, LOOKALIKE_KINDS, PROFILES, ROLE, SiteParams
from hpcguard.simulators.telemetry import generate_telemetry, simulate_telemetry

SITE_PROFILES = [p for p in PROFILES if p != "classic"]


@pytest.fixture(scope="module")
def site():
    """32 nodes × 12 h of the ``mixed`` profile with a short MTBF: ~150 failures of every family."""
    return generate_telemetry(32, 12, seed=3, profile="mixed", mtbf_hours=2.0)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Every profile written to disk (12 nodes × 3 h, short MTBF)."""
    out = {}
    for name in PROFILES:
        d = tmp_path_factory.mktemp(name)
        out[name] = (d, simulate_telemetry(str(d), nodes=12, hours=3, seed=5, profile=name, mtbf_hours=3.0))
    return out


def _steps(a: dict, t0: float, t1: float) -> slice:
    return slice(int(np.floor(t0 / 15.0)), int(np.floor(t1 / 15.0)))


def _inside(tel, a, margin=600.0):
    return a["start"] >= margin and a["end"] + margin <= tel.up15.shape[1] * 15.0


def _precursors(tel, family):
    """Precursors of ``family`` with 10 min of data on both sides."""
    return [a for a in tel.anomalies if a["leads_to_failure"] and a["kind"] == family and _inside(tel, a)]


def _benign(tel, kind):
    return [a for a in tel.anomalies if not a["leads_to_failure"] and a["kind"] == kind and _inside(tel, a)]


# ----------------------------------------------------------------------------- files and formats
@pytest.mark.parametrize("name", list(PROFILES))
def test_every_profile_loads_with_high_coverage_of_all_ten_sensors(recorded, name):
    d, summary = recorded[name]
    grid = load_sensor_grid(d)
    assert grid.nodes == summary["nodes"]
    finite = np.isfinite(grid.values)
    reporting = finite.any(axis=2)  # node-steps where the node is up (a down node writes nothing)
    coverage = finite[reporting].mean(axis=0)
    low = {s: round(float(c), 3) for s, c in zip(CANONICAL_SENSORS, coverage) if c < 0.9}
    assert not low, f"{name}: canonical sensors below 90 % of reporting node-steps: {low}"
    f = load_failures(d)
    assert len(f) == summary["counts"]["failures"] > 0


@pytest.mark.parametrize("name", SITE_PROFILES)
def test_generations_write_their_own_names_and_formats(recorded, name):
    d, summary = recorded[name]
    meta = json.loads((d / "meta.json").read_text())
    formats = set()
    for node, gen in meta["hardware"].items():
        g = GENERATIONS[gen]
        path = d / "ipmi" / (f"{node}.csv" if g.format == "freeipmi-csv" else f"{node}.txt")
        head = path.read_text().splitlines()[:40]
        assert detect_ipmi_format(head) == g.format
        text = "\n".join(head)
        assert all(s[1] in text for s in g.sensors), (node, gen)
        formats.add(g.format)
    assert len(set(meta["hardware"].values())) >= 2
    assert meta["generations"].keys() == set(meta["hardware"].values())
    if name in ("mixed", "gradual"):
        assert formats == {"freeipmi-csv", "ipmitool-sdr"}


def test_classic_profile_keeps_the_original_files(recorded):
    d, summary = recorded["classic"]
    assert {p.suffix for p in (d / "ipmi").iterdir()} == {".csv"}
    assert summary["counts"]["missing_polls"] == {"ipmi": 0, "ldms": 0}
    assert summary["bmc_outages"] == [] and set(summary["hardware"].values()) == {"classic"}
    a = generate_telemetry(6, 1, seed=9)
    b = generate_telemetry(6, 1, seed=9, profile="classic")
    assert np.array_equal(a.ipmi, b.ipmi, equal_nan=True) and a.failures == b.failures


def _digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*")):
        if p.is_file() and p.name != "meta.json":  # meta.json holds timings
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


def test_same_seed_same_files_other_seed_other_files(tmp_path):
    runs = {}
    for tag, seed in (("a", 4), ("b", 4), ("c", 5)):
        simulate_telemetry(str(tmp_path / tag), nodes=6, hours=1, seed=seed, profile="intermittent")
        runs[tag] = _digest(tmp_path / tag)
    assert runs["a"] == runs["b"] != runs["c"]


def test_missing_polls_and_bmc_outages_leave_gaps_in_the_files(recorded):
    d, summary = recorded["intermittent"]
    grid = load_sensor_grid(d)
    up_steps = summary["counts"]["samples"]["loadavg"] + summary["counts"]["missing_polls"]["ldms"]
    missing = summary["counts"]["missing_polls"]
    assert 0.005 < missing["ldms"] / up_steps < 0.05
    assert missing["ipmi"] > missing["ldms"]  # outages come on top of single missing polls
    assert summary["bmc_outages"]
    for o in summary["bmc_outages"]:
        n = grid.nodes.index(o["node"])
        k0, k1 = int((o["start"] - grid.t0) // 15), int((o["end"] - grid.t0) // 15)
        assert np.isnan(grid.values[n, k0:k1, CANONICAL_SENSORS.index("cpu_temp")]).all()


def test_ground_truth_columns_record_family_and_onset(recorded):
    d, _ = recorded["mixed"]
    f = load_failures(d)
    rows = [line.split(",") for line in (d / "failures.csv").read_text().splitlines()]
    header, rows = rows[0], rows[1:]
    assert header == ["time", "node", "job_id", "cause", "family", "onset_minutes", "onset_time"]
    for r in rows:
        onset = float(r[5])
        if r[4] == "sudden":
            assert onset == 0 and float(r[6]) == float(r[0]) and r[3] == "no_precursor"
        else:
            assert 3 <= onset <= 20 and abs(float(r[0]) - float(r[6]) - 60 * onset) < 1
    a = load_anomalies(d)
    assert len(a) and len(f)


# ----------------------------------------------------------------------------- failure ground truth
def _uptime_s(tel, f):
    """Seconds the node had been up (since the window start at most) when failure ``f`` happened."""
    up = tel.up15[f["node"], :int(f["time"] // 15)][::-1]
    return 15.0 * (int(np.argmin(up)) if not up.all() else up.size)


def test_sudden_share_and_lookalikes_as_frequent_as_precursors(site):
    fam = [f["family"] for f in site.failures]
    assert len(fam) > 100
    # the profile's 20 % sudden deaths, among failures with time for a precursor (a node
    # back from repair less than the shortest onset ago always dies without warning)
    settled = [f["family"] for f in site.failures if _uptime_s(site, f) >= 1500]
    sudden = settled.count("sudden") / len(settled)
    assert len(settled) > 60 and 0.08 < sudden < 0.32, (len(settled), sudden)  # ±3σ of a binomial share
    just_repaired = [f for f in site.failures if _uptime_s(site, f) < 150 and f["time"] > 1500]
    assert just_repaired and all(f["family"] == "sudden" for f in just_repaired)
    n_prec = sum(a["leads_to_failure"] for a in site.anomalies)
    n_benign = len(site.anomalies) - n_prec
    assert 0.6 < n_benign / n_prec < 1.6, (n_benign, n_prec)
    kinds = {a["kind"] for a in site.anomalies if not a["leads_to_failure"]}
    assert set(LOOKALIKE_KINDS) - {"cooling_blip"} <= kinds <= set(LOOKALIKE_KINDS)  # blips: few, rack-wide
    assert set(fam) - {"sudden"} == {"fan", "voltage", "psu", "stall", "memory_leak", "vcore_droop",
                                    "psu_oscillation", "fan_bearing"}


def test_sudden_deaths_have_no_precursor(site):
    for f in site.failures:
        if f["family"] == "sudden":
            assert not any(a["node"] == f["node"] and a["leads_to_failure"] and a["end"] == f["time"]
                           for a in site.anomalies)
            assert f["onset_time"] == f["time"]


def test_onsets_between_3_and_20_minutes_memory_leaks_at_least_5(site):
    leads = {f: [(a["end"] - a["start"]) / 60 for a in _precursors(site, f)] for f in
             ("fan", "memory_leak", "vcore_droop")}
    assert all(3 <= x <= 20 for v in leads.values() for x in v)
    assert min(leads["memory_leak"]) >= 5
    everything = [(a["end"] - a["start"]) / 60 for a in site.anomalies if a["leads_to_failure"]]
    assert np.percentile(everything, 10) < 7 and np.percentile(everything, 90) > 15  # spread over 3–20


def test_memory_leaks_climb_to_nearly_full_before_the_failure(site):
    leaks = _precursors(site, "memory_leak")
    assert len(leaks) >= 5
    mem = 1 - site.ldms15["meminfo"][..., 2] / site.ldms15["meminfo"][..., 0]
    for a in leaks:
        k_end, k_on = int(a["end"] // 15) - 1, int(a["start"] // 15)
        assert mem[a["node"], k_end] > 0.95
        assert mem[a["node"], k_end] > mem[a["node"], k_on] + 0.02 or mem[a["node"], k_on] > 0.95


def test_fan_bearing_one_fan_decays_the_others_compensate(site):
    wear = _precursors(site, "fan_bearing")
    assert len(wear) >= 5
    hit_ratio, other_ratio = [], []
    for a in wear:
        n, hit = a["node"], FAN_ROLES[a["fan"]]
        others = [FAN_ROLES[i] for i in range(GENERATIONS[site.hardware[n]].n_fans) if FAN_ROLES[i] != hit]
        before = site.ipmi[n, _steps(a, a["start"] - 120, a["start"])]
        late = site.ipmi[n, _steps(a, a["end"] - 60, a["end"])]
        hit_ratio.append(np.nanmean(late[:, hit]) / np.nanmean(before[:, hit]))
        other_ratio.append(np.nanmean(late[:, others]) / np.nanmean(before[:, others]))
    assert np.median(hit_ratio) < 0.75 and np.median(other_ratio) > 1.02


def test_vcore_droops_are_single_polls_growing_in_frequency(site):
    droops = _precursors(site, "vcore_droop")
    assert len(droops) >= 5
    first, second, level = 0, 0, []
    for a in droops:
        v = site.ipmi[a["node"], _steps(a, a["start"], a["end"]), ROLE["vcore"]]
        base = np.nanmedian(site.ipmi[a["node"], _steps(a, a["start"] - 600, a["start"]), ROLE["vcore"]])
        low = v < base * 0.96
        half = low.size // 2
        first, second = first + low[:half].sum(), second + low[half:].sum()
        level.append(np.nanmedian(v[-max(v.size // 3, 1):]) / base)
    assert second > 2 * first
    assert np.median(level) > 0.98  # spikes between normal polls, not a sustained sag


def test_psu_oscillation_grows(site):
    osc = _precursors(site, "psu_oscillation")
    assert len(osc) >= 5
    early, late = [], []
    for a in osc:
        v = site.ipmi[a["node"], _steps(a, a["start"], a["end"]), ROLE["psu1"]]
        third = max(v.size // 3, 2)
        early.append(np.nanstd(v[:third]))
        late.append(np.nanstd(v[-third:]))
    assert np.median(late) > 2 * np.median(early)


# ----------------------------------------------------------------------------- look-alikes recover
def test_fan_dips_recover(site):
    dips = _benign(site, "fan_dip")
    assert len(dips) >= 3
    mid_r, after_r = [], []
    for a in dips:
        n, hit = a["node"], FAN_ROLES[a["fan"]]
        mid = (a["start"] + a["end"]) / 2
        before = np.nanmean(site.ipmi[n, _steps(a, a["start"] - 120, a["start"]), hit])
        mid_r.append(np.nanmean(site.ipmi[n, _steps(a, mid - 30, mid + 30), hit]) / before)
        after_r.append(np.nanmean(site.ipmi[n, _steps(a, a["end"] + 15, a["end"] + 120), hit]) / before)
    assert np.median(mid_r) < 0.8 and abs(np.median(after_r) - 1) < 0.1


def test_cooling_blips_hit_a_whole_rack_and_recover():
    site = generate_telemetry(32, 12, seed=3, profile="mixed", mtbf_hours=3.0,
                              site=SiteParams(lookalikes=(("cooling_blip", 1.0),)))
    events = {}
    for a in _benign(site, "cooling_blip"):
        events.setdefault((a["start"], a["end"]), []).append(a["node"])
    assert len(events) >= 3
    rise, rest = [], []
    for (t0, t1), nodes in events.items():
        assert len({site.racks[n] for n in nodes}) == 1  # one rack at a time
        a = {"start": t0, "end": t1}
        inlet = site.ipmi[nodes][..., ROLE["inlet"]]
        before = np.nanmean(inlet[:, _steps(a, t0 - 60, t0)])
        rise.append(np.nanmean(inlet[:, _steps(a, (t0 + t1) / 2 - 15, (t0 + t1) / 2 + 15)]) - before)
        rest.append(np.nanmean(inlet[:, _steps(a, t1 + 15, t1 + 75)]) - before)
    assert np.median([len(n) for n in events.values()]) > 8  # most of a 16-node rack
    assert np.median(rise) > 1.5 and abs(np.median(rest)) < 1.0


def test_mem_fill_lookalikes_are_jobs_that_fill_ram_and_end(site):
    fills = _benign(site, "mem_fill")
    assert len(fills) >= 3
    mem = 1 - site.ldms15["meminfo"][..., 2] / site.ldms15["meminfo"][..., 0]
    ends = set(np.round(site.jobs["end"][np.isfinite(site.jobs["end"])], 6))
    for a in fills:
        assert round(a["end"], 6) in ends  # the window closes when a real job ends
        k = int(a["end"] // 15)
        assert mem[a["node"], k - 1] > 0.85
        assert not any(f["node"] == a["node"] and a["end"] <= f["time"] < a["end"] + 1200 for f in site.failures)


# ----------------------------------------------------------------------------- site physics
def test_per_fan_baselines_and_job_driven_temperature(site):
    gen_fans = {g: GENERATIONS[g].n_fans for g in set(site.hardware)}
    medians = []
    for n in range(len(site.nodes)):
        fans = list(FAN_ROLES[:gen_fans[site.hardware[n]]])
        medians.append(np.nanmedian(site.ipmi[n][:, fans], axis=0))
    flat = np.concatenate(medians)
    assert 5000 < flat.min() and flat.max() < 10500
    assert np.median([m.max() - m.min() for m in medians]) > 400  # every fan its own baseline
    load = site.ldms15["loadavg"][..., 0]
    cpu = site.ipmi[..., ROLE["cpu1"]]
    ok = site.up15 & np.isfinite(cpu)
    r = [np.corrcoef(load[n][ok[n]], cpu[n][ok[n]])[0, 1] for n in range(len(site.nodes))]
    assert np.median(r) > 0.5


def test_racks_share_inlet_offsets():
    tel = generate_telemetry(64, 2, seed=8, profile="gradual")
    inlet = np.nanmean(tel.ipmi[..., ROLE["inlet"]], axis=1)
    racks = np.array(tel.racks)
    within = np.mean([inlet[racks == r].std() for r in np.unique(racks)])
    assert inlet.std() > 1.5 * within


# ----------------------------------------------------------------------------- CLI
def test_cli_lists_profiles_and_rejects_unknown(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["simulate", "telemetry", "--list-profiles", "--json"])
    assert res.exit_code == 0, res.output
    names = [p["name"] for p in json.loads(res.output)]
    assert names == list(PROFILES) and len(names) >= 4
    res = runner.invoke(app, ["simulate", "telemetry", "--profile", "nope", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "unknown profile" in res.output
    res = runner.invoke(app, ["simulate", "telemetry", "--nodes", "4", "--hours", "0.5", "--profile", "memory",
                              "--out", str(tmp_path / "m"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["profile"] == "memory"
    assert (tmp_path / "m" / "ldms" / "lustre_client.csv").is_file()
    res = runner.invoke(app, ["simulate", "telemetry", "--nodes", "4", "--hours", "0.5", "--profile", "memory",
                              "--no-io", "--out", str(tmp_path / "n")])
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "n" / "ldms" / "lustre_client.csv").exists()
    # the ten sensors do not come from the 1 s IO file: same grid with or without it
    assert np.array_equal(load_sensor_grid(tmp_path / "n").values, load_sensor_grid(tmp_path / "m").values,
                          equal_nan=True)
    res = runner.invoke(app, ["simulate", "telemetry", "--profile", "mixed", "--anomaly-rate", "1",
                              "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "classic profile only" in res.output
