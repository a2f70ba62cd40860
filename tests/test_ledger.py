"""The governor's ledger: every outcome answered from the ledger, reconcile after a crash, stale actions,
the operator's ``hpcguard ledger list|resolve``."""
import json
import multiprocessing
import os
import signal
import socket
import stat
import subprocess
import time

import pytest
from typer.testing import CliRunner

from hpcguard.cli import app
from hpcguard.connectors.adapters import CommandAdapter, DryRunAdapter, SimulatorAdapter
from hpcguard.connectors.governor import Governor, GovernorConfig, LedgerError, process_owner
from hpcguard.connectors.validation import validate_action
from hpcguard.settings import Settings

NO_LIMITS = dict(job_cooldown_s=0.0, node_cooldown_s=0.0, max_drained_fraction=1.0, total_nodes=100)
NOW = 1_800_000_000.0  # 2027-01-15


class Clock:
    def __init__(self, t=NOW):
        self.t = t

    def __call__(self):
        return self.t


def site_tool(tmp_path, exit_code=0, sleep_s=0):
    """A site executable that records each run (and its pid, so a test can kill it)."""
    exe = tmp_path / f"tool-{exit_code}-{sleep_s}"
    end = f"exec sleep {sleep_s}" if sleep_s else f"exit {exit_code}"  # exec: the pid written is the sleeper's
    exe.write_text(f"#!/bin/sh\necho \"$*\" >> {tmp_path}/runs.txt\necho $$ > {tmp_path}/tool.pid\n{end}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def runs(tmp_path):
    path = tmp_path / "runs.txt"
    return path.read_text().splitlines() if path.exists() else []


def drain(action_id, *nodes, **extra):
    return {"action_id": action_id, "kind": "drain", "nodes": list(nodes), "source": "policy",
            "reason": {"text": "fan failing"}, **extra}


def dead_owner():
    """The owner string of a process on this host that has exited."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}:gone"


def command_governor(tmp_path, exit_code=0, sleep_s=0, clock=None, **cfg):
    adapter = CommandAdapter({"drain": [site_tool(tmp_path, exit_code, sleep_s)]})
    return Governor(adapter, GovernorConfig(**{**NO_LIMITS, **cfg}), tmp_path / "ledger.sqlite", clock=clock or Clock())


@pytest.mark.parametrize("exit_code,limit,outcome", [(0, 10, "applied"), (3, 10, "skipped"), (1, 10, "failed"),
                                                     (0, 0, "refused")])
def test_redelivery_after_each_outcome_is_answered_from_the_ledger_never_rerun(tmp_path, exit_code, limit, outcome):
    gov = command_governor(tmp_path, exit_code, rate_limits={"drain": (limit, 3600.0)})
    first = gov.apply(drain("d1", "n1"))
    assert first.status == outcome
    executed = runs(tmp_path)
    assert len(executed) == (0 if outcome == "refused" else 1)
    gov.close()
    restarted = command_governor(tmp_path, 0, clock=Clock(NOW + 5))  # a fresh worker on the same ledger, tool fixed
    redeliveries = [restarted.apply(drain("d1", "n1")) for _ in range(3)]
    assert {a.status for a in redeliveries} == {"duplicate"}
    assert redeliveries[0].detail.startswith(f"already {outcome} at ")
    assert first.detail in redeliveries[0].detail  # the original outcome, in full
    assert len({json.dumps(a.as_dict(), sort_keys=True) for a in redeliveries}) == 1  # deterministic acks
    assert runs(tmp_path) == executed


def test_operator_transitions(tmp_path):
    gov = command_governor(tmp_path, exit_code=1)
    assert gov.apply(drain("f1", "n1")).status == "failed"
    ledger = gov.ledger
    with pytest.raises(LedgerError, match="failed: it can be resolved as retry, not 'applied'"):
        ledger.resolve("f1", "applied", NOW)
    with pytest.raises(LedgerError, match="no action 'nope'"):
        ledger.resolve("nope", "retry", NOW)
    assert ledger.resolve("f1", "retry", NOW, note="tool fixed")["status"] == "retry"
    gov.adapter = CommandAdapter({"drain": [site_tool(tmp_path, 0)]})
    assert gov.apply(drain("f1", "n1")).status == "applied"
    with pytest.raises(LedgerError, match="applied: it can be resolved as nothing"):
        ledger.resolve("f1", "retry", NOW)
    # an operator's "applied" for an unknown drain makes its node count against the ceiling
    ledger.claim(validate_action(drain("u1", "n5")), NOW, dead_owner(), str)
    assert ledger.finish("u1", "unknown", "lost", "command", NOW)
    assert "n5" in ledger.drained_nodes()  # unknown may hold the node: counted
    row = ledger.resolve("u1", "applied", NOW, note="scontrol shows n5 drained")
    assert row["status"] == "applied" and "resolved by operator as applied (was unknown: scontrol" in row["detail"]
    assert ledger.drained_nodes() == {"n1", "n5"}


def test_reconcile_finishes_interrupted_dry_run_rows(tmp_path):
    audit = tmp_path / "audit.jsonl"
    adapter = DryRunAdapter(str(audit))
    gov = Governor(adapter, GovernorConfig(**NO_LIMITS), tmp_path / "ledger.sqlite")
    recorded, lost = drain("rec", "n1"), drain("lost", "n2")
    for action in (recorded, lost):  # a worker claimed both, then died
        gov.ledger.claim(validate_action(action), time.time(), dead_owner(), str)
    adapter.apply(recorded)  # ... after the adapter recorded the first one
    acks = {a.action_id: a for a in gov.reconcile()}
    # the lost attempt did nothing, so it runs now (issue 58 item 3: it used to end `failed`, never run)
    assert (acks["rec"].status, acks["lost"].status) == ("would_apply", "would_apply")
    assert "would run: scontrol update NodeName=n1 State=DRAIN" in acks["rec"].detail
    assert "reconciled after an interrupted attempt" in acks["lost"].detail
    assert "stopped before doing anything" in acks["lost"].detail and "ran it now" in acks["lost"].detail
    assert gov.ledger.get("rec")["status"] == "would_apply" and gov.ledger.get("lost")["status"] == "would_apply"
    assert gov.reconcile() == []  # nothing left executing
    assert gov.apply(lost).status == "duplicate"  # each ran once: a redelivery runs neither again
    assert gov.apply(recorded).status == "duplicate"
    audited = [json.loads(line)["action"]["action_id"] for line in audit.read_text().splitlines()]
    assert sorted(audited) == ["lost", "rec"]  # each recorded exactly once


def test_reconcile_leaves_rows_of_live_workers_alone(tmp_path):
    clock = Clock()
    gov = Governor(SimulatorAdapter(total_nodes=8), GovernorConfig(**NO_LIMITS), tmp_path / "l.sqlite", clock=clock)
    gov.ledger.claim(validate_action(drain("mine", "n1")), NOW, process_owner(), str)  # in flight in this process
    gov.ledger.claim(validate_action(drain("remote", "n2")), NOW, "otherhost:42:abc", str)  # another host
    assert gov.reconcile() == []
    clock.t += gov.config.executing_timeout_s + 1  # the other host never finished: take it over
    (ack,) = gov.reconcile()
    assert (ack.action_id, ack.status) == ("remote", "failed") and "never received" in ack.detail
    assert gov.ledger.get("mine")["status"] == "executing"


def _apply_in_child(ledger_path, exe, action):
    gov = Governor(CommandAdapter({"drain": [exe]}), GovernorConfig(**NO_LIMITS), ledger_path)
    gov.apply(action)


def test_kill_9_inside_the_adapter_call_is_reconciled_not_stranded(tmp_path):
    exe = site_tool(tmp_path, sleep_s=60)
    ledger_path = tmp_path / "ledger.sqlite"
    child = multiprocessing.get_context("fork").Process(target=_apply_in_child,
                                                        args=(ledger_path, exe, drain("k1", "n3")))
    child.start()
    deadline = time.monotonic() + 30
    while not (tmp_path / "tool.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)  # the worker dies inside the adapter call
    os.kill(int((tmp_path / "tool.pid").read_text()), signal.SIGKILL)
    child.join()
    gov = Governor(CommandAdapter({"drain": [site_tool(tmp_path)]}), GovernorConfig(**NO_LIMITS), ledger_path)
    assert gov.ledger.get("k1")["status"] == "executing"
    (ack,) = gov.reconcile()  # the command adapter cannot tell whether the site tool finished
    assert ack.status == "unknown" and "hpcguard ledger resolve" in ack.detail
    assert "n3" in gov.ledger.drained_nodes()  # an unknown drain keeps its ceiling slot
    again = gov.apply(drain("k1", "n3"))
    assert again.status == "duplicate" and again.detail.startswith("already unknown")
    assert runs(tmp_path) == ["--action-id k1 --kind drain --nodes n3 --reason fan failing"]


@pytest.mark.parametrize("action,why", [
    (drain("s1", "n1", deadline=978307200.0), "stale: deadline 2001-01-01T00:00:00Z passed"),
    (drain("s2", "n1", deadline=NOW + 10 * 365 * 86400), "not a plausible prediction"),
    (drain("s3", "n1", time=NOW + 86400), "time 2027-01-16T08:00:00Z lies more than clock_skew_s"),
    (drain("s4", "n1", trigger_time=float("nan")), "trigger_time must be epoch seconds"),
])
def test_stale_and_far_future_actions_are_refused(tmp_path, action, why):
    gov = command_governor(tmp_path)
    ack = gov.apply(action)
    assert ack.status == "refused" and why in ack.detail
    assert runs(tmp_path) == []
    assert gov.apply(action).status == "duplicate"


def test_recent_deadline_runs_and_dry_run_adapter_replays_history(tmp_path):
    gov = command_governor(tmp_path)
    assert gov.apply(drain("r1", "n1", deadline=NOW - 600, time=NOW - 900)).status == "applied"
    replay = Governor(DryRunAdapter(str(tmp_path / "audit.jsonl")), GovernorConfig(), tmp_path / "dry.sqlite",
                      clock=Clock())
    assert replay.apply(drain("old", "n1", deadline=1679682800.0)).status == "would_apply"  # changes nothing: no stale


def test_site_ledger_path_is_absolute(tmp_path):
    assert os.path.isabs(Settings().adapter.ledger)
    relative = Settings().with_overrides(adapter={"ledger": "ledger.sqlite", "kind": "dry-run",
                                                  "audit_log": str(tmp_path / "a.jsonl")})
    with pytest.raises(LedgerError, match="adapter.ledger must be an absolute path"):
        Governor.from_settings(relative)


# ----------------------------------------------------------------------------- CLI
runner = CliRunner()


def cli(tmp_path, *args):
    return runner.invoke(app, list(args), env={"HPCGUARD_ADAPTER__LEDGER": str(tmp_path / "ledger.sqlite")})


def test_ledger_cli_lists_and_resolves(tmp_path):
    gov = command_governor(tmp_path, exit_code=1, clock=Clock(time.time()))
    gov.apply(drain("c-failed", "n1"))
    gov.ledger.claim(validate_action(drain("c-lost", "n2")), time.time(), dead_owner(), str)
    gov.reconcile()
    gov.close()
    res = cli(tmp_path, "ledger", "list", "--json")
    assert res.exit_code == 0, res.output
    rows = {r["action_id"]: r for r in json.loads(res.stdout)["rows"]}
    assert (rows["c-failed"]["status"], rows["c-lost"]["status"]) == ("failed", "unknown")
    assert rows["c-lost"]["action"]["nodes"] == ["n2"]
    res = cli(tmp_path, "ledger", "list", "--status", "unknown", "--json")
    assert [r["action_id"] for r in json.loads(res.stdout)["rows"]] == ["c-lost"]
    res = cli(tmp_path, "ledger", "list", "--status", "unknown")
    assert res.exit_code == 0 and "c-lost" in res.stdout and "c-failed" not in res.stdout
    res = cli(tmp_path, "ledger", "resolve", "c-lost", "--as", "failed", "--note", "node was never drained", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["status"] == "failed"
    res = cli(tmp_path, "ledger", "resolve", "c-failed", "--as", "retry")
    assert res.exit_code == 0 and res.stdout.startswith("c-failed: retry")
    res = cli(tmp_path, "ledger", "resolve", "c-failed", "--as", "applied")
    assert res.exit_code == 2 and "error: action c-failed is retry" in res.output
    res = cli(tmp_path, "ledger", "list", "--status", "bogus")
    assert res.exit_code == 2 and "unknown status 'bogus'" in res.output
    res = runner.invoke(app, ["ledger", "list"], env={"HPCGUARD_ADAPTER__LEDGER": str(tmp_path / "none.sqlite")})
    assert res.exit_code == 2 and "no ledger at" in res.output
