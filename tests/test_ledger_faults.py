"""Kill -9 of a worker part-way through a stream of actions, restart, redeliver everything:
no action is executed twice and none is lost without a record.

The worker applies actions through the governor and the dry-run adapter (whose audit log
records each execution); it is killed once 25 %, 50 % and 75 % of them ran; the restarted
worker reconciles, then every action is delivered again (offsets committed far behind).
"""
import collections
import json
import multiprocessing
import os
import signal
import time

import pytest

from hpcguard.connectors.adapters import DryRunAdapter
from hpcguard.connectors.governor import Governor, GovernorConfig

ACTIONS = 300
CONFIG = dict(rate_limits={}, job_cooldown_s=0.0, node_cooldown_s=0.0)


def action(i):
    return {"action_id": f"ckpt-{i}", "kind": "checkpoint", "job_id": str(1000 + i), "nodes": [f"n{i % 16}"],
            "source": "policy", "reason": {"text": "predicted failure"}}


def _apply_all(ledger, audit):
    gov = Governor(DryRunAdapter(audit), GovernorConfig(**CONFIG), ledger)
    for i in range(ACTIONS):
        gov.apply(action(i))


def audit_lines(audit):
    if not os.path.exists(audit):
        return []
    with open(audit, encoding="utf-8") as fh:
        return [line for line in fh if line.endswith("\n")]


@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.75])
def test_kill_9_then_full_redelivery_executes_each_action_at_most_once(tmp_path, fraction):
    ledger, audit = str(tmp_path / "ledger.sqlite"), str(tmp_path / "audit.jsonl")
    child = multiprocessing.get_context("fork").Process(target=_apply_all, args=(ledger, audit))
    child.start()
    deadline = time.monotonic() + 120
    while len(audit_lines(audit)) < fraction * ACTIONS and child.is_alive() and time.monotonic() < deadline:
        time.sleep(0.002)
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    before = len(audit_lines(audit))
    assert 0 < before < ACTIONS  # killed part-way

    restarted = Governor(DryRunAdapter(audit), GovernorConfig(**CONFIG), ledger)
    reconciled = {a.action_id: a.status for a in restarted.reconcile()}
    assert set(reconciled.values()) <= {"would_apply", "failed"}  # the dry-run adapter can always tell
    acks = [restarted.apply(action(i)) for i in range(ACTIONS)]  # everything again, from the start
    again = [restarted.apply(action(i)) for i in range(ACTIONS)]  # and once more

    executed = collections.Counter(json.loads(line)["action"]["action_id"] for line in audit_lines(audit))
    assert max(executed.values()) == 1  # nothing ran twice
    statuses = {a.action_id: a.status for a in acks}
    for i in range(ACTIONS):
        aid = action(i)["action_id"]
        row = restarted.ledger.get(aid)
        # every id either ran exactly once, or is recorded as an interrupted attempt that did nothing
        assert executed[aid] == 1 or (row["status"] == "failed" and reconciled.get(aid) == "failed"), aid
    assert sum(s == "duplicate" for s in statuses.values()) >= before  # those that ran before the kill
    assert {a.status for a in again} == {"duplicate"}
    # a redelivery's ack is the same every time
    assert all(a.as_dict() == b.as_dict() for a, b in zip(acks, again) if a.status == "duplicate")
