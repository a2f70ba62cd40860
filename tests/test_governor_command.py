"""``--adapter command`` configured from settings: argv templates per kind, a real command through the governor."""
import json
import stat

import pytest
from typer.testing import CliRunner

from hpcguard.cli import app
from hpcguard.connectors.adapters import CommandAdapter, make_adapter
from hpcguard.connectors.governor import Governor
from hpcguard.settings import Settings
from hpcguard.streams.worker import build_adapter

KINDS = ("checkpoint", "migrate", "reschedule", "delay", "release", "drain", "resume")


def site_script(tmp_path):
    """Writes one file per run, named by the action id, holding its argv and its stdin."""
    exe = tmp_path / "site-act"
    exe.write_text(f"#!/bin/sh\nout={tmp_path}/done-$2\necho \"$@\" > $out\ncat >> $out\necho site-ok\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def write_config(tmp_path, commands: str) -> str:
    path = tmp_path / "hpcguard.toml"
    path.write_text(f'[adapter]\nkind = "command"\nledger = "{tmp_path}/ledger.sqlite"\n'
                    f'governor_config = "{tmp_path}/governor.toml"\n[adapter.commands]\n{commands}')
    (tmp_path / "governor.toml").write_text("total_nodes = 10\nmax_drained_fraction = 0.5\n")
    return str(path)


def full_table(exe) -> str:
    return (f'drain = ["{exe}", "drain", "{{action_id}}", "--nodes={{nodes}}", "{{reason}}"]\n'
            f'checkpoint = ["{exe}", "checkpoint", "{{action_id}}", "{{job_id}}"]\n'
            f'migrate = ["{exe}", "migrate", "{{action_id}}", "{{job_id}}", "{{nodes}}"]\n'
            'reschedule = []\ndelay = []\nrelease = []\nresume = []\n')


def test_worker_runs_a_configured_command_through_the_governor(tmp_path):
    exe = site_script(tmp_path)
    settings = Settings.load(write_config(tmp_path, full_table(exe)), env={})
    governor = build_adapter(settings)  # what `hpcguard worker --adapter command` builds
    assert isinstance(governor, Governor) and isinstance(governor.adapter, CommandAdapter)
    ack = governor.apply({"action_id": "w-1", "kind": "drain", "nodes": ["n1", "n2"], "source": "policy",
                          "reason": {"text": "PSU warning"}})
    assert ack.status == "applied" and ack.output == "site-ok"
    argv, stdin = (tmp_path / "done-w-1").read_text().split("\n", 1)
    assert argv == "drain w-1 --nodes=n1,n2 PSU warning"
    assert json.loads(stdin)["nodes"] == ["n1", "n2"]
    ack = governor.apply({"action_id": "w-2", "kind": "checkpoint", "job_id": "77"})
    assert ack.status == "applied" and (tmp_path / "done-w-2").read_text().startswith("checkpoint w-2 77\n")
    ack = governor.apply({"action_id": "w-3", "kind": "delay", "job_id": "77"})
    assert ack.status == "skipped" and "no command configured for delay" in ack.detail
    assert governor.apply({"action_id": "w-1", "kind": "drain", "nodes": ["n1", "n2"]}).status == "duplicate"
    assert sorted(p.name for p in tmp_path.glob("done-*")) == ["done-w-1", "done-w-2"]


def test_missing_kinds_are_named(tmp_path):
    exe = site_script(tmp_path)
    settings = Settings.load(write_config(tmp_path, f'drain = ["{exe}", "{{nodes}}"]\n'), env={})
    with pytest.raises(ValueError, match="no command for: checkpoint, migrate, reschedule, delay, release, resume"):
        build_adapter(settings)
    with pytest.raises(ValueError, match="no command for: checkpoint, migrate"):
        make_adapter("command", Settings())


@pytest.mark.parametrize("argv,error", [
    (["{exe}", "{job_id.__class__}"], "bad placeholder"),
    (["{exe}", "{nodes!r}"], "bad placeholder"),
    (["{exe}", "{user}"], "bad placeholder {user}"),
    (["{exe}", "{nodes"], "bad argv template"),
    (["{exe}", "{job_id}"], "drain actions carry no job id"),
    (["site-drain", "{nodes}"], "absolute path"),
])
def test_bad_templates_are_refused_at_start(tmp_path, argv, error):
    exe = str(site_script(tmp_path))
    with pytest.raises(ValueError, match=error):
        CommandAdapter({"drain": [a.replace("{exe}", exe) for a in argv]})


def test_hostile_fields_stay_single_arguments(tmp_path):
    exe = site_script(tmp_path)
    adapter = CommandAdapter({"drain": [str(exe), "drain", "{action_id}", "{reason}"]})
    ack = adapter.apply({"action_id": "h1", "kind": "drain", "nodes": ["n1"], "reason": {"text": "x; touch pwned"}})
    assert ack.status == "refused" and not (tmp_path / "pwned").exists()
    ack = adapter.apply({"action_id": "h2", "kind": "drain", "nodes": ["n1"], "reason": {"text": "fan at 30 %"}})
    assert ack.status == "applied" and (tmp_path / "done-h2").read_text().startswith("drain h2 fan at 30 %\n")


def test_commands_table_from_the_environment_and_act_cli(tmp_path):
    exe = site_script(tmp_path)
    table = {k: [] for k in KINDS} | {"drain": [str(exe), "drain", "{action_id}", "{nodes}"]}
    env = {"HPCGUARD_ADAPTER__COMMANDS": json.dumps(table), "HPCGUARD_ADAPTER__LEDGER": str(tmp_path / "l.sqlite")}
    assert Settings.load(env=env).adapter.commands == table
    res = CliRunner().invoke(app, ["act", "--adapter", "command", "--total-nodes", "10", "--json",
                                   json.dumps({"action_id": "cli-9", "kind": "drain", "nodes": ["n4"]})], env=env)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["status"] == "applied"
    assert (tmp_path / "done-cli-9").read_text().startswith("drain cli-9 n4\n")
    with pytest.raises(ValueError, match="adapter.commands expects dict"):
        Settings.load(env={"HPCGUARD_ADAPTER__COMMANDS": "[1, 2]"})


@pytest.mark.broker
def test_worker_cli_names_the_missing_kinds(kafka_bootstrap, tmp_path):
    import subprocess
    import sys

    exe = site_script(tmp_path)
    config = write_config(tmp_path, f'drain = ["{exe}", "{{nodes}}"]\nresume = []\n')
    done = subprocess.run([sys.executable, "-m", "hpcguard", "worker", "--bootstrap", kafka_bootstrap,
                           "--config", config, "--adapter", "command", "--role", "adapter",
                           "--data-dir", str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "error: the command adapter has no command for: checkpoint, migrate, reschedule, delay, release." \
        in done.stderr
