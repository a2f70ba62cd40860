"""``hpcguard evaluate savings`` (issue 55 item 1) on a small simulated site: the worker's own
decisions (same action ids as the offline parity side) accounted against its jobs and failures."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from hpcguard.cli import app
from hpcguard.settings import Settings
from hpcguard.simulators.demo_run import train_baseline_model
from hpcguard.simulators.parity import offline_decisions
from hpcguard.simulators.telemetry import simulate_telemetry


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("savings")
    simulate_telemetry(str(root / "history"), nodes=8, hours=3.0, seed=11)
    train_baseline_model([str(root / "history")], str(root / "model"))
    simulate_telemetry(str(root / "data"), nodes=8, hours=2.0, seed=3, runtime_median_minutes=90.0, mtbf_hours=3.0)
    return root


def test_evaluate_savings_accounts_the_workers_own_actions(site):
    out = site / "report"
    res = CliRunner().invoke(app, ["evaluate", "savings", "--data", str(site / "data"), "--model",
                                   str(site / "model"), "--report", str(out), "--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)
    offline = offline_decisions(str(site / "data"), str(site / "model"), Settings.load())
    assert s["inputs"]["actions"] == len(offline["actions"])      # the same decide path
    accounted = ({a["action_id"] for a in s["false_alarm_actions"]}
                 | {r["action_id"] for r in s["failures"] if r["action_id"]})
    assert accounted <= {a["action_id"] for a in offline["actions"]}
    assert s["net"] == pytest.approx(s["saved"] - s["spent"])
    assert s["saved"] == pytest.approx(sum(v["saved"] for v in s["by_kind"].values()))
    assert s["inputs"]["failures"] == len(s["failures"]) > 0
    assert s["without_node_hours_lost"] == pytest.approx(sum(r["lost_without"] for r in s["failures"]))
    assert s["net_per_1000_node_days"] == pytest.approx(1000 * s["net"] / (8 * 2 / 24))
    assert (out / "savings.json").is_file() and (out / "savings.png").stat().st_size > 1000


def test_evaluate_savings_says_what_is_missing(site, tmp_path):
    res = CliRunner().invoke(app, ["evaluate", "savings", "--data", str(tmp_path), "--model", str(site / "model")])
    assert res.exit_code != 0 and "failures.csv" in res.output
    res = CliRunner().invoke(app, ["evaluate", "savings", "--data", str(site / "data"), "--model",
                                   str(tmp_path / "none")])
    assert res.exit_code != 0 and "model directory not found" in res.output
