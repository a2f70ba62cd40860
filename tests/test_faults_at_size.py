"""A broker kill -9 and restart at the size issue 58 reported it not to settle (16 nodes, S3-backed tansu).

A 16-node, 2-hour recording is replayed at 60× real time through a supervised ``hpcguard
worker`` (tests/_fault_harness.py), once clean and once with the broker killed with -9 at half
of the clean run's predictions and started again on the same S3 storage.  Required: 0 lost and
0 duplicated predictions, actions, acks and executions; no worker exit at all (a stall exit
is a recovery that did not settle on its own); the next output within 60 s of the restart.

Why the replay lingers 500 ms (``kafka.replay_linger_ms``): tansu's S3 engine stores each record
batch as one object and lists a partition's objects on every fetch, so a read slows as the batches
grow in number (issue 58).  With the default 20 ms a 60× replay of 16 nodes wrote ~16 records per
batch and the LDMS reader fell behind for good; 500 ms makes ~450.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from _fault_harness import FaultRun, Outcome, check_fault, write_report
from hpcguard.connectors.broker import EmbeddedBroker, LocalS3

pytestmark = [pytest.mark.faults, pytest.mark.broker, pytest.mark.slow]

NODES = "n[001-016]"
SPEED = 60.0
RECOVERY_S = 60.0  # issue 58: bounded recovery, the next output within a minute of the restart
SETTLE_S = 1500.0  # replay (2 min) plus the worker's catching up on a loaded 2-core box (6-11 min measured)


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> tuple[Path, str, dict[str, str]]:
    root = tmp_path_factory.mktemp("at-size")
    hpc = [sys.executable, "-m", "hpcguard"]
    subprocess.run(hpc + ["simulate", "telemetry", "--nodes", "16", "--hours", "2", "--seed", "58", "--mtbf-hours",
                          "8", "--precursor-fraction", "1", "--out", str(root / "data")], check=True,
                   capture_output=True)
    subprocess.run(hpc + ["simulate", "telemetry", "--nodes", "8", "--hours", "3", "--seed", "99", "--out",
                          str(root / "history")], check=True, capture_output=True)
    subprocess.run(hpc + ["train", "baseline", "--data", str(root / "history"), "--out", str(root / "model")],
                   check=True, capture_output=True)
    governor = root / "governor.toml"
    governor.write_text("stale_grace_s = 1e10\ntotal_nodes = 16\nmax_drained_fraction = 1.0\n")
    env = {"HPCGUARD_DOOR__NODES": NODES, "HPCGUARD_ADAPTER__GOVERNOR_CONFIG": str(governor),
           "HPCGUARD_KAFKA__REPLAY_LINGER_MS": "500"}
    return root / "data", str(root / "model"), env


@pytest.fixture(scope="module")
def s3_broker(tmp_path_factory):
    logs = tmp_path_factory.mktemp("at-size-broker")
    with LocalS3(log_path=str(logs / "s3.log")) as s3, \
            EmbeddedBroker(storage=s3.storage_url, env=s3.tansu_env(), log_path=str(logs / "broker.log")) as b:
        yield b


@pytest.mark.timeout(3 * SETTLE_S)
def test_broker_restart_at_size_settles_within_a_minute(s3_broker, recording, tmp_path):
    data, model, env = recording
    with FaultRun(s3_broker.bootstrap, data, model, tmp_path / "clean", SPEED, env) as run:
        run.start_replay()
        run.settle(timeout_s=SETTLE_S)
        clean: Outcome = run.outcome()
    assert clean.exits == [], f"the clean run's worker exited: {clean.exits}\n{run.log_tail()}"
    assert len(clean.records["predictions"]) > 16 * 100, "the clean run must predict every node"
    with FaultRun(s3_broker.bootstrap, data, model, tmp_path / "run", SPEED, env) as run:
        run.start_replay()
        assert run.wait_outputs("predictions", len(clean.records["predictions"]) // 2, SETTLE_S), \
            "the fault came too late"
        s3_broker.restart(kill=True)  # kill -9, start again on the same port and storage
        run.mark_recovery()
        run.settle(timeout_s=SETTLE_S)
        out = run.outcome()
    write_report("broker restart at 16 nodes", {"recovery_s": out.recoveries_s, "exits": out.exits})
    check_fault("broker kill -9 + restart, 16 nodes", run, out, clean,
                "kill -9 of the broker at 50 % of a 16-node replay, restart on S3 storage")
    assert out.recoveries_s and all(r <= RECOVERY_S for r in out.recoveries_s), \
        f"recovery {out.recoveries_s} s, over {RECOVERY_S:.0f} s\n{run.log_tail()}"
