"""A broker kill -9 and restart at the size issue 58 reported it not to settle (16 nodes, S3-backed tansu).

A 16-node, 2-hour recording is replayed at 60× real time through a supervised ``hpcguard
worker`` (tests/_fault_harness.py), once clean and once with the broker killed with -9 at half
of the clean run's predictions and started again on the same S3 storage.  Required: 0 lost and
0 duplicated predictions, actions, acks and executions; no worker exit at all (a stall exit
is a recovery that did not settle on its own); the next output within 60 s of the restart.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from _fault_harness import FaultRun, Outcome, check_fault, simulated_recording, write_report
from hpcguard.connectors.broker import EmbeddedBroker, LocalS3

pytestmark = [pytest.mark.faults, pytest.mark.broker, pytest.mark.slow]

NODES = "n[001-016]"
SPEED = 60.0
RECOVERY_S = 60.0  # issue 58: bounded recovery, the next output within a minute of the restart
GOVERNOR = Path(os.environ.get("TMPDIR", "/tmp")) / f"hpcguard-faults-at-size-governor-{os.getpid()}.toml"
ENV = {"HPCGUARD_DOOR__NODES": NODES, "HPCGUARD_ADAPTER__GOVERNOR_CONFIG": str(GOVERNOR)}


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> tuple[Path, str]:
    return simulated_recording(tmp_path_factory.mktemp("at-size"), 16, 2, 58, 8, GOVERNOR)


@pytest.fixture(scope="module")
def s3_broker(tmp_path_factory):
    logs = tmp_path_factory.mktemp("at-size-broker")
    with LocalS3(log_path=str(logs / "s3.log")) as s3, \
            EmbeddedBroker(storage=s3.storage_url, env=s3.tansu_env(), log_path=str(logs / "broker.log")) as b:
        yield b


def test_broker_restart_at_size_settles_within_a_minute(s3_broker, recording, tmp_path):
    data, model = recording
    with FaultRun(s3_broker.bootstrap, data, model, tmp_path / "clean", SPEED, ENV) as run:
        run.start_replay()
        run.settle()
        clean: Outcome = run.outcome()
    assert clean.exits == [], f"the clean run's worker exited: {clean.exits}\n{run.log_tail()}"
    assert len(clean.records["predictions"]) > 16 * 100, "the clean run must predict every node"
    with FaultRun(s3_broker.bootstrap, data, model, tmp_path / "run", SPEED, ENV) as run:
        run.start_replay()
        assert run.wait_outputs("predictions", len(clean.records["predictions"]) // 2), "the fault came too late"
        s3_broker.restart(kill=True)  # kill -9, start again on the same port and storage
        run.mark_recovery()
        run.settle()
        out = run.outcome()
    write_report("broker restart at 16 nodes", {"recovery_s": out.recoveries_s, "exits": out.exits})
    check_fault("broker kill -9 + restart, 16 nodes", run, out, clean,
           "kill -9 of the broker at 50 % of a 16-node replay, restart on S3 storage")
    assert out.recoveries_s and all(r <= RECOVERY_S for r in out.recoveries_s), \
        f"recovery {out.recoveries_s} s, over {RECOVERY_S:.0f} s\n{run.log_tail()}"
