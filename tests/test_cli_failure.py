"""CLI: hpcguard uc, train failure, evaluate failure."""
import csv
import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from hpcguard.cli import app
from hpcguard.cli import failure as cli_failure
from hpcguard.connectors import model_store
from hpcguard.connectors.coverage import coverage_of_grid
from hpcguard.connectors.model_store import load_model
from hpcguard.models.failure.dataset import healthy_mask
from hpcguard.models.failure import site_training
from hpcguard.models.failure.evaluation import online_scan, online_summary
from hpcguard.models.metrics import uc_probability, wilson_interval
from hpcguard.simulators import failure_training
from hpcguard.settings import Settings
from hpcguard.streams.decisions import budget_for
from hpcguard.streams.predictors import EnsemblePredictor

from _failure_data import T0, synthetic_grid

runner = CliRunner()


def test_uc_json_and_text():
    r = runner.invoke(app, ["uc", "--fpr", "0.00156", "--nodes", "1024", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["uc"] == pytest.approx(uc_probability(0.00156, 1024)) and round(out["uc"], 4) == 0.7978
    r = runner.invoke(app, ["uc", "--fpr", "0.01", "--nodes", "256", "--p-ok", "0.9999900347"])
    assert r.exit_code == 0 and "UC(256)" in r.stdout


def test_uc_rejects_bad_fpr():
    r = runner.invoke(app, ["uc", "--fpr", "1.5", "--nodes", "10"])
    assert r.exit_code == 2 and "fpr" in r.output


@pytest.fixture()
def recorded(tmp_path, monkeypatch):
    """Synthetic 'recorded' directories; the loader is replaced by the in-memory grids."""
    grids = {}

    def add(name, seed, edit=None, labelled=False):
        d = tmp_path / name
        d.mkdir()
        v, fn, ft = synthetic_grid(seed=seed)
        if edit:
            edit(v)
        family = ["fan" if i % 3 else "psu" for i in range(len(ft))]
        (d / "failures.csv").write_text("time,node,job_id,cause\n" + "".join(
            f"{t},n{n:03d},,{f}\n" for n, t, f in zip(fn, ft, family)))
        nodes = [f"n{i:03d}" for i in range(v.shape[0])]
        # the test history: failures of two families, and two benign episodes (one spans all of node 0)
        look, kinds = ((np.array([0, 1]), np.array([T0, T0 + 3600.0]), np.array([T0 + 1e6, T0 + 7200.0])),
                       ["fan_dip", "psu_warm"]) if labelled else (None, None)
        grids[str(d)] = site_training.Recorded(v, T0, fn, ft, nodes, np.ones(len(ft), bool), look,
                                             coverage_of_grid(nodes, v), family if labelled else None, kinds)

    add("train", 3)
    add("test", 11, labelled=True)
    add("no_psu", 3, lambda v: v[..., 3].fill(np.nan))
    add("patchy_volt", 3, lambda v: v[:8, :, 2].fill(np.nan))

    def fake_load(data_dir, grid_s=15.0, mapping=None, settings=None):
        key = str(data_dir)
        if key not in grids:
            cli_failure.fail(f"data directory not found: {data_dir}")
        return grids[key]

    monkeypatch.setattr(failure_training, "load_recorded", fake_load)
    return tmp_path


def test_train_then_evaluate_writes_model_and_report(recorded, monkeypatch):
    model = recorded / "model"
    train = ["train", "failure", "--features", "paper", "--data", str(recorded / "train"),
             "--seed", "0", "--mc-splits", "2", "--calibration-ok", "1500", "--json"]
    r = runner.invoke(app, train + ["--out", str(model)])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["failures"] > 0 and 0 <= summary["lstm_threshold"] <= 1
    assert summary["validation_failures"] >= 2 and len(summary["tpr_ci95"]) == 2
    assert summary["coverage"]["cpu_temp"] > 0.9 and summary["coverage_warnings"] == []
    # the fixture's training history labels no benign look-alikes: the summary says what that costs
    assert summary["hard_negatives"] == 0 and "--simulated-prior" in summary["notes"][0]
    manifest = json.loads((model / "manifest.json").read_text())
    assert manifest["leads_minutes"] == [2, 3, 4, 5, 6, 7] and manifest["window_steps"] == 16
    # the lead a warning reports, measured on the voter period's failures, and what it rests on (issue 55)
    lead = summary["lead_calibration"]
    assert lead["lead"] == "calibrated" and 6 <= lead["failures"] <= lead["period_failures"]
    assert manifest["lead_calibration"] == {k: v for k, v in lead.items() if k in manifest["lead_calibration"]}
    assert 0 < lead["overall"] <= lead["median"] <= 15
    # the 4-minute window, and 5 minutes more: the 7-minute network reads the window 5 minutes before now
    assert manifest["features"] == "paper" and manifest["lead_shift"] and manifest["history_steps"] == 16 + 20
    meta = manifest["metadata"]
    assert len(meta["training_data_sha256"]) == 64 and len(manifest["sensors"]) == 10
    assert meta["model_code"] == model_store.code_digest()
    assert len(meta["sensor_map_sha256"]) == 64 and set(meta["coverage"]) == set(manifest["sensors"])
    assert (model / "weights.pt").is_file() and (model / "metrics.json").is_file()
    # the threshold's fpr comes with the upper bound its healthy events allow
    assert summary["fpr"] <= summary["fpr_upper"] <= 1 and "fpr_confidence" not in meta
    # --features paper keeps seed 000's setting where an option is not given
    assert summary["setting"] == {"target_fpr": None, "fpr_confidence": None, "calibration_ok": 1500,
                                  "persistence": 1, "mc_splits": 2, "simulated_prior": 0, "simulated_look_alikes": 0,
                                  "calibration_span": "validation",
                                  "fpr_run_minutes": 0, "fpr_history_spread": False, "split_days": 0.0,
                                  "defaults": "paper"}
    assert meta["target_fpr"] is None and meta["persistence"] == 1 and meta["simulated_prior"] is None
    assert meta["simulated_look_alikes"] is None and meta["simulated_look_alike_files"] == []
    # the worker's budget starts from the site's own labelled history, not from a warm-up (issue 56: label,
    # train failure, worker --shadow): every evaluated node-step of the training history, its failures learnt
    prior, history = meta["budget_prior"], failure_training.load_recorded(str(recorded / "train"))
    node_days = history.values.shape[0] * history.values.shape[1] * 15.0 / 86400.0
    assert 0.5 * node_days < prior["node_days"] <= node_days + 1e-9 and prior["nodes"] == {}
    assert 0 < len(prior["warned"]) <= len(history.failure_times)   # each failure's best vote in its lead window
    assert summary["budget_prior_node_days"] == prior["node_days"]
    ensemble, loaded = model_store.load_model(str(model))
    controller = budget_for(Settings(), EnsemblePredictor(ensemble, ensemble.version, loaded))().controller
    assert controller.node_days == prior["node_days"] and controller.budget == Settings().worker.false_alarms
    # the same data and options through other model code (a statistic added to a feature set): another version
    monkeypatch.setattr(model_store, "code_digest", lambda: "0" * 12)
    r = runner.invoke(app, train + ["--out", str(recorded / "other-code")])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["version"] != summary["version"]

    report = recorded / "report"
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(model), "--data", str(recorded / "test"),
                            "--report", str(report), "--max-ok", "3000", "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    rows = result["rows"]
    names = [row["name"] for row in rows]
    assert names[:6] == ["unanimous@1", "unanimous@2", "unanimous@4", "unanimous@6", "lstm-vote",
                         "single-network@2min"]
    assert "random-forest@2min" in names and any(n.startswith("baseline") for n in names)
    for row in rows:
        assert {"name", "tpr", "tpr_precursor", "ppv", "fpr", "uc_1024"} <= set(row)
        assert row["tpr_precursor"] == row["tpr"]            # every failure of the fixture has a precursor
        if row["fpr"] is not None:
            assert row["uc_1024"] == pytest.approx(uc_probability(row["fpr"], 1024))
    fprs = [row["fpr"] for row in rows[:4]]
    assert fprs == sorted(fprs, reverse=True)               # unanimous voting: fpr falls with networks
    assert set(result["coverage"]) == set(manifest["sensors"])
    # per failure family: the events' failures and each predictor's hits add up to its row
    by_row = {row["name"]: row for row in rows}
    families = result["by_family"]
    assert list(families) == ["fan", "psu"]                 # largest family first
    assert sum(f["failures"] for f in families.values()) == result["failures"]
    for name in ("lstm-vote", "single-network@2min"):
        assert sum(f[name] for f in families.values()) == by_row[name]["tp"]
        assert all(0 <= f[name] <= f["failures"] for f in families.values())
        # every false positive is named by the look-alike episode it lies in, or 'none'
        kinds = result["false_positives_by_look_alike"][name]
        assert set(kinds) <= {"fan_dip", "psu_warm", "none"} and sum(kinds.values()) == by_row[name]["fp"]
        # false positives in runs: a run wherever there is a false positive, never more runs than false positives
        runs = result["false_positive_runs"][name]
        assert (runs == 0) == (by_row[name]["fp"] == 0) and runs <= by_row[name]["fp"]
    assert by_row["single-network@2min"]["fp"] > 0       # the fixture gives the runs something to count
    # the vote and the 2-minute network at the target's fpr, threshold set on these healthy events
    at = result["at_fpr"]
    assert set(at) == {"lstm-vote", "single-network@2min"}
    for name, a in at.items():
        assert a["all"]["fpr_bound"] == 2e-4 and a["all"]["ok"] == by_row[name]["ok"]
        assert a["all"]["false_positives"] <= int(2e-4 * a["all"]["ok"])
        assert a["precursor"]["failures"] == result["precursor_failures"] and 0 <= a["all"]["tpr"] <= 1
    full = json.loads((report / "report.json").read_text())
    # the targets are checked against the vote's row and the online scan, the met flags follow the values
    targets = {t["target"]: t for t in full["targets"]}
    vote = by_row["lstm-vote"]
    assert targets["LSTM vote tpr"]["value"] == vote["tpr"]
    assert targets["LSTM vote tpr"]["met"] == (vote["tpr"] >= 0.5 and vote["fpr"] <= 2e-4)
    assert targets["LSTM vote tpr (precursor failures)"]["value"] == vote["tpr_precursor"]
    alarms = targets["online: false-alarm episodes per 100 node-days"]
    assert alarms["value"] == full["online"]["false_alarms_per_100_node_days"]
    assert alarms["met"] == (alarms["value"] <= 2.0)
    assert targets["online: precursor failures warned >= 2 min ahead"]["value"] == \
        full["online"]["precursor_warned_2min_share"]
    # each with the interval its counts allow (the report's table shows it)
    low, high = targets["LSTM vote tpr"]["ci95"]
    assert low <= vote["tpr"] <= high and 0 < high - low < 1
    assert list(targets["LSTM vote tpr"]["ci95"]) == list(wilson_interval(vote["tp"], vote["failures"]))
    assert alarms["ci95"] == full["online"]["false_alarms_per_100_node_days_ci95"]
    assert full["precursor_known"] is True and "| LSTM vote tpr |" in (report / "report.md").read_text()
    assert "| target | reached | 95 % interval |" in (report / "report.md").read_text()
    assert full["online"]["failures"] > 0 and full["online"]["warned_2min"] >= 1
    online_families = full["online"]["by_family"]
    assert sum(f["caught"] for f in online_families.values()) == full["online"]["warned_2min"]
    assert sum(f["failures"] for f in online_families.values()) == full["online"]["failures"]
    assert "| psu |" in (report / "report.md").read_text()
    assert full["online"]["false_alarms_per_100_node_days"] >= 0
    assert (report / "roc_networks.png").stat().st_size > 1000 and (report / "uc_nodes.png").is_file()
    # the online operating curve: the vote threshold swept, the model's own among its points
    curve = full["online_curve"]
    thresholds = [c["threshold"] for c in curve]
    assert thresholds == sorted(thresholds) and len(curve) >= 3
    own = next(c for c in curve if c["threshold"] == manifest["lstm_threshold"])
    for key in ("precursor_warned_2min_share", "false_alarms_per_100_node_days", "fpr_per_step"):
        assert own[key] == full["online"][key]
    # the online row is the worker's decision: the worker's predictor call on every history warns alike
    ens, saved = load_model(model)
    test = failure_training.load_recorded(str(recorded / "test"))
    predictor = EnsemblePredictor(ens, ens.version, saved)
    worker = online_summary(online_scan(predictor.predict, test.values, test.t0, ens.grid_s, predictor.history_steps,
                                        nodes=test.nodes), test.failure_nodes, test.failure_times,
                            healthy_mask(*test.values.shape[:2], test.t0, ens.grid_s, test.failure_nodes,
                                         test.failure_times), test.t0, ens.grid_s, precursor=test.precursor)
    for key in ("warned_2min", "precursor_warned_2min", "false_alarm_episodes", "false_positive_evaluations",
                "healthy_evaluations", "median_lead_minutes"):
        assert worker[key] == full["online"][key], key
    for lower, higher in zip(curve, curve[1:]):            # a higher threshold never warns more
        assert higher["warned_2min"] <= lower["warned_2min"] and higher["fpr_per_step"] <= lower["fpr_per_step"]
    at = full["online_at_false_alarm_target"]
    assert at is None or at["false_alarms_per_100_node_days"] <= 2.0
    assert "Online operating curve" in (report / "report.md").read_text()
    assert (report / "online_curve.png").stat().st_size > 1000

    # several test histories: each evaluated as alone, then pooled by adding counts
    pooled_report = recorded / "pooled"
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(model), "--data", str(recorded / "test"),
                            "--data", str(recorded / "train"), "--report", str(pooled_report), "--max-ok", "3000",
                            "--json"])
    assert r.exit_code == 0, r.output
    both = json.loads(r.stdout)
    first, second = both["histories"]
    assert first["rows"] == rows and first["online"] == full["online"]   # the first is the run above
    assert second["data"] == str(recorded / "train")
    pooled = {row["name"]: row for row in both["pooled"]["rows"]}
    assert list(pooled) == names
    for name, row in pooled.items():
        parts = [next(x for x in h["rows"] if x["name"] == name) for h in (first, second)]
        for key in ("tp", "fp", "failures", "ok", "tp_precursor", "precursor_failures"):
            assert row[key] == sum(p[key] for p in parts), (name, key)
        assert row["tpr"] == row["tp"] / row["failures"] and row["fpr"] == row["fp"] / row["ok"]
        assert row["tpr_precursor"] == row["tp_precursor"] / row["precursor_failures"]
    online = both["pooled"]["online"]
    assert online["false_alarm_episodes"] == sum(h["online"]["false_alarm_episodes"] for h in (first, second))
    assert online["node_days"] == pytest.approx(sum(h["online"]["node_days"] for h in (first, second)))
    assert online["precursor_warned_2min_share"] == (
        sum(h["online"]["precursor_warned_2min"] for h in (first, second))
        / sum(h["online"]["precursor_failures"] for h in (first, second)))
    pooled_targets = {t["target"]: t for t in both["targets"]}
    assert pooled_targets["LSTM vote tpr"]["value"] == pooled["lstm-vote"]["tpr"]
    assert pooled_targets["online: false-alarm episodes per 100 node-days"]["value"] == \
        online["false_alarms_per_100_node_days"]
    # families, hindsight figures and the online curve are the pool's too, not the first history's
    p = both["pooled"]
    assert sum(c["failures"] for c in p["by_family"].values()) == p["failures"]
    assert p["failures"] == first["failures"] + second["failures"]
    for family, counts in p["by_family"].items():
        for key in ("failures", "lstm-vote", "single-network@2min"):
            assert counts[key] == sum(h["by_family"].get(family, {}).get(key, 0) for h in (first, second))
    assert sum(f["failures"] for f in p["online"]["by_family"].values()) == online["failures"]
    assert p["false_positive_runs"] == {name: first["false_positive_runs"][name] + second["false_positive_runs"][name]
                                        for name in ("lstm-vote", "single-network@2min")}
    vote_at = p["at_fpr"]["lstm-vote"]
    assert vote_at["all"]["ok"] == p["ok_events"] == first["ok_events"] + second["ok_events"]
    assert vote_at["precursor"]["failures"] == p["precursor_failures"]
    assert vote_at["all"]["false_positives"] <= 2e-4 * p["ok_events"]
    own = next(c for c in p["online_curve"] if c["threshold"] == manifest["lstm_threshold"])
    assert own["node_days"] == pytest.approx(online["node_days"])
    assert own["false_alarm_episodes"] == online["false_alarm_episodes"]
    assert json.loads((pooled_report / "report.json").read_text())["pooled"] == both["pooled"]
    md = (pooled_report / "report.md").read_text()
    assert "2 test histories, pooled" in md and "By failure family" in md and "Online operating curve" in md
    for plot in ("roc_networks.png", "online_curve.png", "1-test/roc_networks.png", "2-train/online_curve.png"):
        assert (pooled_report / plot).stat().st_size > 1000, plot


def test_threshold_set_for_a_false_alarm_budget_is_what_the_worker_then_raises(recorded):
    model, calibrated = recorded / "model", recorded / "calibrated"
    r = runner.invoke(app, ["train", "failure", "--features", "paper",
                            "--data", str(recorded / "train"), "--out", str(model),
                            "--mc-splits", "2", "--calibration-ok", "1500", "--persistence", "2", "--json"])
    assert r.exit_code == 0, r.output
    before = json.loads(r.stdout)
    r = runner.invoke(app, ["train", "threshold", "--model", str(model), "--data", str(recorded / "test"),
                            "--out", str(calibrated), "--false-alarms", "0", "--json"])
    assert r.exit_code == 0, r.output
    cal = json.loads(r.stdout)
    chosen = cal["chosen"]
    assert chosen["false_alarm_episodes"] == 0 and cal["threshold"] == chosen["threshold"]
    assert cal["threshold_before"] == before["lstm_threshold"] and cal["before"]["threshold"] == before["lstm_threshold"]
    assert cal["version"].startswith(before["version"] + "-fa") and cal["version"] != before["version"]
    # one episode on these few node-days already breaks any budget: said, not hidden
    assert cal["node_days"] < 100 and "more history" in cal["notes"][0]
    manifest = json.loads((calibrated / "manifest.json").read_text())
    assert manifest["lstm_threshold"] == chosen["threshold"] and manifest["persistence"] == 2
    assert manifest["metadata"]["calibration"]["chosen"] == chosen
    assert manifest["metadata"]["sensor_map_sha256"] == before["sensor_map_sha256"]
    assert manifest["metrics"]["lstm"]["fpr_source"] == "online calibration"
    # the worker's budget controller starts from the calibration history's labelled node-steps, at the
    # site's own budget; evaluate failure runs the same primed controller
    prior = manifest["metadata"]["budget_prior"]
    assert 0.5 * cal["node_days"] < prior["node_days"] <= cal["node_days"] and prior["nodes"] == {}  # evaluated steps
    ensemble, loaded = load_model(str(calibrated))
    predictor = EnsemblePredictor(ensemble, ensemble.version, loaded)
    settings = Settings().with_overrides(worker=dict(false_alarms=3.0))
    controller = budget_for(settings, predictor)().controller
    assert controller.budget == 3.0 and controller.node_days == prior["node_days"] and controller.steps > 0
    assert budget_for(settings, EnsemblePredictor(*load_model(str(model))[:1], "v", {})
                      )().controller.node_days == 0.0  # no prior: a warm-up on the model's threshold
    # the worker's predictor with the new model raises exactly what the calibration counted
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(calibrated), "--data", str(recorded / "test"),
                            "--max-ok", "3000", "--json"])
    assert r.exit_code == 0, r.output
    evaluated = json.loads(r.stdout)
    online = evaluated["online"]
    assert evaluated["budget"]["primed_node_days"] == prior["node_days"]
    assert online["false_alarm_episodes"] == 0 and online["warned_2min"] == chosen["warned_2min"]
    assert online["precursor_warned_2min"] == chosen["precursor_warned_2min"]
    # a budget the curve's lowest threshold meets: the threshold may only come down
    r = runner.invoke(app, ["train", "threshold", "--model", str(model), "--data", str(recorded / "test"),
                            "--out", str(recorded / "loose"), "--false-alarms", "1e6", "--json"])
    assert r.exit_code == 0, r.output
    loose = json.loads(r.stdout)
    assert loose["threshold"] == min(c["threshold"] for c in loose["curve"]) <= before["lstm_threshold"]
    assert loose["chosen"]["warned_2min"] >= chosen["warned_2min"]
    assert not loose["notes"]
    # intervals from the counts: zero episodes still allow a rate above zero; the share's interval holds it
    low, high = chosen["false_alarms_per_100_node_days_ci95"]
    assert low == 0.0 < 100.0 / cal["node_days"] < high
    share_low, share_high = loose["chosen"]["precursor_warned_2min_ci95"]
    assert share_low <= loose["chosen"]["precursor_warned_2min_share"] <= share_high
    assert online["false_alarms_per_100_node_days_ci95"] == chosen["false_alarms_per_100_node_days_ci95"]
    # a budget of a few episodes on this data: set, and said how loosely
    budget = 3 * 100.0 / cal["node_days"]
    r = runner.invoke(app, ["train", "threshold", "--model", str(model), "--data", str(recorded / "test"),
                            "--out", str(recorded / "thin"), "--false-alarms", repr(budget)])
    assert r.exit_code == 0, r.output
    assert "allows 3.0 false-alarm episodes" in r.output and "95 %" in r.output
    r = runner.invoke(app, ["train", "threshold", "--model", str(model), "--data", str(recorded / "test"),
                            "--out", str(model)])
    assert r.exit_code != 0 and "new directory" in r.output


def test_site_features_train_and_evaluate_through_the_streaming_predictor(recorded):
    model = recorded / "site"
    r = runner.invoke(app, ["train", "failure", "--data", str(recorded / "train"), "--out", str(model),
                            "--features", "site", "--persistence", "2", "--target-fpr", "none",
                            "--simulated-prior", "0", "--mc-splits", "1", "--calibration-ok", "1500", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["history_steps"] == 176 + 1 + 20        # history, persistence, lead shift
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(model), "--data", str(recorded / "test"),
                            "--max-ok", "2000", "--scan-stride", "2", "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["features"] == "site" and result["online"]["stride_steps"] == 2
    assert result["online"]["warned"] >= 1


def _train_and_evaluate_learned(recorded, features: str):
    """Train a model of a learned feature set on the train history, evaluate it on the test one."""
    model = recorded / features
    r = runner.invoke(app, ["train", "failure", "--data", str(recorded / "train"), "--out", str(model),
                            "--features", features, "--target-fpr", "none", "--simulated-prior", "0",
                            "--simulated-look-alikes", "0",
                            "--persistence", "1", "--mc-splits", "1", "--calibration-ok", "1500", "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["features"] == features and summary["history_steps"] == 96 + 20
    assert summary["version"].startswith(f"failure-ensemble-{features}-")
    # fitted on the networks' (earlier) period only: the voter's failures are new to it
    assert 0.5 * summary["failures"] < summary["encoder"]["failures"] < summary["failures"]
    manifest = json.loads((model / "manifest.json").read_text())
    assert "encoder" in manifest["architecture"]
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(model), "--data", str(recorded / "test"),
                            "--max-ok", "2000", "--scan-stride", "4", "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["features"] == features and result["online"]["healthy_evaluations"] > 0
    assert next(row for row in result["rows"] if row["name"] == "lstm-vote")["tpr"] > 0
    return summary, manifest, result


def test_conv_features_train_and_evaluate_and_say_how_few_failures_the_encoder_saw(recorded, monkeypatch):
    monkeypatch.setenv("HPCGUARD_WORKER__FALSE_ALARMS", "0")  # no budget: no prior scan (covered in train_then_evaluate)
    summary, manifest, _ = _train_and_evaluate_learned(recorded, "conv")
    assert summary["budget_prior_node_days"] is None and "budget_prior" not in manifest["metadata"]
    assert summary["encoder"]["epochs"] == 14
    assert any("conv encoder was fitted on" in n for n in summary["notes"])
    assert manifest["architecture"]["network"] == "144-52tanh-2softmax"


def test_trees_features_train_and_evaluate_through_the_streaming_predictor(recorded):
    summary, manifest, result = _train_and_evaluate_learned(recorded, "trees")
    assert summary["encoder"]["trees"] == 200 and summary["encoder"]["max_abs_diff_sklearn"] < 1e-9
    assert not any("conv encoder" in n for n in summary["notes"])
    assert manifest["architecture"]["network"] == "1-52tanh-2softmax"
    assert manifest["architecture"]["encoder"]["kind"] == "boosted-trees"
    assert result["online"]["warned"] >= 1


def test_a_wholly_missing_sensor_is_refused_not_imputed(recorded):
    r = runner.invoke(app, ["train", "failure", "--features", "paper",
                            "--data", str(recorded / "no_psu"), "--out", str(recorded / "m"),
                            "--mc-splits", "1", "--calibration-ok", "500"])
    assert r.exit_code == 2 and "psu_temp" in r.output and "--allow-missing" in r.output
    assert not (recorded / "m").exists()
    r = runner.invoke(app, ["train", "failure", "--features", "paper",
                            "--data", str(recorded / "no_psu"), "--out", str(recorded / "m"),
                            "--mc-splits", "1", "--calibration-ok", "500", "--allow-missing", "psu_temp", "--json"])
    assert r.exit_code == 0, r.output
    meta = json.loads((recorded / "m" / "manifest.json").read_text())["metadata"]
    assert meta["missing_sensors"] == ["psu_temp"]


def test_low_coverage_warns_naming_sensor_and_nodes(recorded):
    r = runner.invoke(app, ["train", "failure", "--features", "paper", "--data", str(recorded / "patchy_volt"), "--out",
                            str(recorded / "m2"), "--mc-splits", "1", "--calibration-ok", "500", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert 0.25 < out["coverage"]["cpu_voltage"] <= 4 / 12       # 4 of 12 nodes report it (minus downtime)
    assert len(out["coverage_warnings"]) == 1 and out["coverage_warnings"][0].startswith("cpu_voltage")
    assert "n000" in out["coverage_warnings"][0]
    assert "warning: training data: coverage cpu_voltage" in r.stderr


def test_evaluate_missing_model_is_a_clear_error(recorded):
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(recorded / "nope"), "--data",
                            str(recorded / "test"), "--report", str(recorded / "r")])
    assert r.exit_code == 2 and "manifest.json" in r.output


def test_end_to_end_on_simulated_recordings(tmp_path):
    """simulate telemetry (files) → train failure → evaluate failure on another seed."""
    from hpcguard.simulators.telemetry import simulate_telemetry

    for seed in (1, 2):
        simulate_telemetry(str(tmp_path / f"sim{seed}"), nodes=8, hours=3, seed=seed, mtbf_hours=0.5)
    r = runner.invoke(app, ["train", "failure", "--features", "paper",
                            "--data", str(tmp_path / "sim1"), "--out", str(tmp_path / "m"),
                            "--mc-splits", "1", "--calibration-ok", "400", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["failures"] >= 4
    # the test history labelled as a site would write it: ISO times and node names only
    import csv
    from datetime import datetime, timezone

    labels = tmp_path / "sim2" / "failures.csv"
    rows = list(csv.DictReader(labels.open()))
    labels.write_text("time,node\n" + "".join(
        f"{datetime.fromtimestamp(float(r['time']), timezone.utc).isoformat()},{r['node']}\n" for r in rows))
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(tmp_path / "m"), "--data", str(tmp_path / "sim2"),
                            "--report", str(tmp_path / "rep"), "--max-ok", "500", "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    rows = result["rows"]
    assert len(rows) == 8 and rows[4]["name"] == "lstm-vote"
    # no family column: nothing is known of precursors, so every failure counts as a precursor failure
    assert result["precursor_known"] is False and result["precursor_failures"] == result["failures"]
    assert all(row["tpr_precursor"] == row["tpr"] for row in rows)
    assert "every failure is counted as one" in (tmp_path / "rep" / "report.md").read_text()
    assert json.loads((tmp_path / "rep" / "report.json").read_text())["online"]["healthy_evaluations"] > 0
    # the model knows its training families, but nothing says which of these failures belong to one
    assert result["families_seen"]["share"] is None
    assert "Families the model was trained on" not in (tmp_path / "rep" / "report.md").read_text()


def test_evaluate_says_which_precursor_families_the_model_never_saw(tmp_path):
    """The manifest lists the training failures' families; evaluate failure counts the test's precursor
    failures of other families, per history and pooled."""
    from hpcguard.simulators.telemetry import simulate_telemetry

    simulate_telemetry(str(tmp_path / "train"), nodes=8, hours=3, seed=1, mtbf_hours=0.5, io=False)
    for seed in (2, 3):
        simulate_telemetry(str(tmp_path / f"t{seed}"), nodes=8, hours=3, seed=seed, mtbf_hours=0.5, io=False,
                           profile="mixed")
    r = runner.invoke(app, ["train", "failure", "--features", "paper", "--data", str(tmp_path / "train"),
                            "--out", str(tmp_path / "m"), "--mc-splits", "1", "--calibration-ok", "400", "--json"])
    assert r.exit_code == 0, r.output

    def families(d):
        return [row["family"] for row in csv.DictReader((d / "failures.csv").read_text().splitlines())
                if row["family"] != "sudden"]

    trained = sorted(set(families(tmp_path / "train")))
    meta = json.loads((tmp_path / "m" / "manifest.json").read_text())["metadata"]
    assert meta["families"] == trained and set(trained) <= {"fan", "voltage", "psu", "stall"}
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(tmp_path / "m"), "--data", str(tmp_path / "t2"),
                            "--data", str(tmp_path / "t3"), "--max-ok", "500", "--no-online", "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    for fam, events in [(h["families_seen"], h["by_family"]) for h in result["histories"]] + \
            [(result["pooled"]["families_seen"], result["pooled"]["by_family"])]:
        test = {f: c["failures"] for f, c in events.items() if f != "sudden"}
        assert fam["trained"] == trained
        assert fam["unseen"] == {f: n for f, n in test.items() if f not in trained}
        assert fam["seen"] == sum(n for f, n in test.items() if f in trained)
    pooled = result["pooled"]["families_seen"]
    assert pooled["unseen"] and pooled["seen"] == sum(h["families_seen"]["seen"] for h in result["histories"])
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(tmp_path / "m"), "--data", str(tmp_path / "t2"),
                            "--max-ok", "500", "--no-online"])
    assert r.exit_code == 0, r.output
    fam = result["histories"][0]["families_seen"]
    assert (f"hold {fam['seen']} of the {fam['seen'] + sum(fam['unseen'].values())} precursor failures"
            in r.stdout.replace("\n", " "))


def test_cross_profile_matrix_on_tiny_histories(tmp_path):
    """Two profiles, 8 nodes × 6 h: every (train, test) pair gets rows, an online scan and plots; cached reruns."""
    out = tmp_path / "xp"
    args = ["evaluate", "cross-profile", "--profiles", "classic,mixed", "--nodes", "8", "--hours", "6",
            "--mtbf-hours", "1", "--seed", "1", "--out", str(out), "--mc-splits", "1", "--calibration-ok", "1500",
            "--max-ok", "1500", "--features", "site", "--target-fpr", "1e-4", "--fpr-confidence", "0", "--json"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    pairs = {(p["train_profile"], p["test_profile"]) for p in result["pairs"]}
    assert pairs == {("classic", "classic"), ("classic", "mixed"), ("mixed", "classic"), ("mixed", "mixed")}
    # the options given, and train failure's defaults for the rest (without its simulated prior)
    assert result["setting"] == {"target_fpr": 1e-4, "fpr_confidence": None, "calibration_ok": 1500,
                                 "persistence": site_training.SITE_SETTING["persistence"], "mc_splits": 1,
                                 "simulated_prior": 0, "simulated_look_alikes": 0, "calibration_span": "validation",
                                 "fpr_run_minutes": 0, "fpr_history_spread": True, "split_days": 0.0}
    for p in result["pairs"]:
        names = [row["name"] for row in p["rows"]]
        assert "lstm-vote" in names and "unanimous@6" in names and any(n.startswith("baseline") for n in names)
        assert p["precursor_failures"] <= p["failures"] and p["online"]["node_days"] == pytest.approx(8 * 6 / 24,
                                                                                                     rel=0.01)
    assert (out / "roc_lstm.png").stat().st_size > 1000 and (out / "uc_lstm.png").is_file()
    md = (out / "report.md").read_text()
    assert "| classic → mixed | lstm-vote |" in md
    # the default scan (every 4th step) says that its false alarms are lower bounds
    assert result["scan_stride_steps"] == 4 and "every 4 step(s)" in md and "lower bounds" in md
    # each pair against the cross-profile target, counted from its own vote row
    met = sum(next(r for r in p["rows"] if r["name"] == "lstm-vote")["fpr"] <= 2e-4 and
              next(r for r in p["rows"] if r["name"] == "lstm-vote")["tpr_precursor"] >= 0.5 for p in result["pairs"])
    assert f"{met} of 4 pairs meet it." in md
    assert all(0 <= p["at_fpr"]["lstm-vote"]["precursor"]["tpr"] <= 1 for p in result["pairs"])
    # families seen in training: read from the training history's failures.csv, not from the model
    data = out / "cache" / "data"
    trained = {prof: {row["family"] for row in csv.DictReader(
        (data / f"{prof}-n8-h6-s1-m1-noio" / "failures.csv").read_text().splitlines())} - {"sudden"}
        for prof in ("classic", "mixed")}
    assert trained["classic"] <= {"fan", "voltage", "psu", "stall"} and trained["mixed"] - trained["classic"]
    for p in result["pairs"]:
        fam, test = p["families_seen"], {f: c["failures"] for f, c in p["by_family"].items() if f != "sudden"}
        assert fam["trained"] == sorted(trained[p["train_profile"]])
        assert fam["unseen"] == {f: n for f, n in test.items() if f not in trained[p["train_profile"]]}
        assert fam["seen"] + sum(fam["unseen"].values()) == p["precursor_failures"]
        assert fam["share"] == pytest.approx(fam["seen"] / p["precursor_failures"])
        unseen = ", ".join(f"{f} ({n})" for f, n in fam["unseen"].items()) or "none"
        assert any(m.startswith(f"| {p['train_profile']} → {p['test_profile']} | ")
                   and m.endswith(f" | {fam['share']:.2f} | {unseen} |") for m in md.splitlines())
    # classic's four families leave some of mixed's precursor failures unseen (this draw has them)
    assert next(p for p in result["pairs"] if p["train_profile"] == "classic"
                and p["test_profile"] == "mixed")["families_seen"]["unseen"]
    # the online column at the false-alarm target, from each pair's own operating curve
    for p in result["pairs"]:
        at = p["online_at_false_alarm_target"]
        cell = "none within it" if at is None else f"{at['precursor_warned_2min_share']:.2f}"
        line = f"| {p['train_profile']} → {p['test_profile']} | {p['online']['failures']} ("
        assert any(m.startswith(line) and m.endswith(f" | {cell} |") for m in md.splitlines())
        assert at is None or at["false_alarms_per_100_node_days"] <= 2.0
    models = sorted((out / "cache" / "models").iterdir())
    assert len(models) == 2
    stamp = [(m / "weights.pt").stat().st_mtime for m in models]
    r = runner.invoke(app, args[:-1])                        # second run reuses data and models
    assert r.exit_code == 0, r.output
    assert [(m / "weights.pt").stat().st_mtime for m in models] == stamp


def test_cross_profile_trains_each_profile_on_k_histories(tmp_path):
    """--train-histories 2: each model is trained on two histories (seeds 1 and 2), never on the test seeds;
    --test-histories 2: each pair is evaluated on seeds 101 and 102 and pooled."""
    out = tmp_path / "xp"
    r = runner.invoke(app, ["evaluate", "cross-profile", "--profiles", "classic,mixed", "--nodes", "8", "--hours", "4",
                            "--mtbf-hours", "1", "--seed", "1", "--train-histories", "2", "--test-histories", "2",
                            "--out", str(out), "--mc-splits", "1", "--calibration-ok", "1000", "--max-ok", "1000",
                            "--features", "site", "--target-fpr", "1e-4", "--fpr-confidence", "0", "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["train_histories"] == 2 and len(result["pairs"]) == 4 and result["test_seeds"] == [101, 102]
    for p in result["pairs"]:
        h = p["histories"]
        assert [x["test_seed"] for x in h] == [101, 102]
        # the pool adds each history's counts: failures, healthy events, families and the online scan
        for key in ("failures", "precursor_failures", "ok_events"):
            assert p[key] == sum(x[key] for x in h)
        assert sum(c["failures"] for c in p["by_family"].values()) == p["failures"]
        # the online scan counts every failure, also those too early in a history for an event
        assert p["online"]["failures"] >= p["failures"]
        vote = next(row for row in p["rows"] if row["name"] == "lstm-vote")
        assert vote["failures"] == p["failures"] and vote["ok"] == p["ok_events"]
        # the hindsight threshold is set on the pooled events (every history's healthy events and precursor
        # failures, not one history's): at most 2e-4 of them warn
        at = p["at_fpr"]["lstm-vote"]["precursor"]
        assert at["ok"] == p["ok_events"] and at["failures"] == p["precursor_failures"]
        assert at["false_positives"] <= 2e-4 * p["ok_events"]
        assert p["online_curve"] and p["online"]["node_days"] == pytest.approx(2 * 8 * 4 / 24, rel=0.01)
    md = (out / "report.md").read_text()
    assert "test (2 histories, seeds 101-102, pooled)" in md
    # a median does not add: the pooled online rows leave the median lead out
    assert sum(line.startswith("| classic → ") and " | n/a | " in line for line in md.splitlines()) == 2
    models = sorted((out / "cache" / "models").iterdir())
    assert [m.name.split("-")[0] for m in models] == ["classic", "mixed"]
    for model in models:
        dirs = [Path(d).name for d in json.loads((model / "manifest.json").read_text())["metadata"]["data_dirs"]]
        profile = model.name.split("-")[0]   # the model's own profile, not read back from its data
        assert dirs == [f"{profile}-n8-h4-s1-m1-noio", f"{profile}-n8-h4-s2-m1-noio"]
    assert "2 histories, seeds 1-2" in (out / "report.md").read_text()


def test_cross_profile_held_out_trains_each_model_on_every_other_profile(tmp_path):
    """--held-out --no-pairs: one model per profile, trained on all the other profiles' histories and tested on
    that profile only; its families are the union of theirs; the held-out profiles are counted apart."""
    out = tmp_path / "xp"
    names = ("classic", "mixed", "memory")
    r = runner.invoke(app, ["evaluate", "cross-profile", "--profiles", ",".join(names), "--nodes", "8", "--hours", "4",
                            "--mtbf-hours", "1", "--seed", "1", "--out", str(out), "--mc-splits", "1",
                            "--calibration-ok", "1000", "--max-ok", "1000", "--features", "site", "--target-fpr", "1e-4",
                            "--fpr-confidence", "0", "--held-out", "--no-pairs", "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    others = {p: [q for q in names if q != p] for p in names}
    assert [(p["train_profile"], p["test_profile"]) for p in result["pairs"]] == \
        [("+".join(others[p]), p) for p in names]
    assert all(p["held_out"] for p in result["pairs"])
    data = out / "cache" / "data"
    families = {p: {row["family"] for row in csv.DictReader(
        (data / f"{p}-n8-h4-s1-m1-noio" / "failures.csv").read_text().splitlines())} - {"sudden"} for p in names}
    for p in result["pairs"]:
        test = p["test_profile"]
        assert p["families_seen"]["trained"] == sorted(set().union(*(families[q] for q in others[test])))
        manifest = json.loads(next((out / "cache" / "models").glob(f"{p['train_profile']}-*/manifest.json"))
                              .read_text())["metadata"]
        # trained on the other profiles' histories, never on the profile it is tested on
        assert [Path(d).name for d in manifest["data_dirs"]] == [f"{q}-n8-h4-s1-m1-noio" for q in others[test]]
    assert len(list((out / "cache" / "models").iterdir())) == 3
    md = (out / "report.md").read_text()
    met = sum(next(r for r in p["rows"] if r["name"] == "lstm-vote")["fpr"] <= 2e-4 and
              next(r for r in p["rows"] if r["name"] == "lstm-vote")["tpr_precursor"] >= 0.5 for p in result["pairs"])
    assert f"{met} of 3 held-out profiles meet it" in md and "pairs meet it" not in md
    assert "| mixed+memory → classic | lstm-vote |" in md


def test_cross_profile_needs_two_profiles(tmp_path):
    r = runner.invoke(app, ["evaluate", "cross-profile", "--profiles", "classic", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "two distinct profiles" in r.output
    # its training options are read as train failure reads them, with the same errors
    for bad, message in ((["--target-fpr", "abc"], "takes a rate"), (["--target-fpr", "2"], "must be in [0, 1]"),
                         (["--target-fpr", "none", "--fpr-confidence", "0.9"], "keeps a --target-fpr"),
                         (["--held-out"], "three profiles or more"), (["--no-pairs"], "nothing to evaluate"),
                         (["--features", "site", "--simulated-look-alikes", "2"], "--features trees")):
        r = runner.invoke(app, ["evaluate", "cross-profile", "--profiles", "classic,mixed", "--out", str(tmp_path)]
                          + bad)
        assert r.exit_code == 2 and message in r.output, (bad, r.output)
        assert not (tmp_path / "cache").exists()          # refused before any history is simulated


def test_simulated_prior_adds_failures_but_keeps_the_sites_coverage_and_threshold_data(tmp_path, monkeypatch):
    """--simulated-prior: the prior's failures are trained on; coverage, healthy calibration and the events
    that measure the threshold's fpr stay the site's."""
    from hpcguard.models.failure import dataset, training
    from hpcguard.simulators.telemetry import simulate_telemetry

    monkeypatch.setattr(failure_training, "PRIOR_NODES", 8)
    monkeypatch.setattr(failure_training, "PRIOR_HOURS", 3.0)
    monkeypatch.setattr(failure_training, "PRIOR_MTBF_HOURS", 0.5)
    calibration_nodes = []                                         # node count of each history calibrated on
    build_events = dataset.build_events

    def spy(values, *args, **kwargs):
        if kwargs.get("ok_after") is not None:
            calibration_nodes.append(values.shape[0])
        return build_events(values, *args, **kwargs)

    monkeypatch.setattr(dataset, "build_events", spy)
    rated = []                                                     # (events rated for the fpr, events) per run
    train_ensemble = training.train_ensemble

    def rated_spy(events, *args, **kwargs):
        rated.append((int(kwargs["rated"].sum()), len(events.labels)))
        return train_ensemble(events, *args, **kwargs)

    monkeypatch.setattr(training, "train_ensemble", rated_spy)
    site = tmp_path / "site"                                       # 6 nodes: told apart from the 8-node prior
    simulate_telemetry(str(site), nodes=6, hours=3, seed=5, mtbf_hours=0.5, io=False)
    base = ["train", "failure", "--features", "paper",
            "--data", str(site), "--mc-splits", "1", "--calibration-ok", "400", "--json"]
    r = runner.invoke(app, base + ["--out", str(tmp_path / "own")])
    assert r.exit_code == 0, r.output
    own = json.loads(r.stdout)
    r = runner.invoke(app, base + ["--out", str(tmp_path / "prior"), "--simulated-prior", "2", "--prior-profile",
                                   "mixed", "--cache-dir", str(tmp_path / "cache")])
    assert r.exit_code == 0, r.output
    with_prior = json.loads(r.stdout)
    assert calibration_nodes == [6, 6]                             # both runs: the site's own history only
    (own_rated, own_events), (prior_rated, prior_events) = rated[:2]
    assert own_rated == own_events == prior_rated < prior_events   # the prior's healthy tail is not the site's fpr
    assert with_prior["simulated_prior"] == {"profile": "mixed", "histories": 2, "nodes": 8, "hours": 3.0,
                                             "mtbf_hours": 0.5} and own["simulated_prior"] is None
    assert with_prior["failures"] > own["failures"] and with_prior["version"] != own["version"]
    assert with_prior["hard_negatives"] > 0 and with_prior["notes"] == []   # the simulator labels its look-alikes
    assert with_prior["coverage"] == own["coverage"]              # the site's own data, not the prior's
    (prior_dir,) = (tmp_path / "cache" / "simulated-prior").iterdir()
    assert prior_dir.name.startswith("mixed-n8-h3-m0.5-")
    prior_files = sorted(prior_dir.iterdir())                     # compact grids, no raw files left behind
    assert [f.name for f in prior_files] == ["s1.npz", "s2.npz"]
    meta = json.loads((tmp_path / "prior" / "manifest.json").read_text())["metadata"]
    assert meta["data_dirs"] == [str(site.resolve())]
    assert meta["simulated_prior_files"] == [str(f.resolve()) for f in prior_files]
    stamp = [f.stat().st_mtime for f in prior_files]
    r = runner.invoke(app, base + ["--out", str(tmp_path / "again"), "--simulated-prior", "2", "--cache-dir",
                                   str(tmp_path / "cache")])
    assert r.exit_code == 0, r.output                              # the cached prior is reused, same model version
    assert [f.stat().st_mtime for f in prior_files] == stamp
    assert json.loads(r.stdout)["version"] == with_prior["version"]
    r = runner.invoke(app, base + ["--out", str(tmp_path / "stricter"), "--simulated-prior", "2", "--cache-dir",
                                   str(tmp_path / "cache"), "--target-fpr", "1e-3"])
    assert r.exit_code == 0, r.output                              # another threshold is another model
    assert json.loads(r.stdout)["version"] != with_prior["version"]
    stricter = json.loads((tmp_path / "stricter" / "manifest.json").read_text())["metadata"]
    assert stricter["target_fpr"] == 1e-3 and meta["target_fpr"] is None
    assert {k: v for k, v in stricter.items() if k in ("mc_splits", "calibration_ok", "train_on_look_alikes",
                                                       "allow_missing")} == \
        {"mc_splits": 1, "calibration_ok": 400, "train_on_look_alikes": True, "allow_missing": []}
    r = runner.invoke(app, base + ["--out", str(tmp_path / "bad"), "--simulated-prior", "1", "--prior-profile", "nope",
                                   "--cache-dir", str(tmp_path / "cache")])
    assert r.exit_code != 0 and "nope" in r.output


def test_a_damaged_prior_file_is_simulated_again_and_an_unwritable_cache_is_a_clear_error(tmp_path, monkeypatch,
                                                                                           capsys):
    monkeypatch.setattr(failure_training, "PRIOR_NODES", 4)
    monkeypatch.setattr(failure_training, "PRIOR_HOURS", 2.0)
    monkeypatch.setattr(failure_training, "PRIOR_MTBF_HOURS", 0.5)
    ((first, rec),) = cli_failure._simulated_prior("mixed", 1, str(tmp_path / "cache"))
    first.write_bytes(first.read_bytes()[:1000])                   # a file cut short (disk full, killed copy)
    ((again, back),) = cli_failure._simulated_prior("mixed", 1, str(tmp_path / "cache"))
    assert again == first and np.array_equal(back.values, rec.values, equal_nan=True)
    assert np.array_equal(back.failure_times, rec.failure_times)
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(typer.Exit):
        cli_failure._simulated_prior("mixed", 1, str(tmp_path / "file"))
    assert "cannot cache the simulated prior" in capsys.readouterr().err


def test_a_prior_history_ends_with_the_site_and_lacks_what_the_site_lacks():
    v = np.ones((2, 8, 10))
    rec = site_training.Recorded(v, 100.0, np.array([1]), np.array([160.0]), ["a", "b"],
                               look_alikes=(np.array([0]), np.array([110.0]), np.array([130.0])))
    out = site_training.ending_at(rec, end=1000.0, absent=["psu_temp"])
    assert out.t0 + 15.0 * 8 == 1000.0 and out.failure_times[0] - out.t0 == 60.0
    assert out.look_alikes[1][0] - out.t0 == 10.0 and out.look_alikes[2][0] - out.t0 == 30.0
    assert np.isnan(out.values[..., 3]).all() and not np.isnan(np.delete(out.values, 3, axis=-1)).any()
    assert not np.isnan(v).any()                                   # the loaded history is not edited in place


def test_a_loaded_history_survives_the_prior_cache(tmp_path, recorded):
    """_save_recorded → _read_recorded keeps the grid (float32), labels, families and look-alikes."""
    rec = failure_training.load_recorded(str(recorded / "test"))
    failure_training.save_recorded(rec, tmp_path / "r.npz")
    back = failure_training.read_recorded(tmp_path / "r.npz")
    np.testing.assert_allclose(back.values, rec.values.astype(np.float32), equal_nan=True)
    assert back.t0 == rec.t0 and back.nodes == rec.nodes and back.family == rec.family
    assert back.look_alike_kinds == rec.look_alike_kinds
    for a, b in zip(back.look_alikes, rec.look_alikes):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(back.failure_times, rec.failure_times)
    np.testing.assert_array_equal(back.precursor, rec.precursor)


def test_a_site_trains_with_the_measured_setting_unless_it_says_otherwise(recorded, monkeypatch):
    """No --features: the trees, the vote's fpr kept under 2e-4 with 95 % confidence, persistence 2; what a
    site gives wins, and what it gives wrong is refused before anything is trained."""
    monkeypatch.setenv("HPCGUARD_WORKER__FALSE_ALARMS", "0")  # no budget: no prior scan (covered in train_then_evaluate)
    model = recorded / "site-default"
    r = runner.invoke(app, ["train", "failure", "--data", str(recorded / "train"), "--out", str(model),
                            "--simulated-prior", "0", "--simulated-look-alikes", "0", "--mc-splits", "1",
                            "--calibration-ok", "1500", "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["features"] == "trees" and summary["setting"] == {
        "target_fpr": 2e-4, "fpr_confidence": 0.95, "calibration_ok": 1500, "persistence": 2, "mc_splits": 1,
        "simulated_prior": 0, "simulated_look_alikes": 0, "calibration_span": "validation", "fpr_run_minutes": 0,
        "fpr_history_spread": True, "split_days": 0.0, "defaults": "site"}
    meta = json.loads((model / "manifest.json").read_text())["metadata"]
    assert (meta["target_fpr"], meta["fpr_confidence"], meta["persistence"]) == (2e-4, 0.95, 2)
    assert meta["calibration_span"] == "validation" and "fpr_run_minutes" not in meta
    assert "fpr_history_spread" not in meta                # one history: nothing to spread over
    assert any(n.startswith("one own history: the fpr bound counts the draws within it") for n in summary["notes"])
    r = runner.invoke(app, ["train", "failure", "--data", str(recorded / "train"), "--out", str(model / "runs"),
                            "--simulated-prior", "0", "--simulated-look-alikes", "0", "--mc-splits", "1",
                            "--calibration-ok", "1500", "--fpr-run-minutes", "30", "--calibration-span", "history"])
    assert r.exit_code == 0, r.output
    said = r.stdout.replace("\n", " ")
    assert "false positives in runs of 30 minutes: design effect" in said and "of the whole history" in said
    runs = json.loads((model / "runs" / "manifest.json").read_text())
    assert runs["metadata"]["fpr_run_minutes"] == 30 and runs["metadata"]["calibration_span"] == "history"
    assert runs["version"] != summary["version"]
    # two histories: the bound counts the spread of their rates, unless told not to
    two = ["train", "failure", "--data", str(recorded / "train"), "--data", str(recorded / "test"),
           "--simulated-prior", "0", "--simulated-look-alikes", "0", "--mc-splits", "1", "--calibration-ok", "1500"]
    r = runner.invoke(app, two + ["--out", str(model / "two")])
    assert r.exit_code == 0, r.output
    assert "the spread between the 2 histories' rates: design effect" in r.stdout.replace("\n", " ")
    assert json.loads((model / "two" / "manifest.json").read_text())["metadata"]["fpr_history_spread"] is True
    assert "one own history" not in r.output
    r = runner.invoke(app, two + ["--out", str(model / "pooled"), "--no-fpr-history-spread", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["setting"]["fpr_history_spread"] is False
    assert not any("one own history" in n for n in json.loads(r.stdout)["notes"])
    assert "fpr_history_spread" not in json.loads((model / "pooled" / "manifest.json").read_text())["metadata"]
    assert "1500 calibration events of the validation period" in runner.invoke(app, [
        "train", "failure", "--data", str(recorded / "train"), "--out", str(model / "said"), "--simulated-prior",
        "0", "--simulated-look-alikes", "0", "--mc-splits", "1", "--calibration-ok", "1500"]
    ).stdout.replace("\n", " ")
    # ~750 healthy validation draws cannot bound 2e-4: said, with the calibration that would
    assert any("--calibration-ok 300000" in n for n in summary["notes"]), summary["notes"]
    r = runner.invoke(app, ["train", "failure", "--data", str(recorded / "train"), "--out", str(model / "seed-rule"),
                            "--simulated-prior", "0", "--simulated-look-alikes", "0", "--mc-splits", "1",
                            "--calibration-ok", "1500", "--target-fpr", "none"])
    assert r.exit_code == 0, r.output
    assert "target fpr none (seed 000's rule)" in r.stdout and "persistence 2" in r.stdout
    meta = json.loads((model / "seed-rule" / "manifest.json").read_text())["metadata"]
    assert meta["target_fpr"] is None and "fpr_confidence" not in meta and meta["features"] == "trees"
    for bad, said in ((["--target-fpr", "often"], "takes a rate"), (["--target-fpr", "2"], "in [0, 1]"),
                      (["--fpr-confidence", "0.3"], "0 (the point estimate) or in [0.5, 0.999]"),
                      (["--target-fpr", "none", "--fpr-confidence", "0.9"], "keeps a --target-fpr"),
                      (["--calibration-span", "week"], "--calibration-span is one of history, validation")):
        r = runner.invoke(app, ["train", "failure", "--data", str(recorded / "train"), "--out",
                                str(recorded / "refused"), "--simulated-prior", "0"] + bad)
        assert r.exit_code != 0 and said in r.output, (bad, r.output)
        assert not (recorded / "refused").exists()


def test_a_history_of_two_days_is_cut_into_day_parts_at_a_clear_step():
    """Two days and a bit: two parts ending at the same time, every failure and look-alike in one part
    (shifted with it), no failure within 30 min before or 15 min after a cut; one day: left whole."""
    v, fn, ft = synthetic_grid(seed=4, nodes=6, steps=12000, failures_per_node=6)
    fn, ft = np.r_[fn, 0], np.r_[ft, T0 + 5760 * 15.0 + 300.0]          # one failure 5 min after the nominal cut
    look = (np.array([1, 2]), np.array([T0 + 600.0, T0 + 100_000.0]), np.array([T0 + 900.0, T0 + 100_300.0]))
    rec = site_training.Recorded(v, T0, fn, ft, [f"n{i}" for i in range(6)], np.ones(len(ft), bool), look,
                               None, ["fan"] * len(ft), ["fan_dip", "cooling_blip"])
    parts = site_training.day_parts(rec, 1.0)
    assert len(parts) == 2 and sum(p.values.shape[1] for p in parts) == 12000
    end = T0 + 12000 * 15.0
    assert all(p.t0 + 15.0 * p.values.shape[1] == end for p in parts)     # aligned: each has its last hours
    cut = parts[0].values.shape[1]
    assert cut != 5760 and not np.any((ft >= T0 + cut * 15.0 - 1800.0) & (ft <= T0 + cut * 15.0 + 900.0))
    shift = end - (T0 + cut * 15.0)
    np.testing.assert_array_equal(np.sort(np.r_[parts[0].failure_times - shift, parts[1].failure_times]), np.sort(ft))
    assert len(parts[0].family) + len(parts[1].family) == len(ft)
    assert parts[0].look_alike_kinds == ["fan_dip"] and parts[1].look_alike_kinds == ["cooling_blip"]
    assert parts[0].look_alikes[1][0] == T0 + 600.0 + shift
    np.testing.assert_array_equal(parts[1].values, v[:, cut:])
    for whole in (site_training.day_parts(rec, 1.5), site_training.day_parts(rec, 0)):
        assert len(whole) == 1 and whole[0] is rec


def test_split_days_makes_one_history_parts_whose_spread_the_bound_counts(recorded):
    """--split-days on one 12.5-hour history: two parts, their rates' spread in the bound and said; the
    manifest records the cut, the note about one own history is not given."""
    r = runner.invoke(app, ["train", "failure", "--data", str(recorded / "train"), "--out",
                            str(recorded / "parts"), "--simulated-prior", "0", "--simulated-look-alikes", "0",
                            "--mc-splits", "1", "--calibration-ok", "1500", "--split-days", "0.25"])
    assert r.exit_code == 0, r.output
    assert "the spread between the 2 parts' (--split-days 0.25) rates: design effect" in r.stdout.replace("\n", " ")
    assert "one own history" not in r.output
    meta = json.loads((recorded / "parts" / "manifest.json").read_text())["metadata"]
    assert (meta["split_days"], meta["own_parts"], meta["fpr_history_spread"]) == (0.25, 2, True)
    assert meta["data_dirs"] == [str((recorded / "train").resolve())]


def test_a_target_fpr_kept_with_confidence_says_when_the_history_cannot_bound_it(recorded):
    """1,500 healthy validation draws cannot keep fpr <= 1e-4 at 95 %: the strictest threshold, and a note
    naming the calibration that would; the option is part of the model's identity."""
    model = recorded / "kept"
    r = runner.invoke(app, ["train", "failure", "--features", "paper",
                            "--data", str(recorded / "train"), "--out", str(model),
                            "--seed", "0", "--mc-splits", "1", "--calibration-ok", "1500", "--target-fpr", "1e-4",
                            "--fpr-confidence", "0.95", "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["fpr_upper"] > 1e-4 and summary["fpr"] == 0.0      # zero of ~750 still leaves ~4e-3
    assert any("cannot keep fpr <= 0.0001 with 0.95 confidence" in n and "--calibration-ok 600000" in n
               for n in summary["notes"]), summary["notes"]
    meta = json.loads((model / "manifest.json").read_text())["metadata"]
    assert meta["fpr_confidence"] == 0.95 and meta["target_fpr"] == 1e-4
    r = runner.invoke(app, ["train", "failure", "--features", "paper",
                            "--data", str(recorded / "train"), "--out", str(recorded / "x"),
                            "--target-fpr", "1e-4", "--fpr-confidence", "1.5"])
    assert r.exit_code != 0 and "--fpr-confidence" in r.output
    r = runner.invoke(app, ["train", "failure", "--features", "paper",
                            "--data", str(recorded / "train"), "--out", str(recorded / "x"),
                            "--fpr-confidence", "0.95"])
    assert r.exit_code != 0 and "keeps a --target-fpr" in r.output and not (recorded / "x").exists()
    r = runner.invoke(app, ["train", "failure", "--features", "paper",
                            "--data", str(recorded / "train"), "--out", str(recorded / "said"),
                            "--mc-splits", "1", "--calibration-ok", "1500", "--target-fpr", "0.3",
                            "--fpr-confidence", "0.9"])
    assert r.exit_code == 0, r.output
    assert "with 90 % confidence" in r.stdout and "cannot keep" not in r.output   # a loose ceiling is kept


def test_advice_names_only_what_would_change_the_outcome(recorded, monkeypatch):
    """Issue 59 item 4: with --calibration-ok already at what 2e-4 needs, a short history cannot certify the
    target; the note must not advise the value in use, the manifest and evaluate say it is not certified."""
    monkeypatch.setenv("HPCGUARD_WORKER__FALSE_ALARMS", "0")  # no budget: no prior scan (covered in train_then_evaluate)
    model = recorded / "uncertified"
    r = runner.invoke(app, ["train", "failure", "--data", str(recorded / "train"), "--out", str(model),
                            "--simulated-prior", "0", "--simulated-look-alikes", "0", "--mc-splits", "1",
                            "--calibration-ok", "300000", "--json"])
    assert r.exit_code == 0, r.output
    notes = json.loads(r.stdout)["notes"]
    said = next(n for n in notes if "cannot keep fpr <= 0.0002" in n)
    assert "--calibration-ok" not in said and "the history itself is too short" in said
    assert "hpcguard train threshold" in said
    assert json.loads((model / "manifest.json").read_text())["metadata"]["fpr_target_certified"] is False
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(model), "--data", str(recorded / "test"), "--json"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    assert result["threshold_certified"] is False
    assert any("does not certify fpr <= 0.0002" in n for n in result["notes"])


def test_a_prior_of_several_profiles_takes_turns_and_is_recorded(tmp_path, monkeypatch):
    """--prior-profile a,b: the K prior histories alternate between the profiles, each cached under its own
    profile with its own seeds; the manifest names the profiles and every file trained on."""
    from hpcguard.simulators.telemetry import simulate_telemetry

    monkeypatch.setattr(failure_training, "PRIOR_NODES", 6)
    monkeypatch.setattr(failure_training, "PRIOR_HOURS", 3.0)
    monkeypatch.setattr(failure_training, "PRIOR_MTBF_HOURS", 0.5)
    site = tmp_path / "site"
    simulate_telemetry(str(site), nodes=6, hours=3, seed=5, mtbf_hours=0.5, io=False)
    r = runner.invoke(app, ["train", "failure", "--features", "paper", "--data", str(site), "--mc-splits", "1",
                            "--calibration-ok", "400", "--out", str(tmp_path / "model"), "--simulated-prior", "3",
                            "--prior-profile", "mixed, memory", "--cache-dir", str(tmp_path / "cache"), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["simulated_prior"]["profile"] == "mixed,memory"
    files = json.loads((tmp_path / "model" / "manifest.json").read_text())["metadata"]["simulated_prior_files"]
    assert [(Path(f).parent.name.split("-")[0], Path(f).name) for f in files] == \
        [("mixed", "s1.npz"), ("memory", "s1.npz"), ("mixed", "s2.npz")]
    # each file is its own profile's history: mixed's families reach beyond the memory profile's
    families = [set(failure_training.read_recorded(Path(f)).family) for f in files]
    assert "memory_leak" in families[1] and families[0] - families[1]
    # the families the model learned from include the prior's: a classic site has no memory leaks
    site_families = {row["family"] for row in csv.DictReader((site / "failures.csv").read_text().splitlines())}
    meta = json.loads((tmp_path / "model" / "manifest.json").read_text())["metadata"]
    assert "memory_leak" not in site_families and "memory_leak" in meta["families"]
    assert meta["families"] == sorted((site_families | set().union(*families)) - {"sudden", ""})
    r = runner.invoke(app, ["train", "failure", "--data", str(site), "--out", str(tmp_path / "bad"),
                            "--simulated-prior", "2", "--prior-profile", "mixed,mixed"])
    assert r.exit_code != 0 and "distinct names" in r.output


def test_simulated_look_alikes_teach_the_trees_benign_shapes_and_nothing_else(tmp_path, monkeypatch):
    """--simulated-look-alikes K: the benign look-alikes of K more simulated histories (after the prior's)
    are healthy rows of the boosted trees' fit, which then score them lower; the networks, their events
    and the threshold's data are the site's (and prior's) as without them."""
    from hpcguard.models.failure import trees
    from hpcguard.simulators.telemetry import simulate_telemetry

    monkeypatch.setattr(failure_training, "PRIOR_NODES", 6)
    monkeypatch.setattr(failure_training, "PRIOR_HOURS", 3.0)
    monkeypatch.setattr(failure_training, "PRIOR_MTBF_HOURS", 0.5)
    fits = []                                                      # (rows, labels, fitted trees) per trees fit
    fit_trees = trees.fit_trees

    def spy(statistics, labels, seed=0):
        front, report = fit_trees(statistics, labels, seed=seed)
        fits.append((np.asarray(statistics), np.asarray(labels), front))
        return front, report

    monkeypatch.setattr(trees, "fit_trees", spy)
    site = tmp_path / "site"
    simulate_telemetry(str(site), nodes=6, hours=3, seed=5, mtbf_hours=0.5, io=False)
    base = ["train", "failure", "--data", str(site), "--mc-splits", "1", "--calibration-ok", "400",
            "--target-fpr", "none", "--cache-dir", str(tmp_path / "cache"), "--json"]
    runs = {}
    for k in ("0", "2"):
        r = runner.invoke(app, base + ["--out", str(tmp_path / f"k{k}"), "--simulated-prior", "0",
                                       "--simulated-look-alikes", k])
        assert r.exit_code == 0, r.output
        runs[k] = json.loads(r.stdout)
    (rows0, labels0, front0), (rows2, labels2, front2) = fits
    added = len(labels2) - len(labels0)
    assert added > 0 and added == runs["2"]["encoder"]["look_alike_only_negatives"]
    assert runs["0"]["encoder"]["look_alike_only_negatives"] == 0
    np.testing.assert_array_equal(rows2[:len(labels0)], rows0)     # the site's rows first, unchanged
    assert not labels2[len(labels0):].any()                        # no simulated failure among them
    look = rows2[len(labels0):]                                    # (added, leads, 160): every lead's history
    assert front2.decision_function(look.reshape(-1, look.shape[-1])).mean() < \
        front0.decision_function(look.reshape(-1, look.shape[-1])).mean()
    for key in ("events", "failures", "hard_negatives"):          # the networks train on the site's events alone
        assert runs["2"][key] == runs["0"][key]
    assert runs["2"]["version"] != runs["0"]["version"]
    assert runs["2"]["simulated_look_alikes"] == {"profile": "mixed", "nodes": 6, "hours": 3.0, "mtbf_hours": 0.5,
                                                  "histories": 2} and runs["0"]["simulated_look_alikes"] is None
    assert runs["2"]["setting"]["simulated_look_alikes"] == 2
    meta = json.loads((tmp_path / "k2" / "manifest.json").read_text())["metadata"]
    assert [Path(f).name for f in meta["simulated_look_alike_files"]] == ["s1.npz", "s2.npz"]
    assert meta["simulated_prior_files"] == []
    # after a prior: the look-alike-only histories are the profile's next seeds, the prior keeps 1..K
    r = runner.invoke(app, base + ["--out", str(tmp_path / "p1"), "--simulated-prior", "1",
                                   "--simulated-look-alikes", "1"])
    assert r.exit_code == 0, r.output
    meta = json.loads((tmp_path / "p1" / "manifest.json").read_text())["metadata"]
    assert [Path(f).name for f in meta["simulated_prior_files"]] == ["s1.npz"]
    assert [Path(f).name for f in meta["simulated_look_alike_files"]] == ["s2.npz"]
    for bad, said in ((["--features", "robust"], "--features trees"), (["--no-hard-negatives"], "--no-hard-negatives")):
        r = runner.invoke(app, base + ["--out", str(tmp_path / "refused"), "--simulated-look-alikes", "2"] + bad)
        assert r.exit_code != 0 and said in r.output, (bad, r.output)
        assert not (tmp_path / "refused").exists()
