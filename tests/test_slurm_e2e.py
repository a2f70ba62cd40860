"""End to end on a real Slurm: a predicted failure on the node of a running Slurm job
leads, through the broker, to the job being checkpointed and requeued off the drained node.

The node → job map comes from the real controller (``SlurmPoller``), the node samples
show a failing fan on the job's node, the worker's baseline warns, ``models.policy``
decides ``migrate`` (a spare node is free) and the Slurm adapter behind the governor
drains the node, signals the job and requeues it.
"""
import time

import numpy as np
import pytest

from _pipeline import HEALTHY, WorkerProcess, baseline_model

pytestmark = [pytest.mark.slurm, pytest.mark.broker]

TRAP_SCRIPT = """#!/bin/bash
trap 'echo "got-USR1 restart=${SLURM_RESTART_COUNT:-0}" >> {out}/signals' USR1
echo "start restart=${SLURM_RESTART_COUNT:-0} node=$SLURMD_NODENAME" >> {out}/starts
while true; do sleep 0.2; done
"""


@pytest.fixture
def cluster(slurm_cluster):
    slurm_cluster.reset_nodes()
    yield slurm_cluster
    slurm_cluster.reset_nodes()


def node_samples(nodes, t0, minutes, failing, fail_from_min):
    rng = np.random.default_rng(5)
    out = []
    for k in range(int(minutes * 4)):
        t = t0 + 15 * k
        for node in nodes:
            values = {s: v * (1 + 0.01 * rng.standard_normal()) for s, v in HEALTHY.items()}
            if node == failing and k >= fail_from_min * 4:
                values["cpu_fan_rpm"] *= 0.3
                values["cpu_temp"] += 30
            out.append((node, {"node": node, "time": t, "source": "ipmi", "values": values, "v": 1}))
    return out


def test_predicted_failure_requeues_real_job_off_drained_node(cluster, kafka_settings, tmp_path):
    from hpcguard.connectors.slurm import SlurmRunner
    from hpcguard.connectors.slurm_poller import SlurmPoller

    out = tmp_path / "job"
    out.mkdir()
    job = cluster.sbatch(TRAP_SCRIPT.replace("{out}", str(out)), "--requeue")
    cluster.wait_for(lambda: (out / "starts").exists(), timeout=30, what=f"job {job} to start")
    node = cluster.job_field(job, "NodeList")

    model = baseline_model(tmp_path / "model")
    governor = tmp_path / "governor.toml"
    governor.write_text("max_drained_fraction = 0.5\n")
    env = {"SLURM_CONF": str(cluster.conf), "HPCGUARD_ADAPTER__GOVERNOR_CONFIG": str(governor),
           "HPCGUARD_ADAPTER__MIGRATE_GRACE_S": "1", "HPCGUARD_ADAPTER__SLURM_CONF": str(cluster.conf),
           "HPCGUARD_WORKER__GRID_SOURCES": "ipmi"}  # only IPMI samples: no OS source to wait idle_s for
    events = [e for e in SlurmPoller(SlurmRunner(slurm_conf=str(cluster.conf))).poll() if e.get("job_id")]
    assert any(e["job_id"] == job and e["event"] == "start" and e["nodes"] == [node] for e in events)

    with WorkerProcess(kafka_settings, tmp_path, model, roles=["windows", "jobs", "decide", "adapter"],
                       extra=["--adapter", "slurm"], env=env) as w:
        w.produce(w.topics.jobs, [(e["job_id"], {**e, "v": 1}) for e in events])
        w.wait_for(w.topics.node_jobs, lambda r: any(e["job_id"] == job for e in r))
        # stream times around the job's start, as live telemetry would be: the warning's sample time must
        # fall inside the job's run (the decision joins the job running at that event time)
        start = next(e.get("start_time") or e["time"] for e in events if e["job_id"] == job and e["event"] == "start")
        t0 = min(start, time.time()) - 6 * 60
        # the poller's word that every job event up to the samples' end is out: no decision waits job_wait_s
        w.produce(w.topics.jobs, [("", {"event": "progress", "time": t0 + 10 * 60, "v": 1})])
        w.produce(w.topics.samples_ipmi, node_samples(cluster.nodes, t0, 10, node, fail_from_min=7))
        acks = w.wait_for(w.topics.acks, lambda r: len(r) >= 1, timeout_s=180)
        actions = w.wait_for(w.topics.actions, lambda r: len(r) >= 1)

    assert [(a["kind"], a["job_id"], a["nodes"]) for a in actions] == [("migrate", job, [node])]
    assert acks[0]["status"] == "applied", acks[0]
    assert f"hpcguard {actions[0]['action_id']}" in cluster.node_line(node)  # drained with our reason
    assert "DRAIN" in cluster.node_line(node)
    assert (out / "signals").read_text().startswith("got-USR1")  # the checkpoint signal reached the job
    assert int(cluster.job_field(job, "Restarts") or 0) >= 1  # requeued
    state = cluster.job_field(job, "JobState")
    assert state in ("PENDING", "REQUEUED", "RUNNING", "CONFIGURING"), state
    if state == "RUNNING":  # a drained node takes no job: if it runs again, it runs elsewhere
        assert cluster.job_field(job, "NodeList") != node


def test_poll_slurm_feeds_the_workers_jobs_and_labels(cluster, kafka_settings, tmp_path):
    """``hpcguard poll-slurm`` against the real controller: the running job reaches the worker's node→job
    map, a node an operator marks DOWN for a hardware reason becomes a failure label (and its return
    closes it), hpcguard's own drain gives none, and SIGTERM ends the poller with its report."""
    import json
    import os
    import signal
    import subprocess
    import sys

    out = tmp_path / "job"
    out.mkdir()
    job = cluster.sbatch(TRAP_SCRIPT.replace("{out}", str(out)))
    cluster.wait_for(lambda: (out / "starts").exists(), timeout=30, what=f"job {job} to start")
    job_node = cluster.job_field(job, "NodeList")
    down, ours = [n for n in cluster.nodes if n != job_node][:2]
    poller = None
    try:
        with WorkerProcess(kafka_settings, tmp_path, roles=["jobs"]) as w:
            poller = subprocess.Popen(
                [sys.executable, "-m", "hpcguard", "poll-slurm", "--bootstrap", kafka_settings.bootstrap, "--prefix",
                 w.prefix, "--slurm-conf", str(cluster.conf), "--interval", "1", "--json"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **w.env})
            w.wait_for(w.topics.node_jobs, lambda r: any(e["job_id"] == job and e["event"] == "start" for e in r))
            # the poller polls now: a DOWN set before it started could end (ReturnToService, slurmd registering
            # within seconds) before its first poll on a loaded box, and no label would come
            cluster.run("scontrol", "update", f"NodeName={down}", "State=DOWN", "Reason=fan failure, ticket 7")
            cluster.run("scontrol", "update", f"NodeName={ours}", "State=DRAIN",
                        "Reason=hpcguard act-00f1: predicted failure")
            labels = w.wait_for(w.topics.labels, lambda r: any(x["node"] == down for x in r))
            # back to service (the fixture's ReturnToService may already have done it when its slurmd registered)
            cluster.run("scontrol", "update", f"NodeName={down}", "State=RESUME", check=False)
            closed = w.wait_for(w.topics.jobs, lambda r: any(e.get("event") == "node-state" and e["nodes"] == [down]
                                                             and e.get("end_time") for e in r))
            labels = w.wait_for(w.topics.labels, lambda r: sum(x["node"] == down for x in r) >= 2)
            poller.send_signal(signal.SIGTERM)
            stdout, stderr = poller.communicate(timeout=30)
    finally:
        if poller is not None and poller.poll() is None:
            poller.kill()
        cluster.run("scontrol", "update", f"NodeName={down},{ours}", "State=RESUME", check=False)
    assert poller.returncode == 0, stderr
    report = json.loads(stdout)
    assert report["published"]["start"] >= 1 and report["published"]["progress"] >= 2 and report["undelivered"] == 0
    (first, again) = [x for x in labels if x["node"] == down][:2]
    assert (first["source"], first["stopped"], first["until"]) == ("event", True, None)
    assert again["label_id"] == first["label_id"] and again["until"] >= first["time"]  # the same episode, closed
    assert not [x for x in labels if x["node"] == ours]  # hpcguard's drain is not Slurm's word of a failure
    ends = [e for e in closed if e.get("event") == "node-state" and e["nodes"] == [down]]
    assert ends[0]["state"].startswith("DOWN") and "fan failure" in ends[0]["reason"]
