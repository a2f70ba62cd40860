"""Exactly-once acks and executions across a crash: the command adapter's verify step finishes interrupted
rows, and a redelivered action record is answered from the ledger (no second execution, no second ack)."""
import sqlite3
import stat

import pytest

from hpcguard.connectors.adapters import CommandAdapter, make_adapter
from hpcguard.connectors.governor import Governor, GovernorConfig, Ledger
from hpcguard.connectors.validation import validate_action
from hpcguard.settings import Settings
from test_ledger import NO_LIMITS, NOW, Clock, dead_owner, drain, runs, site_tool


def verify_tool(tmp_path, exit_code):
    exe = tmp_path / f"verify-{exit_code}"
    exe.write_text(f"#!/bin/sh\necho \"verify $*\" >> {tmp_path}/verified.txt\nexit {exit_code}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe)


def interrupted(tmp_path, action):
    """A ledger row left ``executing`` by a worker killed inside the adapter call."""
    Ledger(tmp_path / "ledger.sqlite").claim(validate_action(action), NOW - 60, dead_owner(), lambda: "",
                                             source="actions:0:5")


def governor(tmp_path, verify=None, clock=None):
    adapter = CommandAdapter({"drain": [site_tool(tmp_path)]}, verify=verify)
    return Governor(adapter, GovernorConfig(**NO_LIMITS), tmp_path / "ledger.sqlite", clock=clock or Clock())


@pytest.mark.parametrize("exit_code,status,ran", [(0, "applied", 0), (1, "applied", 1), (3, "skipped", 0),
                                                  (2, "unknown", 0)])
def test_the_verify_command_finishes_an_interrupted_row(tmp_path, exit_code, status, ran):
    interrupted(tmp_path, drain("k1", "n3"))
    gov = governor(tmp_path, {"drain": [verify_tool(tmp_path, exit_code), "{action_id}", "{nodes}"]})
    (ack,) = gov.reconcile()
    assert (ack.status, gov.ledger.get("k1")["status"]) == (status, status)
    assert (tmp_path / "verified.txt").read_text() == "verify k1 n3\n"  # argv from validated fields, no shell
    assert len(runs(tmp_path)) == ran  # exit 1: no effect, so reconcile runs the action (its first execution)
    if exit_code == 1:
        assert "ran it now" in ack.detail
    if status == "unknown":
        assert "exited 2" in ack.detail and "hpcguard ledger resolve" in ack.detail
    assert gov.reconcile() == []


def test_without_a_verify_command_the_row_stays_unknown_with_the_reason(tmp_path):
    interrupted(tmp_path, drain("k1", "n3"))
    (ack,) = governor(tmp_path).reconcile()
    assert ack.status == "unknown" and "no verify command configured for drain" in ack.detail
    assert runs(tmp_path) == []


def test_a_stale_action_is_not_run_again_after_the_crash(tmp_path):
    interrupted(tmp_path, drain("k1", "n3", deadline=NOW - 7200))
    gov = governor(tmp_path, {"drain": [verify_tool(tmp_path, 1)]})
    (ack,) = gov.reconcile()
    assert ack.status == "failed" and "stale" in ack.detail and runs(tmp_path) == []


def test_verify_commands_are_checked_like_commands(tmp_path):
    with pytest.raises(ValueError, match="verify command for 'drain' must start with an absolute path"):
        CommandAdapter({"drain": [site_tool(tmp_path)]}, verify={"drain": ["verify-it"]})
    with pytest.raises(ValueError, match="bad placeholder"):
        CommandAdapter({"drain": [site_tool(tmp_path)]}, verify={"drain": [verify_tool(tmp_path, 0), "{nodes!r}"]})


def test_verify_commands_come_from_the_settings(tmp_path):
    s = Settings()
    s.adapter.commands = {k: [] for k in ("checkpoint", "migrate", "reschedule", "delay", "release", "resume")}
    s.adapter.commands["drain"] = [site_tool(tmp_path)]
    s.adapter.verify = {"drain": [verify_tool(tmp_path, 0), "{action_id}"]}
    adapter = make_adapter("command", s)
    assert adapter.verify(drain("v1", "n1"), NOW).status == "applied"


def test_a_redelivered_record_is_answered_from_the_ledger_once(tmp_path):
    gov = governor(tmp_path)
    assert gov.apply(drain("a1", "n1"), source="actions:0:7").status == "applied"
    ack, delivered = gov.redelivery("a1", "actions:0:7")  # killed before the ack was delivered: it is owed
    assert (ack.status, delivered) == ("applied", False)
    gov.acknowledged(["a1"])
    assert gov.redelivery("a1", "actions:0:7")[1] is True  # delivered: nothing to send again
    assert gov.redelivery("a1", "actions:1:7") is None  # another record with the same id: a new request
    assert gov.apply(drain("a1", "n1"), source="actions:1:7").status == "duplicate"
    assert len(runs(tmp_path)) == 1


def test_a_ledger_written_before_the_source_and_acked_columns_is_upgraded(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE actions (action_id TEXT PRIMARY KEY, kind TEXT NOT NULL, job_id TEXT, nodes TEXT NOT "
               "NULL, status TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '', adapter TEXT NOT NULL DEFAULT '', "
               "attempts INTEGER NOT NULL DEFAULT 1, claimed REAL NOT NULL, finished REAL)")
    db.execute("INSERT INTO actions VALUES ('old', 'drain', NULL, '[\"n1\"]', 'applied', '', 'command', 1, 1.0, 2.0)")
    db.commit()
    db.close()
    row = Ledger(path).get("old")
    assert (row["status"], row["source"], row["acked"], row["owner"]) == ("applied", "", 0, "")
