"""PFS simulator, its files and readers, and the CanarIO CLI (seed 004 ch. 4)."""
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hpcguard.connectors.canario_io import read_pfs, read_probes
from hpcguard.models.canario.probes import probe_ratios
from hpcguard.simulators.pfs import simulate_pfs, write_pfs
from hpcguard.cli import app


@pytest.fixture(scope="module")
def trace():
    return simulate_pfs(np.random.default_rng(3), 1.7e9, 1.7e9 + 30 * 3600.0, episodes_per_day=4, jobs_per_hour=20)


def test_episodes_stretch_probes_and_sensitive_jobs_only(trace):
    assert (trace.slowdown >= 1).all()
    assert {e["severity"] for e in trace.episodes} <= {"mild", "severe"}
    p = trace.probes
    _exp, ratio = probe_ratios(p["probe_type"], p["runtime_s"], p["end"])
    peak = trace.slowdown_at((p["start"] + p["end"]) / 2)
    assert np.median(ratio[peak < 1.02]) == pytest.approx(1.0, abs=0.02)
    if (peak > 1.8).any():
        assert (ratio[peak > 1.8] > 1.05).all()
    j = trace.jobs
    stretch = j["runtime_s"] / j["base_runtime_s"]
    ok = ~j["deck_change"] & (j["runtime_s"] > 60)
    assert stretch[ok & ~j["io_sensitive"]].max() < 1.05        # IO-resistant: only run-to-run noise
    assert stretch[ok & j["io_sensitive"]].max() > 1.05


def test_job_scripts_are_batch_scripts(trace):
    jid = trace.jobs["job_id"][0]
    text = trace.scripts[jid]
    assert text.startswith("#!/bin/bash\n#SBATCH --job-name=")
    assert "#SBATCH --nodes=" in text and "module load" in text and "srun -n" in text
    assert set(trace.scripts) == set(trace.jobs["job_id"])


def test_write_read_roundtrip(trace, tmp_path):
    write_pfs(trace, str(tmp_path), seed=3)
    back = read_pfs(str(tmp_path))
    np.testing.assert_allclose(back.slowdown, trace.slowdown, atol=1e-4)
    np.testing.assert_allclose(back.io_read, trace.io_read, atol=1)
    np.testing.assert_array_equal(back.jobs["io_sensitive"], trace.jobs["io_sensitive"])
    np.testing.assert_allclose(back.probes["end"], trace.probes["end"], atol=1e-3)
    assert back.scripts == trace.scripts and len(back.episodes) == len(trace.episodes)


def test_reader_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="simulate pfs"):
        read_probes(str(tmp_path))
    (tmp_path / "probes.csv").write_text("probe_id,probe_type\n1,probe-1\n")
    with pytest.raises(ValueError, match="missing columns"):
        read_probes(str(tmp_path))


def test_cli_simulate_and_evaluate(tmp_path):
    runner = CliRunner()
    out = tmp_path / "pfs"
    r = runner.invoke(app, ["simulate", "pfs", "--out", str(out), "--hours", "8", "--seed", "5",
                            "--episodes-per-day", "6", "--jobs-per-hour", "12", "--json"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["evaluate", "canario", "--data", str(out), "--models", "knn", "--initial-bank-hours", "4",
                            "--report", str(tmp_path / "rep"), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    rows = res["detector"]
    assert [row["threshold"] for row in rows] == [0, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert set(rows[0]) >= {"model", "threshold", "f1", "precision", "recall", "tpr", "tnr"}
    assert set(res["jobs"]) >= {"tpr", "tnr"} and set(res["node_hours"]) >= {"recovered", "probe_cost"}
    assert res["node_hours"]["probe_cost"] > 0
    assert all(p.endswith(".png") for p in res["plots"]) and len(res["plots"]) == 3
    bad = runner.invoke(app, ["evaluate", "canario", "--data", str(tmp_path / "nope")])
    assert bad.exit_code != 0 and "not found" in bad.output


def test_external_job_table_gets_scripts_sensitivity_and_stretch():
    jobs = [{"job_id": f"j{i}", "submit": 600.0 * i, "start": 600.0 * i + 60, "runtime_s": 3600.0, "num_nodes": 2,
             "nodes": ["n1", "n2"], "user": "u", "name": "x"} for i in range(30)]
    tr = simulate_pfs(np.random.default_rng(0), 0.0, 30000.0, jobs=jobs, episodes_per_day=0.0,
                      failed_start_prob=0.0, deck_change_prob=0.0)
    assert list(tr.jobs["job_id"]) == [f"j{i}" for i in range(30)]
    np.testing.assert_allclose(tr.jobs["start"], [600.0 * i + 60 for i in range(30)])
    assert np.all(np.abs(tr.jobs["runtime_s"] / 3600.0 - 1) < 0.05)
    assert tr.jobs["nodes"][0] == "n1,n2" and set(tr.scripts) == {f"j{i}" for i in range(30)}
