"""CLI: hpcguard uc, train failure, evaluate failure."""
import json

import pytest
from typer.testing import CliRunner

from hpcguard.models.metrics import uc_probability
from hpcguard.cli import failure as cli_failure
from hpcguard.cli import app

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
    """Two synthetic 'recorded' directories; the loader is replaced by the in-memory grids."""
    grids = {}
    for name, seed in (("train", 3), ("test", 11)):
        d = tmp_path / name
        d.mkdir()
        v, fn, ft = synthetic_grid(seed=seed)
        (d / "failures.csv").write_text("time,node,job_id,cause\n" + "".join(
            f"{t},n{n:03d},,fan\n" for n, t in zip(fn, ft)))
        grids[str(d)] = (v, T0, fn, ft, [f"n{i:03d}" for i in range(v.shape[0])])

    def fake_load(data_dir, grid_s=15.0):
        key = str(data_dir)
        if key not in grids:
            cli_failure.fail(f"data directory not found: {data_dir}")
        return grids[key]

    monkeypatch.setattr(cli_failure, "_load_recorded", fake_load)
    return tmp_path


def test_train_then_evaluate_writes_model_and_report(recorded):
    model = recorded / "model"
    r = runner.invoke(app, ["train", "failure", "--data", str(recorded / "train"), "--out", str(model),
                            "--seed", "0", "--mc-splits", "2", "--calibration-ok", "1500", "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["failures"] > 0 and 0 <= summary["lstm_threshold"] <= 1
    manifest = json.loads((model / "manifest.json").read_text())
    assert manifest["leads_minutes"] == [2, 3, 4, 5, 6, 7] and manifest["window_steps"] == 16
    assert len(manifest["metadata"]["training_data_sha256"]) == 64 and len(manifest["sensors"]) == 10
    assert (model / "weights.pt").is_file() and (model / "metrics.json").is_file()

    report = recorded / "report"
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(model), "--data", str(recorded / "test"),
                            "--report", str(report), "--max-ok", "3000", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    names = [row["name"] for row in rows]
    assert names[:6] == ["unanimous@1", "unanimous@2", "unanimous@4", "unanimous@6", "lstm-vote",
                         "single-network@2min"]
    assert "random-forest@2min" in names and any(n.startswith("baseline") for n in names)
    for row in rows:
        assert {"name", "tpr", "ppv", "fpr", "uc_1024"} <= set(row)
        if row["fpr"] is not None:
            assert row["uc_1024"] == pytest.approx(uc_probability(row["fpr"], 1024))
    fprs = [row["fpr"] for row in rows[:4]]
    assert fprs == sorted(fprs, reverse=True)               # unanimous voting: fpr falls with networks
    full = json.loads((report / "report.json").read_text())
    assert full["online"]["failures"] > 0
    assert (report / "roc_networks.png").stat().st_size > 1000 and (report / "uc_nodes.png").is_file()


def test_evaluate_missing_model_is_a_clear_error(recorded):
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(recorded / "nope"), "--data",
                            str(recorded / "test"), "--report", str(recorded / "r")])
    assert r.exit_code == 2 and "manifest.json" in r.output


def test_end_to_end_on_simulated_recordings(tmp_path):
    """simulate telemetry (files) → train failure → evaluate failure on another seed."""
    from hpcguard.simulators.telemetry import simulate_telemetry

    for seed in (1, 2):
        simulate_telemetry(str(tmp_path / f"sim{seed}"), nodes=8, hours=3, seed=seed, mtbf_hours=0.5)
    r = runner.invoke(app, ["train", "failure", "--data", str(tmp_path / "sim1"), "--out", str(tmp_path / "m"),
                            "--mc-splits", "1", "--calibration-ok", "400", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["failures"] >= 4
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(tmp_path / "m"), "--data", str(tmp_path / "sim2"),
                            "--report", str(tmp_path / "rep"), "--max-ok", "500", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert len(rows) == 8 and rows[4]["name"] == "lstm-vote"
    assert json.loads((tmp_path / "rep" / "report.json").read_text())["online"]["healthy_steps"] > 0
