"""The pipeline runner's supervisor (``simulators/pipeline_run.Supervisor``): a worker killed during a benchmark is
started again, as systemd's ``Restart=always`` would, and what it consumed before still counts."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

from hpcguard.simulators import pipeline_run


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)


def test_a_killed_worker_is_restarted_and_its_counters_carry_over(monkeypatch):
    lives = {"n": 0}
    restarted = threading.Event()

    def scrape(port):  # each life of worker 0 reports its own count; worker 1 a steady one
        return {"in": {"raw": 100.0 * (lives["n"] + 1) if port == 1 else 7.0}, "out": {}, "samples": {}, "live": {}}

    def restart(i):
        lives["n"] += 1
        restarted.set()
        return sleeper(), 1

    monkeypatch.setattr(pipeline_run, "scrape_counters", scrape)
    workers = [(sleeper(), 1), (sleeper(), 2)]
    first = workers[0][0]
    supervisor = pipeline_run.Supervisor(workers, restart, every_s=0.05)
    supervisor.start()
    try:
        while 0 not in supervisor.seen:  # it has read worker 0's counters once
            threading.Event().wait(0.05)
        os.killpg(first.pid, signal.SIGKILL)
        assert restarted.wait(10)
        while workers[0][0] is first:  # replaced right after the restart returns
            threading.Event().wait(0.01)
        assert workers[0][0].poll() is None
        assert [(i, rc) for _, i, rc in supervisor.restarts] == [(0, -signal.SIGKILL)]
        assert supervisor.carried_counters()["in"] == {"raw": 100.0}  # the first life's count, kept
    finally:
        supervisor.stop()
        pipeline_run.stop_workers(workers)
    assert all(proc.poll() is not None for proc, _ in workers)


def test_the_drain_waits_until_the_outputs_stop_changing_and_counts_a_dead_workers_records(monkeypatch):
    """``wait_for_drain`` returns once every replayed record was consumed and the counters held still for a poll,
    with the time they last changed; what a killed worker consumed (kept by the supervisor) still counts."""
    polls = iter([10.0, 20.0, 20.0, 20.0])
    monkeypatch.setattr(pipeline_run, "scrape_counters", lambda port: {
        "in": {"raw": next(polls, 20.0)}, "out": {}, "samples": {}, "live": {}})
    topics = pipeline_run.TopicNames.from_settings(pipeline_run.Settings().topics)
    supervisor = SimpleNamespace(carried_counters=lambda: {"in": {"raw": 80.0}})
    proc = SimpleNamespace(poll=lambda: 1, returncode=1)  # exited: the supervisor, not the drain, handles it
    started = time.time()
    changed_at, counters = pipeline_run.wait_for_drain([(proc, 1)], topics, {"raw": 100}, 30.0, supervisor=supervisor)
    assert counters["in"]["raw"] == 100.0  # 80 carried + 20 of the live worker
    assert list(polls) == [20.0]  # drained at the second poll, returned at the third: the counters held still
    assert started + 1.5 < changed_at <= time.time() - 0.9  # the second poll's time: the last change
