"""Site-wide limits: 8 processes on one real SQLite ledger file never exceed a limit.

Each process opens the (fresh) ledger at the same moment and applies drains through a real
site executable; the executable's own log counts what actually ran.
"""
import multiprocessing
import stat

import pytest

from hpcguard.connectors.adapters import CommandAdapter
from hpcguard.connectors.governor import Governor, GovernorConfig

PROCESSES = 8


def _worker(ledger_path, exe, cfg, index, per_process, barrier, results):
    barrier.wait()  # all open the fresh ledger at once
    gov = Governor(CommandAdapter({"drain": [exe]}), GovernorConfig(**cfg), ledger_path)
    for k in range(per_process):
        ack = gov.apply({"action_id": f"p{index}-d{k}", "kind": "drain", "nodes": [f"n{index * per_process + k}"]})
        results.put((ack.action_id, ack.status, ack.detail))
    gov.close()


def run_processes(tmp_path, cfg, per_process=2):
    log = tmp_path / "drains.txt"
    exe = tmp_path / "site-drain"
    exe.write_text(f"#!/bin/sh\nsleep 0.05\necho \"$*\" >> {log}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(tmp_path / "ledger.sqlite", str(exe), cfg, i, per_process, barrier,
                                               results)) for i in range(PROCESSES)]
    for p in procs:
        p.start()
    acks = [results.get(timeout=120) for _ in range(PROCESSES * per_process)]
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * PROCESSES  # nobody failed to open the ledger ("database is locked")
    executed = log.read_text().splitlines() if log.exists() else []
    return acks, executed


BASE = dict(job_cooldown_s=0.0, node_cooldown_s=0.0, total_nodes=10)


@pytest.mark.parametrize("round_", range(3))
def test_drain_ceiling_of_one_node_holds_across_8_processes(tmp_path, round_):
    cfg = {**BASE, "max_drained_fraction": 0.1, "rate_limits": {"drain": (3, 3600.0)}}
    acks, executed = run_processes(tmp_path, cfg)
    applied = [a for a in acks if a[1] == "applied"]
    assert len(applied) == 1 and len(executed) == 1
    refused = [a for a in acks if a[1] == "refused"]
    assert len(refused) == PROCESSES * 2 - 1 and all("drain ceiling" in a[2] for a in refused)


@pytest.mark.parametrize("round_", range(3))
def test_rate_limit_of_three_holds_across_8_processes(tmp_path, round_):
    cfg = {**BASE, "total_nodes": 100, "max_drained_fraction": 1.0, "rate_limits": {"drain": (3, 3600.0)}}
    acks, executed = run_processes(tmp_path, cfg)
    assert sum(a[1] == "applied" for a in acks) == 3 and len(executed) == 3
    assert all("rate limit for drain" in a[2] for a in acks if a[1] != "applied")
