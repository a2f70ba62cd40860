"""Slurm adapter, poller and governor against a real slurmctld (fixture ``slurm_cluster``).

Parsing tests run everywhere; the rest need root and Debian's slurm-wlm + munge
(``.ci/slurm-setup.sh``) and skip without them unless CI is set.
"""
import json
import os
import shlex
import time
from pathlib import Path

import pytest

from hpcguard.connectors.governor import Governor, GovernorConfig
from hpcguard.connectors.slurm import (CommandResult, SlurmAdapter, SlurmRunner, parse_kv_line, parse_sinfo_text,
                                       parse_squeue_json, parse_squeue_text, parse_time_limit, planned_commands)
from hpcguard.connectors.validation import ValidationError
from hpcguard.connectors.slurm_poller import SlurmPoller

OPEN = dict(job_cooldown_s=0.0, node_cooldown_s=0.0, max_drained_fraction=1.0)

pytestmark = pytest.mark.slurm  # the run's one Slurm cluster: make test runs these in one process


# ----------------------------------------------------------------------------- parsing (no Slurm needed)
def test_parse_kv_line_keeps_spaces_in_values():
    row = parse_kv_line("NodeName=n1 OS=Linux 6.1 #1 SMP  RealMemory=500 State=IDLE+DRAIN "
                        "CfgTRES=cpu=1,mem=500M Reason=hpcguard a1: fan failing [root@2026-01-01T00:00:00]")
    assert row["OS"] == "Linux 6.1 #1 SMP" and row["State"] == "IDLE+DRAIN" and row["CfgTRES"] == "cpu=1,mem=500M"
    assert row["Reason"] == "hpcguard a1: fan failing [root@2026-01-01T00:00:00]"


@pytest.mark.parametrize("text,seconds", [("UNLIMITED", None), ("30", 1800.0), ("05:00", 300.0),
                                          ("1:00:00", 3600.0), ("2-01:00:00", 176400.0), ("1-02", 93600.0),
                                          ("1-02:30", 95400.0)])
def test_parse_time_limit(text, seconds):
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize("text", ["1:2:3:4", "abc", "1-x"])
def test_parse_time_limit_rejects_garbage(text):
    with pytest.raises(ValueError):
        parse_time_limit(text)


def test_squeue_json_and_text_agree():
    js = json.dumps({"jobs": [{"job_id": 12, "job_state": "RUNNING", "nodes": "n[1-2]", "node_count": 2,
                               "user_name": "alice", "partition": "debug", "name": "a|b", "time_limit": 5,
                               "submit_time": 100, "start_time": 110, "end_time": 410, "restart_cnt": 1,
                               "state_reason": "None", "array_task_id": None}]})
    (j,) = parse_squeue_json(js)
    assert (j["job_id"], j["nodes"], j["time_limit_s"], j["restarts"]) == ("12", ["n1", "n2"], 300.0, 1)
    (t,) = parse_squeue_text("12|RUNNING|alice|debug|n[1-2]|5:00|2026-01-01T00:00:00|2026-01-01T00:00:10|"
                             "2026-01-01T00:05:10|2|None|a|b")
    assert {k: t[k] for k in ("job_id", "state", "nodes", "user", "partition", "time_limit_s", "num_nodes", "name")} \
        == {k: j[k] for k in ("job_id", "state", "nodes", "user", "partition", "time_limit_s", "num_nodes", "name")}
    assert t["end_time"] - t["start_time"] == 300.0


def test_sinfo_text_flags():
    nodes = parse_sinfo_text("n1|idle|none\nn2|drained|hpcguard a: fan\nn3|idle*|none\nn4|mixed+drain|x\nn1|idle|none")
    assert [n["name"] for n in nodes] == ["n1", "n2", "n3", "n4"]
    assert "DRAIN" in nodes[1]["flags"] and "NOT_RESPONDING" in nodes[2]["flags"] and "DRAIN" in nodes[3]["flags"]


class FakeSlurm(SlurmRunner):
    """A scheduler in memory: answers ``scontrol show``, applies the commands that change state, records them."""

    def __init__(self, job_state: str = "RUNNING", priority: int = 100, drained: dict | None = None):
        super().__init__(bin_dir="/nonexistent")
        self.job = {"JobId": "42", "JobState": job_state, "Priority": str(priority), "Restarts": "0",
                    "NodeList": "n1", "UserId": "alice(1000)", "Partition": "debug"}
        self.drained = dict(drained or {})  # node → reason
        self.ran: list[list[str]] = []

    def run(self, tool, *args):
        argv = [tool, *args]
        if argv[:2] == ["scontrol", "show"]:
            if args[1] == "job":
                return CommandResult(argv, 0, " ".join(f"{k}={v}" for k, v in self.job.items()))
            rows = [f"NodeName={n} State={'IDLE+DRAIN' if n in self.drained else 'IDLE'} "
                    f"Reason={self.drained.get(n, 'none')}" for n in args[3].split(",")]
            return CommandResult(argv, 0, "\n".join(rows))
        self.ran.append(argv)
        if tool == "scontrol" and args[0] == "update":
            nodes = args[1].split("=", 1)[1].split(",")
            for n in nodes:
                if args[2] == "State=DRAIN":
                    self.drained[n] = args[3].split("=", 1)[1]
                else:
                    self.drained.pop(n, None)
        elif tool == "scontrol" and args[0] in ("requeue", "requeuehold"):
            self.job.update(JobState="PENDING", Restarts=str(int(self.job["Restarts"]) + 1),
                            Priority="0" if args[0] == "requeuehold" else self.job["Priority"])
        elif tool == "scontrol" and args[0] in ("hold", "release"):
            self.job["Priority"] = "0" if args[0] == "hold" else "100"
        return CommandResult(argv, 0)


@pytest.mark.parametrize("kind,extra,fake", [
    ("checkpoint", {"job_id": "42", "nodes": ["n1"]}, {}),
    ("drain", {"nodes": ["n1", "n2"]}, {}),
    ("resume", {"nodes": ["n1"]}, {"drained": {"n1": "hpcguard d0: fan"}}),
    ("migrate", {"job_id": "42", "nodes": ["n1"]}, {}),
    ("reschedule", {"job_id": "42"}, {}),
    ("reschedule", {"job_id": "42", "reason": {"hold": True}}, {}),
    ("delay", {"job_id": "42"}, {"job_state": "PENDING"}),
    ("release", {"job_id": "42"}, {"job_state": "PENDING", "priority": 0}),
])
@pytest.mark.parametrize("scope,signal", [("batch", "USR1"), ("full", "SIGUSR2"), ("steps", "10")])
def test_the_adapter_runs_exactly_the_planned_commands(kind, extra, fake, scope, signal):
    """The dry-run plan (``planned_commands``) and a real run cannot diverge: the adapter runs those argv lists."""
    from hpcguard.connectors.adapters import DryRunAdapter

    action = {"action_id": "a7", "kind": kind, **extra}
    runner = FakeSlurm(**fake)
    adapter = SlurmAdapter(runner, checkpoint_signal=signal, signal_scope=scope, migrate_grace_s=30,
                           sleep=lambda s: None)
    plan = adapter.plan(action)
    assert plan == planned_commands(action, checkpoint_signal=signal, signal_scope=scope)
    ack = adapter.apply(action)
    assert ack.status == "applied", ack.detail
    assert runner.ran == plan
    assert all(f"$ {' '.join(argv)}  (rc=0)" in ack.output for argv in plan)
    dry = DryRunAdapter(os.devnull, checkpoint_signal=signal, signal_scope=scope).apply(action)
    assert dry.status == "would_apply" and dry.detail.startswith(
        "dry-run: would run: " + "; ".join(shlex.join(argv) for argv in plan))


def test_planned_commands_for_each_kind():
    def plan(kind, **fields):
        return planned_commands({"action_id": "a1", "kind": kind, **fields}, checkpoint_signal="USR1",
                                signal_scope="batch")

    assert plan("checkpoint", job_id="4086", nodes=["n1"]) == [["scancel", "--signal=USR1", "--batch", "4086"]]
    assert plan("drain", nodes=["n1", "n2"], reason={"text": "fan"}) == [
        ["scontrol", "update", "NodeName=n1,n2", "State=DRAIN", "Reason=hpcguard a1: fan"]]
    assert plan("drain", nodes=["n1"], source="policy") == [
        ["scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=hpcguard a1: policy drain"]]
    assert plan("resume", nodes=["n1"]) == [["scontrol", "update", "NodeName=n1", "State=RESUME"]]
    assert plan("reschedule", job_id="7") == [["scontrol", "requeue", "7"]]
    assert plan("reschedule", job_id="7", reason={"hold": True}) == [["scontrol", "requeuehold", "7"]]
    assert plan("delay", job_id="7") == [["scontrol", "hold", "7"]]
    assert plan("release", job_id="7") == [["scontrol", "release", "7"]]
    assert plan("migrate", job_id="7") == [["scancel", "--signal=USR1", "--batch", "7"], ["scontrol", "requeue", "7"]]
    assert planned_commands({"action_id": "a1", "kind": "migrate", "job_id": "7", "nodes": ["n1", "n2"]},
                            migrate_hook="/site/live-migrate", signal_scope="steps")[1:] == [
        ["scancel", "--signal=USR1", "7"], ["/site/live-migrate", "7", "n1", "n2"]]
    with pytest.raises(ValidationError):
        plan("drain", nodes=["n1;touch pwned"])
    with pytest.raises(ValidationError):
        plan("checkpoint")  # no job id


def test_fixture_explains_why_it_cannot_start(monkeypatch):
    import _slurm_fixture

    monkeypatch.setattr(_slurm_fixture.os, "geteuid", lambda: 0)
    monkeypatch.setattr(_slurm_fixture.shutil, "which", lambda name: None if name == "slurmd" else "/usr/bin/" + name)
    assert "missing binaries slurmd" in _slurm_fixture.missing_requirements()
    assert ".ci/slurm-setup.sh" in _slurm_fixture.missing_requirements()


# ----------------------------------------------------------------------------- real Slurm
@pytest.fixture
def cluster(slurm_cluster):
    slurm_cluster.reset_nodes()
    yield slurm_cluster
    slurm_cluster.reset_nodes()


@pytest.fixture
def adapter(cluster):
    return SlurmAdapter(slurm_conf=str(cluster.conf), migrate_grace_s=1.0, timeout_s=20)


def governor(adapter, tmp_path, **cfg):
    return Governor(adapter, GovernorConfig(**{**OPEN, **cfg}), tmp_path / "ledger.sqlite")


TRAP_SCRIPT = """#!/bin/bash
trap 'echo "got-USR1 restart=${SLURM_RESTART_COUNT:-0}" >> {out}/signals' USR1
echo "start restart=${SLURM_RESTART_COUNT:-0} node=$SLURMD_NODENAME" >> {out}/starts
while true; do sleep 0.2; done
"""


def submit_trap_job(cluster, out: Path, *options: str) -> str:
    out.mkdir(parents=True, exist_ok=True)
    job = cluster.sbatch(TRAP_SCRIPT.replace("{out}", str(out)), "--requeue", *options)
    cluster.wait_for(lambda: (out / "starts").exists(), timeout=30, what=f"job {job} to start")
    return job


def restart_now(cluster, job: str, old_node: str) -> None:
    """Slurm gives a requeued job a begin time ~2 min ahead; make it eligible now once it is pending.

    The old node is excluded: its slurmd refuses to relaunch a job id it has just killed
    (the reason for Slurm's own delay).
    """
    cluster.wait_for(lambda: cluster.job_field(job, "JobState") == "PENDING", timeout=30, what=f"job {job} pending")
    cluster.run("scontrol", "update", f"JobId={job}", "StartTime=now", f"ExcNodeList={old_node}")


def job_debug(cluster, job: str) -> str:
    """What a timed-out wait shows: the job, the nodes and the controller's log tail."""
    log = cluster.root / "log" / "slurmctld.log"
    return (f"job {job} to restart:\n{cluster.run('scontrol', 'show', 'job', job, check=False).stdout}"
            f"{cluster.run('sinfo', '-N', check=False).stdout}{log.read_text()[-3000:] if log.exists() else ''}")


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_fixture_started_a_real_cluster(cluster):
    info = cluster.run("sinfo", "-h", "-N", "-o", "%N %T").stdout.split()
    assert info[0::2] == cluster.nodes and set(info[1::2]) == {"idle"}
    assert cluster.startup_s > 0


def test_drain_and_resume_change_node_state_with_reason(cluster, adapter, tmp_path):
    gov = governor(adapter, tmp_path)
    ack = gov.apply({"action_id": "drain-n2", "kind": "drain", "nodes": ["n2", "n3"],
                     "reason": {"text": "predicted PSU failure"}})
    assert ack.status == "applied", ack.detail
    assert "scontrol update NodeName=n2,n3 State=DRAIN" in ack.output
    for node in ("n2", "n3"):
        line = cluster.node_line(node)
        assert "DRAIN" in line and "Reason=hpcguard drain-n2: predicted PSU failure" in line
    again = gov.apply({"action_id": "drain-n2b", "kind": "drain", "nodes": ["n2"]})
    assert again.status == "skipped" and "already drained" in again.detail
    ack = gov.apply({"action_id": "resume-n2", "kind": "resume", "nodes": ["n2", "n3"]})
    assert ack.status == "applied", ack.detail
    assert "DRAIN" not in cluster.node_line("n2") and "DRAIN" not in cluster.node_line("n3")
    assert gov.ledger.drained_nodes() == set()


def test_resume_leaves_nodes_drained_by_operators_alone(cluster, adapter, tmp_path):
    cluster.run("scontrol", "update", "NodeName=n4", "State=DRAIN", "Reason=bad DIMM ticket 123")
    ack = governor(adapter, tmp_path).apply({"action_id": "r4", "kind": "resume", "nodes": ["n4"]})
    assert ack.status == "refused" and "not drained by hpcguard" in ack.detail
    assert "Reason=bad DIMM ticket 123" in cluster.node_line("n4")


def test_checkpoint_signal_reaches_the_job_script(cluster, adapter, tmp_path):
    out = tmp_path / "job"
    job = submit_trap_job(cluster, out)
    ack = governor(adapter, tmp_path).apply({"action_id": "ckpt-1", "kind": "checkpoint", "job_id": job,
                                             "source": "failure-ensemble"})
    assert ack.status == "applied", ack.detail
    assert f"scancel --signal=USR1 --batch {job}" in ack.output and "RUNNING" in ack.detail
    cluster.wait_for(lambda: lines(out / "signals"), timeout=15, what="the USR1 trap to fire")
    assert lines(out / "signals") == ["got-USR1 restart=0"]
    assert cluster.job_field(job, "JobState") == "RUNNING"


def test_checkpoint_of_a_pending_job_is_skipped(cluster, adapter, tmp_path):
    job = cluster.sbatch("#!/bin/bash\nsleep 60\n", "--begin=now+3600")
    ack = governor(adapter, tmp_path).apply({"action_id": "ckpt-p", "kind": "checkpoint", "job_id": job})
    assert ack.status == "skipped" and "PENDING" in ack.detail and ack.output == ""


def test_reschedule_requeues_and_the_job_restarts(cluster, adapter, tmp_path):
    out = tmp_path / "job"
    job = submit_trap_job(cluster, out)
    node = cluster.job_field(job, "NodeList")
    ack = governor(adapter, tmp_path).apply({"action_id": "resched-1", "kind": "reschedule", "job_id": job})
    assert ack.status == "applied", ack.detail
    assert f"scontrol requeue {job}" in ack.output and "Restarts 0→1" in ack.detail
    restart_now(cluster, job, node)
    cluster.wait_for(lambda: len(lines(out / "starts")) == 2, timeout=40, what=lambda: job_debug(cluster, job))
    assert lines(out / "starts")[1].startswith("start restart=1")


def test_reschedule_with_hold_keeps_the_job_pending(cluster, adapter, tmp_path):
    out = tmp_path / "job"
    job = submit_trap_job(cluster, out)
    ack = governor(adapter, tmp_path).apply({"action_id": "resched-h", "kind": "reschedule", "job_id": job,
                                             "reason": {"hold": True}})
    assert ack.status == "applied", ack.detail
    assert f"scontrol requeuehold {job}" in ack.output and cluster.job_field(job, "Priority") == "0"


def test_hold_and_release_a_pending_job(cluster, adapter, tmp_path):
    job = cluster.sbatch("#!/bin/bash\nsleep 60\n", "--begin=now+3600")
    gov = governor(adapter, tmp_path)
    ack = gov.apply({"action_id": "delay-1", "kind": "delay", "job_id": job, "source": "canario"})
    assert ack.status == "applied", ack.detail
    assert cluster.job_field(job, "Priority") == "0" and cluster.job_field(job, "Reason").startswith("JobHeld")
    ack = gov.apply({"action_id": "release-1", "kind": "release", "job_id": job, "source": "canario"})
    assert ack.status == "applied", ack.detail
    assert int(cluster.job_field(job, "Priority")) > 0 and cluster.job_field(job, "JobState") == "PENDING"
    assert gov.apply({"action_id": "release-2", "kind": "release", "job_id": job}).status == "skipped"


def test_migrate_drains_signals_and_requeues_off_the_node(cluster, adapter, tmp_path):
    out = tmp_path / "job"
    job = submit_trap_job(cluster, out)
    node = cluster.job_field(job, "NodeList")
    ack = governor(adapter, tmp_path).apply({"action_id": "mig-1", "kind": "migrate", "job_id": job, "nodes": [node],
                                             "source": "failure-ensemble", "reason": {"text": "predicted failure"}})
    assert ack.status == "applied", ack.detail
    assert [line.split("  (rc")[0] for line in ack.output.splitlines() if line.startswith("$")] == [
        f"$ scontrol update NodeName={node} State=DRAIN Reason=hpcguard mig-1: predicted failure",
        f"$ scancel --signal=USR1 --batch {job}", f"$ scontrol requeue {job}"]
    assert lines(out / "signals") == ["got-USR1 restart=0"]
    assert "DRAIN" in cluster.node_line(node)
    restart_now(cluster, job, node)
    cluster.wait_for(lambda: len(lines(out / "starts")) == 2, timeout=40, what=lambda: job_debug(cluster, job))
    assert f"node={node}" not in lines(out / "starts")[1]


def test_duplicates_do_not_reexecute_even_with_a_fresh_governor(cluster, adapter, tmp_path):
    action = {"action_id": "dup-1", "kind": "drain", "nodes": ["n1"], "reason": {"text": "fan"}}
    assert governor(adapter, tmp_path).apply(action).status == "applied"
    cluster.run("scontrol", "update", "NodeName=n1", "State=RESUME")  # an operator undoes it
    for gov in (governor(adapter, tmp_path), governor(SlurmAdapter(slurm_conf=str(cluster.conf)), tmp_path)):
        ack = gov.apply(action)
        assert ack.status == "duplicate" and ack.output == ""
    assert "DRAIN" not in cluster.node_line("n1")


@pytest.mark.parametrize("action", [
    {"action_id": "h1", "kind": "drain", "nodes": ["n1;scontrol update NodeName=n2 State=DRAIN Reason=pwned"]},
    {"action_id": "h2", "kind": "drain", "nodes": ["n1"], "reason": {"text": "x State=RESUME"}},
    {"action_id": "h3", "kind": "checkpoint", "job_id": "1 --full"},
    {"action_id": "h4", "kind": "reschedule", "job_id": "$(scontrol update NodeName=n2 State=DRAIN Reason=pwned)"},
    {"action_id": "h5", "kind": "drain", "nodes": ["n1\nn2"]},
    {"action_id": "h6", "kind": "drain", "nodes": ["-h"]},
])
def test_hostile_actions_run_nothing(cluster, adapter, tmp_path, action):
    assert adapter.apply(action).status == "refused"
    ack = governor(adapter, tmp_path).apply(action)
    assert ack.status == "refused" and "invalid action" in ack.detail and ack.output == ""
    states = cluster.run("sinfo", "-h", "-N", "-o", "%N %T").stdout.split()
    assert set(states[1::2]) == {"idle"}


def test_governor_drain_ceiling_uses_the_clusters_size(cluster, adapter, tmp_path):
    gov = governor(adapter, tmp_path, max_drained_fraction=0.25)  # 1 of 4 nodes
    assert gov.apply({"action_id": "c1", "kind": "drain", "nodes": ["n1"]}).status == "applied"
    ack = gov.apply({"action_id": "c2", "kind": "drain", "nodes": ["n2"]})
    assert ack.status == "refused" and "drain ceiling: 2 of 4" in ack.detail
    assert "DRAIN" not in cluster.node_line("n2")


def test_governor_partition_and_user_lists_read_the_job_from_slurm(cluster, adapter, tmp_path):
    job = cluster.sbatch("#!/bin/bash\nsleep 60\n", "--begin=now+3600")
    denied = governor(adapter, tmp_path, deny_users=("root",)).apply(
        {"action_id": "u1", "kind": "delay", "job_id": job})
    assert denied.status == "refused" and "user 'root'" in denied.detail
    other = governor(adapter, tmp_path / "b", allow_partitions=("gpu",)).apply(
        {"action_id": "u2", "kind": "delay", "job_id": job})
    assert other.status == "refused" and "partition 'debug'" in other.detail
    assert cluster.job_field(job, "Priority") != "0"


def test_poller_reports_start_requeue_end_and_node_sets(cluster, adapter, tmp_path):
    poller = SlurmPoller(SlurmRunner(slurm_conf=str(cluster.conf)))
    first = poller.poll()
    assert {e["event"] for e in first} == {"idle-nodes", "drained-nodes"}
    out = tmp_path / "job"
    job = submit_trap_job(cluster, out, "--time=10")
    adapter.apply({"action_id": "p-d", "kind": "drain", "nodes": ["n4"] if "n4" not in
                   cluster.job_field(job, "NodeList") else ["n3"]})
    events = poller.poll()
    (start,) = [e for e in events if e["event"] == "start"]
    assert (start["job_id"], start["nodes"], start["time_limit_s"]) == (job, [cluster.job_field(job, "NodeList")],
                                                                        600.0)
    sets = {e["event"]: set(e["nodes"]) for e in events if e["job_id"] == ""}
    assert len(sets["drained-nodes"]) == 1 and len(sets["idle-nodes"]) == 2
    adapter.apply({"action_id": "p-r", "kind": "reschedule", "job_id": job})
    assert "requeue" in [e["event"] for e in poller.poll() if e["job_id"] == job]
    cluster.run("scancel", job)
    cluster.wait_for(lambda: any(e["event"] == "end" and e["job_id"] == job for e in poller.poll()), timeout=20,
                     what="the end event")


def test_checkpoint_through_the_broker_exactly_once(cluster, kafka_settings, tmp_path):
    """An action on the actions topic reaches the job via ``hpcguard worker --adapter slurm``; a replay is a duplicate."""
    from _pipeline import WorkerProcess

    out = tmp_path / "job"
    job = submit_trap_job(cluster, out)
    action = {"action_id": f"e2e-{job}", "kind": "checkpoint", "job_id": job,
              "nodes": [cluster.job_field(job, "NodeList")], "source": "failure-ensemble",
              "reason": {"lead_minutes": 5.0}, "time": time.time(), "v": 1}
    env = {"SLURM_CONF": str(cluster.conf), "HPCGUARD_ADAPTER__LEDGER": str(tmp_path / "ledger.sqlite")}
    with WorkerProcess(kafka_settings, tmp_path, roles=("adapter",), extra=["--adapter", "slurm"], env=env) as w:
        w.produce(w.topics.actions, [(job, action)])
        acks = w.wait_for(w.topics.acks, lambda r: len(r) >= 1, timeout_s=120)
        assert acks[0]["status"] == "applied", acks[0]
        cluster.wait_for(lambda: lines(out / "signals"), timeout=15, what="the USR1 trap to fire")
        w.produce(w.topics.actions, [(job, action)])  # redelivery / replay
        acks = w.wait_for(w.topics.acks, lambda r: len(r) >= 2, timeout_s=60)
    assert [a["status"] for a in acks] == ["applied", "duplicate"]
    assert lines(out / "signals") == ["got-USR1 restart=0"]


# ----------------------------------------------------------------------------- reconcile after a crash
def _migrate_in_child(conf, ledger_path, action):
    slow = SlurmAdapter(slurm_conf=conf, migrate_grace_s=120.0, timeout_s=20)  # killed during this grace period
    governor(slow, ledger_path.parent).apply(action)


def killed_during_migrate_grace(cluster, tmp_path, action_id):
    """A worker runs a migrate and is killed (SIGKILL) after the drain and the signal, in the grace period."""
    import multiprocessing
    import os
    import signal

    out = tmp_path / "job"
    job = submit_trap_job(cluster, out)
    node = cluster.job_field(job, "NodeList")
    action = {"action_id": action_id, "kind": "migrate", "job_id": job, "nodes": [node],
              "source": "failure-ensemble", "reason": {"text": "predicted failure"}}
    child = multiprocessing.get_context("fork").Process(target=_migrate_in_child,
                                                        args=(str(cluster.conf), tmp_path / "ledger.sqlite", action))
    child.start()
    cluster.wait_for(lambda: lines(out / "signals"), timeout=30, what="the checkpoint signal")
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    assert f"Reason=hpcguard {action_id}: predicted failure" in cluster.node_line(node)
    assert cluster.job_field(job, "JobState") == "RUNNING" and cluster.job_field(job, "Restarts") == "0"
    return job, node, action, out


def test_reconcile_completes_a_migrate_killed_in_its_grace_period(cluster, adapter, tmp_path):
    job, node, action, out = killed_during_migrate_grace(cluster, tmp_path, "mig-k1")
    gov = governor(adapter, tmp_path)
    assert gov.ledger.get("mig-k1")["status"] == "executing"
    (ack,) = gov.reconcile()
    assert ack.status == "applied", ack.detail
    assert "completed the interrupted migrate" in ack.detail and f"$ scontrol requeue {job}" in ack.output
    assert int(cluster.job_field(job, "Restarts")) == 1 and "DRAIN" in cluster.node_line(node)
    assert gov.ledger.get("mig-k1")["status"] == "applied" and node in gov.ledger.drained_nodes()
    assert gov.apply(action).status == "duplicate"
    assert lines(out / "signals") == ["got-USR1 restart=0"]  # signalled once, never again


@pytest.mark.parametrize("admin_redrains", [False, True])
def test_reconcile_undoes_only_its_own_drain_when_the_job_is_gone(cluster, adapter, tmp_path, admin_redrains):
    job, node, action, _ = killed_during_migrate_grace(cluster, tmp_path, "mig-k2")
    cluster.run("scancel", job)
    cluster.wait_for(lambda: cluster.job_field(job, "JobState") in ("CANCELLED", "COMPLETING", ""), timeout=20,
                     what=f"job {job} cancelled")
    if admin_redrains:  # an administrator took the node over meanwhile: hpcguard must leave it drained
        cluster.run("scontrol", "update", f"NodeName={node}", "Reason=admin maintenance")
    (ack,) = governor(adapter, tmp_path).reconcile()
    assert ack.status == "failed", ack.detail
    if admin_redrains:
        assert "no node carries this action's drain" in ack.detail
        assert "DRAIN" in cluster.node_line(node) and "admin maintenance" in cluster.node_line(node)
    else:
        assert f"undid this action's drain of {node}" in ack.detail
        cluster.wait_for(lambda: "DRAIN" not in cluster.node_line(node), timeout=10, what=f"{node} resumed")


def test_reconcile_reads_drains_back_from_slurm(cluster, adapter, tmp_path):
    import socket
    import subprocess

    from hpcguard.connectors.validation import validate_action

    gone = subprocess.Popen(["true"])
    gone.wait()
    owner = f"{socket.gethostname()}:{gone.pid}:x"
    gov = governor(adapter, tmp_path)
    done = {"action_id": "dr-done", "kind": "drain", "nodes": ["n3"], "reason": {"text": "fan"}}
    lost = {"action_id": "dr-lost", "kind": "drain", "nodes": ["n4"], "reason": {"text": "fan"}}
    for action in (done, lost):
        gov.ledger.claim(validate_action(action), 0.0, owner, str)
    cluster.run("scontrol", "update", "NodeName=n3", "State=DRAIN", "Reason=hpcguard dr-done: fan")  # ran, then crash
    acks = {a.action_id: a for a in gov.reconcile()}
    assert acks["dr-done"].status == "applied" and acks["dr-lost"].status == "failed"
    assert "DRAIN" not in cluster.node_line("n4")
    assert gov.ledger.drained_nodes() == {"n3"}
