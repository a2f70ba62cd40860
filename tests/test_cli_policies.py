"""CLI: checkpoint interval/shiraz, failures fit, fars select (issue 5)."""
import json

import pytest
from typer.testing import CliRunner

from hpcguard.cli import app
from _shared import SHARED_DATA

LANL = SHARED_DATA / "lanl-failures/LA-UR-05-7318-failure-data-1996-2005.csv.xz"
runner = CliRunner()


def run_json(*args):
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_interval_aware_with_simulation():
    out = run_json("checkpoint", "interval", "--method", "aware", "--mtbf", "24h", "--ckpt-cost", "30m",
                   "--runtime", "18.99h", "--weibull-shape", "0.8", "--simulate", "20000")
    assert {"interval_h", "expected_cost_h", "no_checkpoint", "simulated_cost_h"} <= set(out)
    assert out["no_checkpoint"] is False and out["interval_h"] == pytest.approx(4.25)
    assert abs(out["simulated_cost_h"] - out["expected_cost_h"]) < 4 * out["simulated_stderr_h"]


def test_interval_young_daly_multilevel_and_scaling():
    y = run_json("checkpoint", "interval", "--method", "young", "--mtbf", "1d", "--ckpt-cost", "30m")
    assert y["interval_h"] == pytest.approx(24 ** 0.5) and y["expected_cost_h"] is None
    d = run_json("checkpoint", "interval", "--method", "daly", "--mtbf", "24h", "--ckpt-cost", "1800s",
                 "--nodes", "8", "--system-nodes", "64", "--poisson", "--runtime", "100h")
    assert d["job_mtbf_h"] == pytest.approx(192.0) and d["expected_cost_h"] > 0
    m = run_json("checkpoint", "interval", "--method", "multilevel", "--mtbf", "24h", "--ckpt-cost", "6m",
                 "--pfs-cost", "30m", "--sigma", "0.44")
    assert m["interval_h"] == pytest.approx((2 * 0.1 * 24 / 0.56 + 2 * 0.5 * 0.1) ** 0.5)


def test_interval_jobs_file(tmp_path):
    f = tmp_path / "jobs.csv"
    f.write_text("runtime_h,nodes,ckpt_cost_h\n18.99,1,0.5\n1h,1,30m\n")
    out = run_json("checkpoint", "interval", "--mtbf", "24h", "--ckpt-cost", "30m", "--weibull-shape", "0.8",
                   "--jobs", str(f))
    assert [r["no_checkpoint"] for r in out] == [False, True]
    f.write_text("runtime_h,nodes\n1,2\n")
    res = runner.invoke(app, ["checkpoint", "interval", "--mtbf", "24h", "--ckpt-cost", "30m", "--jobs", str(f)])
    assert res.exit_code == 2 and "ckpt_cost_h" in res.output


def test_interval_errors():
    res = runner.invoke(app, ["checkpoint", "interval", "--mtbf", "24x", "--ckpt-cost", "30m"])
    assert res.exit_code == 2 and "not a duration" in res.output
    res = runner.invoke(app, ["checkpoint", "interval", "--mtbf", "24h", "--ckpt-cost", "30m",
                              "--weibull-shape", "0.8", "--poisson"])
    assert res.exit_code == 2 and "not both" in res.output
    res = runner.invoke(app, ["checkpoint", "interval", "--method", "aware", "--mtbf", "24h", "--ckpt-cost", "30m"])
    assert res.exit_code == 2 and "--runtime" in res.output


def test_shiraz_cli_tab_2():
    out = run_json("checkpoint", "shiraz", "--mtbf", "5h", "--heavy-cost", "30m", "--light-cost", "18s")
    assert out["k"] == 26 and out["region"] == [25, 27]  # seed 002 Tab. 2 exascale 100x: 26
    assert {"gain_light_h", "gain_heavy_h"} <= set(out)


def test_failures_fit_system_18():
    if not LANL.exists():
        pytest.skip("LANL data not present")
    out = run_json("failures", "fit", str(LANL), "--system", "18")
    assert out["shape"] == pytest.approx(0.8170, abs=5e-4)  # seed 003 Tab. 7.2
    assert out["dropped_zero_gaps"] > 0 and out["n"] > 3000 and "ks_pvalue" in out
    res = runner.invoke(app, ["failures", "fit", "/nonexistent.csv", "--system", "8"])
    assert res.exit_code == 2 and "not found" in res.output


def test_fars_select(tmp_path):
    f = tmp_path / "jobs.json"
    f.write_text(json.dumps([
        {"id": "a", "nodes": 128, "suspicious_nodes": 3, "hours_since_checkpoint": 4.0, "runtime_h": 20},
        {"id": "b", "nodes": 16, "suspicious_nodes": 1, "hours_since_checkpoint": 1.0, "runtime_h": 2}]))
    out = run_json("fars", "select", "--spare", "3", "--jobs", str(f), "--strategy", "sul-d", "--precision", "0.5")
    assert out["selected"] == ["a"] and out["spare_used"] == 3 and out["gain"] > 0
    f.write_text("{not json")
    res = runner.invoke(app, ["fars", "select", "--spare", "3", "--jobs", str(f), "--precision", "0.5"])
    assert res.exit_code == 2 and "not JSON" in res.output


def test_interval_rejects_job_larger_than_system():
    res = runner.invoke(app, ["checkpoint", "interval", "--method", "young", "--mtbf", "24h", "--ckpt-cost", "30m",
                              "--nodes", "8", "--system-nodes", "4"])
    assert res.exit_code == 2 and "--system-nodes" in res.output
