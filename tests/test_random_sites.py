"""Randomised sites (issue 56 item 4): the generator, its declarative physics, the sweep's statistics, the CLI."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hpcguard.cli import app
from hpcguard.models.metrics import wilson_interval
from hpcguard.simulators import site_sweep
from hpcguard.simulators.profiles import PROFILES, ROLE, Effect, Physics, Profile, SiteParams
from hpcguard.simulators.random_sites import LOOKALIKE_LIBRARY, PRECURSOR_LIBRARY, random_site
from hpcguard.simulators.site_sweep import summarise_sites
from hpcguard.simulators.telemetry import generate_telemetry

# a fast training setting for the tiny sites below (the measurement uses train failure's defaults)
FAST = {"features": "paper", "mc_splits": 1, "calibration_ok": 400, "simulated_prior": 0}
TINY = {"nodes": 6, "train_hours": 2.0, "test_hours": 1.5, "max_ok": 400}


# ----------------------------------------------------------------------------- the generator
def test_a_seed_draws_the_same_site_and_its_description_is_json():
    a, b = random_site(11), random_site(11)
    assert a[0] == b[0] and a[1] == b[1]
    d = json.loads(json.dumps(a[1]))
    assert d["seed"] == 11 and d["name"] == a[0].name == "random-11" and d["summary"] == a[0].summary
    assert {f["name"] for f in d["families"]} == {f for f, _ in a[0].overrides["site"].families}
    assert 0 < d["sudden_share"] < 0.5 and d["vendors"] and d["lookalikes"]


def test_seeds_draw_different_vendors_and_failure_physics():
    draws = [random_site(s)[1] for s in range(1, 21)]
    families = {tuple(f["name"] for f in d["families"]) for d in draws}
    vendors = {tuple(v["generation"] for v in d["vendors"]) for d in draws}
    looks = {tuple(k["name"] for k in d["lookalikes"]) for d in draws}
    assert len(families) >= 15 and len(vendors) >= 8 and len(looks) >= 15
    # a declarative family drawn twice gets another shape (its sizes and onsets are the site's)
    shapes = {}
    for d in draws:
        for f in d["families"]:
            if not f.get("builtin"):
                shapes.setdefault(f["name"], set()).add(json.dumps(f, sort_keys=True))
    assert any(len(v) > 1 for v in shapes.values())


def test_the_library_is_wide_and_every_entry_is_well_formed():
    families = [e for e in PRECURSOR_LIBRARY.values()]
    looks = [e for e in LOOKALIKE_LIBRARY.values()]
    assert len(families) >= 6 and len([e for e in families if not e.builtin]) >= 6
    assert len(looks) >= 3 and len([e for e in looks if not e.builtin]) >= 3
    assert all(e.resembles in PRECURSOR_LIBRARY for e in looks)
    # across seeds, every entry is drawn, and every drawn site validates
    seen = set()
    for s in range(200):
        profile, d = random_site(s)
        profile.overrides["site"].validate()
        seen |= {f["name"] for f in d["families"]} | {k["name"] for k in d["lookalikes"]}
    assert seen == set(PRECURSOR_LIBRARY) | set(LOOKALIKE_LIBRARY)


@pytest.mark.parametrize("seed", range(24))
def test_every_drawn_site_simulates_a_tiny_cluster(seed):
    profile, d = random_site(seed)
    tel = generate_telemetry(4, 1.0, seed, profile=profile, mtbf_hours=2.0)
    assert tel.profile == profile.name and set(tel.hardware) <= {v["generation"] for v in d["vendors"]}
    site = profile.overrides["site"]
    assert {f["family"] for f in tel.failures} <= {f for f, _ in site.families} | {"sudden"}
    assert {a["kind"] for a in tel.anomalies if not a["leads_to_failure"]} <= {k for k, _ in site.lookalikes}


def test_a_profile_object_is_the_named_profile_and_defaults_change_nothing():
    """generate_telemetry(profile=Profile(...)) is the table's profile of that name; the new SiteParams
    fields at their defaults draw the same numbers (existing profiles stay as they were)."""
    named = generate_telemetry(6, 1.0, 4, profile="intermittent", mtbf_hours=1.0)
    obj = generate_telemetry(6, 1.0, 4, profile=Profile("intermittent", "", PROFILES["intermittent"].overrides),
                             mtbf_hours=1.0)
    assert np.array_equal(np.nan_to_num(named.ipmi, nan=-1), np.nan_to_num(obj.ipmi, nan=-1))
    assert named.failures == obj.failures and named.anomalies == obj.anomalies
    site = PROFILES["intermittent"].overrides["site"]
    same = dataclasses.replace(site, physics=(), noise_scale=1.0, ldms_outage_rate=0.0)
    again = generate_telemetry(6, 1.0, 4, profile=Profile("intermittent", "", {
        **PROFILES["intermittent"].overrides, "site": same}), mtbf_hours=1.0)
    assert np.array_equal(np.nan_to_num(named.ipmi, nan=-1), np.nan_to_num(again.ipmi, nan=-1))


def test_a_declarative_family_moves_the_sensors_its_table_names():
    """The same site with the family's table and with a table that moves nothing: the difference is the effect."""
    def site_with(*effects):
        hot = Physics("hot_fan", effects, lead_minutes=(10.0, 12.0), strength=(1.0, 1.0), step=(0.5, 0.5),
                      power=(1.0, 1.0), intermittency=0.3)
        site = SiteParams(families=(("hot_fan", 1.0),), lookalikes=(), physics=(hot,), ldms_outage_rate=2.0)
        return generate_telemetry(16, 6.0, 2, profile=Profile("t", "", {
            "site": site, "anomaly_rate": 0.0, "mtbf_hours": 2.0, "precursor_fraction": 1.0}))

    tel = site_with(Effect("cpu1", 20.0), Effect("fans", -0.5, "flicker"), Effect("mem", 0.99))
    still = site_with(Effect("v12", 0.0))
    assert tel.failures == still.failures and tel.ldms_outages
    pre = [a for a in tel.anomalies if a["leads_to_failure"] and a["start"] > 1200 and a["kind"] == "hot_fan"]
    assert len(pre) >= 5
    for a in pre:
        n, k0, k1 = a["node"], int(a["start"] // 15), int(a["end"] // 15)
        cpu = tel.ipmi[n, :, ROLE["cpu1"]] - still.ipmi[n, :, ROLE["cpu1"]]
        fan = tel.ipmi[n, :, ROLE["fan1"]] / still.ipmi[n, :, ROLE["fan1"]]
        mem = 1 - tel.ldms15["meminfo"][n, :, 2] / tel.ldms15["meminfo"][n, :, 0]
        assert np.nanmax(np.abs(cpu[k0 - 20:k0 - 1])) < 1 and np.nanmean(cpu[k1 - 4:k1]) > 15        # climbs to +20 °C
        assert mem[k1 - 2] > 0.9                                                                # fills
        # single polls drop by half, between them the fans run as before: flickers, not a slow decay
        during = fan[k0:k1]
        assert 0 < np.mean(during < 0.7) < 0.7 and np.nanmax(during) > 0.95


def test_a_window_cuts_one_history_into_first_and_next_days():
    tel = generate_telemetry(6, 3.0, 8, profile=random_site(8)[0], mtbf_hours=1.0)
    first, nxt = tel.window(0, 7200), tel.window(7200, 10800)
    assert len(first.failures) + len(nxt.failures) == len(tel.failures) and nxt.failures
    assert nxt.start == tel.start + 7200 and all(0 <= f["time"] < 3600 for f in nxt.failures)
    assert np.array_equal(np.nan_to_num(nxt.ipmi, nan=-1), np.nan_to_num(tel.ipmi[:, 480:], nan=-1))
    assert set(first.jobs["state"][first.jobs["visible"]]) <= {"COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL",
                                                               "RUNNING", "PENDING"}
    assert (np.nan_to_num(first.jobs["end"][first.jobs["state"] == "RUNNING"]) >= 7200).all()
    with pytest.raises(ValueError):
        tel.window(0, 100)


# ----------------------------------------------------------------------------- the distribution over sites
def _site(k, n, episodes, node_days=50.0, error=None):
    if error:
        return {"seed": 0, "error": error}
    return {"online": {"precursor_failures": n, "precursor_warned_2min": k,
                       "precursor_warned_2min_share": k / n if n else float("nan"),
                       "false_alarm_episodes": episodes, "node_days": node_days,
                       "false_alarms_per_100_node_days": 100.0 * episodes / node_days}}


def test_summary_statistics_of_a_hand_made_table():
    rows = [_site(1, 10, 0), _site(5, 10, 1), _site(9, 10, 4), _site(7, 10, 2), _site(3, 10, 0),
            _site(0, 0, 3),                     # no precursor failure: counts for the false alarms only
            _site(0, 0, 0, error="no failures to train on")]
    s = summarise_sites(rows, budget=2.0)
    assert (s["sites"], s["evaluated"], s["failed"]) == (7, 6, 1)
    warned = np.array([0.1, 0.5, 0.9, 0.7, 0.3])
    fa = np.array([0.0, 2.0, 8.0, 4.0, 0.0, 6.0])
    assert s["warned"]["sites"] == 5 and s["false_alarms"]["sites"] == 6
    assert s["warned"]["median"]["value"] == pytest.approx(0.5)
    assert s["warned"]["p10"]["value"] == pytest.approx(np.quantile(warned, 0.1)) == pytest.approx(0.18)
    assert s["false_alarms"]["median"]["value"] == pytest.approx(3.0)
    assert s["false_alarms"]["p90"]["value"] == pytest.approx(np.quantile(fa, 0.9))
    for d in (s["warned"], s["false_alarms"]):
        for q in ("median", "p10", "p90"):
            lo, hi = d[q]["ci95"]
            assert lo <= d[q]["value"] <= hi
    assert s["warned"]["median"]["ci95"][0] >= 0.1 and s["warned"]["median"]["ci95"][1] <= 0.9
    # within budget (<= 2 per 100 node-days): 0, 2, 0 of the six
    assert s["within_budget"]["sites"] == 3 and s["within_budget"]["of"] == 6
    assert s["within_budget"]["share"] == 0.5
    assert s["within_budget"]["ci95"] == pytest.approx(list(wilson_interval(3, 6)))
    assert s["pooled"]["precursor_warned_2min"] == 25 and s["pooled"]["precursor_failures"] == 50
    assert s["pooled"]["false_alarms_per_100_node_days"] == pytest.approx(100 * 10 / 300)
    assert summarise_sites(rows, seed=0) == s                   # the bootstrap is seeded
    empty = summarise_sites([_site(0, 0, 0, error="x")])
    assert empty["evaluated"] == 0 and empty["warned"]["median"]["value"] != empty["warned"]["median"]["value"]


def _budget_row(name, k, n, episodes, node_days=50.0, threshold=0.9):
    return {"name": name, "threshold": threshold, "failures": n, "warned_2min": k, "warned_2min_share": k / n,
            "precursor_failures": n, "precursor_warned_2min": k, "precursor_warned_2min_share": k / n,
            "false_alarm_episodes": episodes, "node_days": node_days,
            "false_alarms_per_100_node_days": 100.0 * episodes / node_days}


def test_budget_rows_within_budget_near_the_hindsight_best_and_their_summary():
    """Per site: fixed, controller and hindsight-best scored after the first day, within the budget and
    the controller within 10 points of the hindsight-best; over sites: Wilson intervals of both shares."""
    def site(fixed, controller, hindsight):
        rows = [_budget_row("fixed", *fixed), _budget_row("controller", *controller)]
        if hindsight is not None:
            rows.append(_budget_row("hindsight-best", *hindsight))
        return {"budget": site_sweep.site_budget({"burn_in_hours": 24.0, "rows": rows}, 2.0)}

    rows = [site((9, 10, 5), (8, 10, 1), (9, 10, 1)),    # within, near
            site((2, 10, 0), (9, 10, 1), (9, 10, 0)),    # within (2.0 <= 2), near
            site((9, 10, 3), (7, 10, 0), (9, 10, 1)),    # within, 20 points under: not near
            site((5, 10, 2), (1, 10, 2), None),          # no fixed threshold within: silence is the best, near
            {"seed": 9, "error": "no failures to train on"}]
    b = [r["budget"] for r in rows[:4]]
    assert [x["fixed"]["within_budget"] for x in b] == [False, True, False, False]
    assert [x["controller"]["within_budget"] for x in b] == [True, True, True, False]
    assert [x["controller"]["near_hindsight"] for x in b] == [True, True, False, True]
    s = site_sweep.summarise_budget(rows, 2.0)
    assert (s["sites"], s["with_budget"]) == (5, 4)
    assert s["controller"]["within_budget"]["sites"] == 3 and s["fixed"]["within_budget"]["sites"] == 1
    assert s["controller"]["within_budget"]["ci95"] == pytest.approx(list(wilson_interval(3, 4)))
    assert s["hindsight"]["within_budget"]["sites"] == 4                 # silence keeps within
    assert s["hindsight"]["pooled"]["precursor_warned_2min"] == 27
    assert (s["near_hindsight"]["sites"], s["near_hindsight"]["of"]) == (3, 4)
    assert s["near_hindsight"]["ci95"] == pytest.approx(list(wilson_interval(3, 4)))
    md = "\n".join(site_sweep.budget_lines({"summary_budget": s, "rows": [{"seed": i, **r} for i, r in
                                                                          enumerate(rows)]}))
    assert "| controller | 2.00 (" in md and "3/4 = 75 %" in md and "none within" in md
    assert site_sweep.budget_lines({"rows": []}) == []


# ----------------------------------------------------------------------------- the sweep and the CLI
def test_a_controller_that_keeps_the_threshold_gets_the_fixed_thresholds_figures(tmp_path):
    """The hook for a budget controller: warnings it raises on the vote scan are counted as the fixed
    threshold's are, so a controller that keeps the model's threshold reproduces them exactly."""
    def fixed(votes, rec, ensemble, budget):
        with np.errstate(invalid="ignore"):
            return votes["vote"] >= ensemble.threshold

    r = site_sweep.run_site_sweep(1, 5, **TINY, out=str(tmp_path), training=FAST, simulation={"mtbf_hours": 0.7},
                                  controller=fixed)
    row = r["rows"][0]
    assert not row.get("error"), row
    assert json.dumps(row["controller"], sort_keys=True) == json.dumps(row["online"], sort_keys=True)
    assert json.dumps(r["summary_controller"], sort_keys=True) == json.dumps(r["summary"], sort_keys=True)
    assert row["online"]["failures"] > 0 and row["online"]["node_days"] == pytest.approx(6 * 1.5 / 24, rel=0.01)


def test_cli_runs_one_tiny_site_and_reuses_it(tmp_path, monkeypatch):
    run = site_sweep.evaluate_site

    def fast(*args, **kw):   # the CLI's sweep, with a fast training setting and a short MTBF
        return run(*args, **{**kw, "training": FAST, "simulation": {"mtbf_hours": 0.7}})

    monkeypatch.setattr(site_sweep, "evaluate_site", fast)
    args = ["evaluate", "sites", "--sites", "1", "--seed", "5", "--nodes", "6", "--train-hours", "2",
            "--test-hours", "1.5", "--max-ok", "400", "--out", str(tmp_path)]
    r = CliRunner().invoke(app, args + ["--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["seeds"] == [5] and out["summary"]["evaluated"] == 1 and out["false_alarms_budget"] == 2.0
    row = out["rows"][0]
    assert row["description"] == json.loads(json.dumps(random_site(5)[1]))
    assert row["online"]["within_budget"] == (row["online"]["false_alarms_per_100_node_days"] <= 2.0)
    b = row["budget"]                                                  # the budget controller, on by default
    assert b["burn_in_hours"] == pytest.approx(0.75, abs=0.01) and out["summary_budget"]["with_budget"] == 1
    for name in ("fixed", "controller"):
        assert b[name]["within_budget"] == (b[name]["false_alarms_per_100_node_days"] <= 2.0)
        assert b[name]["node_days"] == pytest.approx(6 * 0.75 / 24, rel=0.02)
    assert b["fixed"]["threshold"] == row["threshold"]
    assert (tmp_path / "report.md").is_file() and (tmp_path / "site-5" / "model" / "manifest.json").is_file()
    assert not (tmp_path / "site-5" / "train").exists()              # recordings are not kept
    r = CliRunner().invoke(app, args)                                 # the markdown; the site is reused
    assert r.exit_code == 0, r.output
    assert "| site | vendors |" in r.stdout and "| 5 | " in r.stdout and "Sites within the budget" in r.stdout
    assert "| controller | " in r.stdout and "hindsight-best" in r.stdout
    # --prime: the controller starts from the training history's labelled node-steps (train threshold's prior)
    r = CliRunner().invoke(app, args + ["--prime", "--json"])
    assert r.exit_code == 0, r.output
    primed = json.loads(r.stdout)
    assert "primed" in primed["thresholding"] and 0 < primed["rows"][0]["primed_node_days"] <= 6 * 2 / 24
    assert primed["rows"][0]["budget"]["primed_node_days"] == primed["rows"][0]["primed_node_days"]  # used
    assert primed["rows"][0]["budget"]["controller"]["node_days"] == b["controller"]["node_days"]
    assert b["primed_node_days"] == 0.0                                # without --prime: a warm-up
    r = CliRunner().invoke(app, args + ["--false-alarms", "0", "--json"])   # 0: no controller
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert "summary_budget" not in out and "budget" not in out["rows"][0]
    r = CliRunner().invoke(app, ["evaluate", "sites", "--train-hours", "0", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "positive" in r.output
