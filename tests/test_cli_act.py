"""``hpcguard act``: one action through the governor, from a file, stdin or inline JSON."""
import json
import stat

import pytest

from typer.testing import CliRunner

from hpcguard.cli import app

runner = CliRunner()


def act(tmp_path, *args, input=None):
    base = ["act", "--job-cooldown-s", "0", "--node-cooldown-s", "0"]
    return runner.invoke(app, [*base, *args], input=input,
                         env={"HPCGUARD_ADAPTER__LEDGER": str(tmp_path / "ledger.sqlite")})


def site_tool(tmp_path):
    log = tmp_path / "runs.txt"
    exe = tmp_path / "site-drain"
    exe.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\necho drained-by-site\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe, log


DRAIN = {"action_id": "cli-1", "kind": "drain", "nodes": ["n7"], "source": "policy", "reason": {"text": "fan"}}


def test_dry_run_from_file_prints_json_ack(tmp_path):
    path = tmp_path / "action.json"
    path.write_text(json.dumps(DRAIN))
    res = act(tmp_path, "--adapter", "dry-run", "--audit-log", str(tmp_path / "audit.jsonl"), "--total-nodes", "10",
              str(path), "--json")
    assert res.exit_code == 0, res.output
    ack = json.loads(res.stdout)
    assert (ack["status"], ack["adapter"], ack["nodes"]) == ("would_apply", "dry-run", ["n7"])
    assert ack["detail"] == "dry-run: would run: scontrol update NodeName=n7 State=DRAIN 'Reason=hpcguard cli-1: fan'"
    record = json.loads((tmp_path / "audit.jsonl").read_text())
    assert record["action"]["action_id"] == "cli-1" and record["would_apply"] is True
    assert record["command"] == [["scontrol", "update", "NodeName=n7", "State=DRAIN", "Reason=hpcguard cli-1: fan"]]


def test_dry_run_plan_uses_the_signal_options(tmp_path):
    ckpt = {"action_id": "cli-2", "kind": "checkpoint", "job_id": "4086", "nodes": ["n7"]}
    res = act(tmp_path, "--adapter", "dry-run", "--audit-log", str(tmp_path / "audit.jsonl"), "--checkpoint-signal",
              "SIGUSR2", "--signal-scope", "full", json.dumps(ckpt))
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("would_apply: checkpoint cli-2 via dry-run: "
                                 "dry-run: would run: scancel --signal=USR2 --full 4086")


def test_command_adapter_from_stdin_then_duplicate(tmp_path):
    exe, log = site_tool(tmp_path)
    args = ["--adapter", "command", "--command", f"drain={exe}", "--total-nodes", "10", "-"]
    first = act(tmp_path, *args, input=json.dumps(DRAIN))
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("applied: drain cli-1 via command") and "drained-by-site" in first.stdout
    second = act(tmp_path, *args, input=json.dumps(DRAIN))
    assert second.exit_code == 0 and second.stdout.startswith("duplicate:")
    assert log.read_text().splitlines() == ["--action-id cli-1 --kind drain --nodes n7 --reason fan"]


def test_hostile_inline_action_is_refused_with_exit_3(tmp_path):
    exe, log = site_tool(tmp_path)
    hostile = {**DRAIN, "action_id": "cli-2", "nodes": ["n1;touch pwned"]}
    res = act(tmp_path, "--adapter", "command", "--command", f"drain={exe}", json.dumps(hostile), "--json")
    assert res.exit_code == 3
    ack = json.loads(res.stdout)
    assert ack["status"] == "refused" and "not a valid node name" in ack["detail"]
    assert not log.exists() and not (tmp_path / "pwned").exists()


def test_governor_flags_refuse(tmp_path):
    exe, log = site_tool(tmp_path)
    res = act(tmp_path, "--adapter", "command", "--command", f"drain={exe}", "--total-nodes", "10",
              "--max-drained-fraction", "0.05", json.dumps(DRAIN))
    assert res.exit_code == 3 and "drain ceiling" in res.stdout
    res = act(tmp_path, "--adapter", "command", "--command", f"drain={exe}", "--total-nodes", "10",
              "--rate-limit", "drain=0/60", json.dumps({**DRAIN, "action_id": "cli-rate"}))
    assert res.exit_code == 3 and "rate limit for drain" in res.stdout
    res = act(tmp_path, "--adapter", "command", "--command", f"drain={exe}", "--total-nodes", "10", "--dry-run",
              json.dumps({**DRAIN, "action_id": "cli-dry"}))
    assert res.exit_code == 0 and res.stdout.startswith("skipped:")
    res = act(tmp_path, "--adapter", "command", "--command", f"drain={exe}", "--total-nodes", "10", json.dumps(DRAIN))
    assert res.exit_code == 0 and res.stdout.startswith("duplicate: drain cli-1") and "already refused" in res.stdout
    assert not log.exists()


def test_usage_errors_are_clear(tmp_path):
    res = act(tmp_path, "--adapter", "dry-run", "{not json")
    assert res.exit_code == 2 and "not valid JSON" in res.output
    res = act(tmp_path, "--adapter", "dry-run", str(tmp_path / "missing.json"))
    assert res.exit_code == 2 and "action file not found" in res.output
    res = act(tmp_path, "--adapter", "flux", json.dumps(DRAIN))
    assert res.exit_code == 2 and "unknown adapter 'flux'" in res.output
    res = act(tmp_path, "--adapter", "command", "--command", "drain", json.dumps(DRAIN))
    assert res.exit_code == 2 and "KEY=VALUE" in res.output
    res = act(tmp_path, "--adapter", "dry-run", "--rate-limit", "drain=5", json.dumps(DRAIN))
    assert res.exit_code == 2 and "COUNT/WINDOW_S" in res.output


@pytest.mark.slurm
def test_act_against_real_slurm(slurm_cluster, tmp_path):
    slurm_cluster.reset_nodes()
    try:
        action = {"action_id": "cli-slurm-1", "kind": "drain", "nodes": ["n2"], "reason": {"text": "cli test"}}
        args = ["--adapter", "slurm", "--slurm-conf", str(slurm_cluster.conf), json.dumps(action), "--json"]
        res = act(tmp_path, *args, "--max-drained-fraction", "0.25")
        assert res.exit_code == 0, res.output
        ack = json.loads(res.stdout)
        assert ack["status"] == "applied" and "scontrol update NodeName=n2 State=DRAIN" in ack["output"]
        assert "Reason=hpcguard cli-slurm-1: cli test" in slurm_cluster.node_line("n2")
        again = act(tmp_path, *args)
        assert json.loads(again.stdout)["status"] == "duplicate"
    finally:
        slurm_cluster.reset_nodes()
