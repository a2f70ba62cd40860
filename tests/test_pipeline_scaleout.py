"""Through the real broker: two workers on a 4-partition topic set decide exactly what one
worker decides (the same action ids, kinds, jobs and nodes; the same IO windows, CanarIO
verdicts and IO actions)."""
import uuid

import numpy as np
import pytest

from _pipeline import WorkerProcess, baseline_model
from test_pipeline_actions import T0, samples

pytestmark = [pytest.mark.broker, pytest.mark.slow, pytest.mark.faults]  # multi-worker determinism: make test-faults

NODES = [f"n{i}" for i in range(1, 9)]
FAILING = {"n2": 8, "n5": 9, "n7": 9}  # node → minute its fan starts failing
ENV = {"HPCGUARD_WORKER__GRID_SOURCES": "ipmi", "HPCGUARD_WORKER__JOB_WAIT_S": "3"}


def feed():
    jobs = [("42", {"job_id": "42", "event": "start", "time": T0, "nodes": ["n2"], "num_nodes": 1, "v": 1}),
            ("43", {"job_id": "43", "event": "start", "time": T0, "nodes": ["n5", "n6"], "num_nodes": 2, "v": 1}),
            ("43", {"job_id": "43", "event": "end", "time": T0 + 5 * 60, "nodes": ["n5", "n6"], "v": 1}),
            ("44", {"job_id": "44", "event": "start", "time": T0 + 5 * 60, "nodes": ["n5"], "num_nodes": 1,
                    "v": 1})]
    jobs += [(str(j), {"job_id": str(j), "event": "submit", "time": T0 + 30 * 60, "v": 1}) for j in range(50, 58)]
    telemetry = sorted([kv for n in NODES for kv in samples(n, 14, fan_drop_from=FAILING.get(n))],
                       key=lambda kv: kv[1]["time"])
    return jobs, telemetry


def run(kafka_settings, tmp_path, model, workers):
    prefix = f"s{uuid.uuid4().hex[:8]}"
    for i in range(workers):
        (tmp_path / f"w{i}").mkdir(parents=True)
    procs = [WorkerProcess(kafka_settings, tmp_path / f"w{i}", model, roles=["windows", "jobs", "decide"],
                           env=ENV, prefix=prefix, partitions=4) for i in range(workers)]
    for p in procs:
        p.__enter__()
    try:
        jobs, telemetry = feed()
        w = procs[0]
        w.produce(w.topics.jobs, jobs)
        w.produce(w.topics.samples_ipmi, telemetry)
        actions = w.wait_for(w.topics.actions, lambda r: len(r) >= len(FAILING), timeout_s=240)
    finally:
        for p in procs:
            p.__exit__(None, None, None)
    return sorted((a["action_id"], a["kind"], a["job_id"], tuple(a["nodes"]), a["time"]) for a in actions)


def test_two_workers_decide_what_one_worker_decides(kafka_settings, tmp_path):
    model = baseline_model(tmp_path / "model")
    one = run(kafka_settings, tmp_path / "one", model, 1)
    two = run(kafka_settings, tmp_path / "two", model, 2)
    assert one == two
    by_node = {a[3][0]: a for a in one}
    assert by_node["n2"][2] == "42"  # the job running at the warning
    assert by_node["n5"][2] == "44"  # job 43 had ended on n5 before its warning; job 44 ran there
    assert by_node["n7"][1] == "drain" and by_node["n7"][2] is None  # idle node


# -- CanarIO: a file system's windows, probe labels and detector have one owner ---------------
IO_NODES, IO_HOURS, IO_STEP_S = ("n1", "n2", "n3"), 6, 4  # a step within the LDMS decoder's counter gap
IO_T0 = 1_700_000_040.0  # a whole minute: windows end on the minute
IO_ENV = {"HPCGUARD_WORKER__IO_INITIAL_BANK_H": "1.5", "HPCGUARD_WORKER__PROBE_BASELINE_RUNS": "2",
          "HPCGUARD_WORKER__JOB_WAIT_S": "3", "HPCGUARD_WORKER__IDLE_S": "600",
          "HPCGUARD_DOOR__NODES": ",".join(IO_NODES)}  # the IO windows wait for each node, whoever normalizes it


def slowdown(t):
    """PFS slowdown: an episode the detector learns from (late probe labels) and one to detect."""
    t = np.asarray(t, float)
    return np.where(((t >= 2.0 * 3600) & (t < 2.5 * 3600)) | ((t >= 4.0 * 3600) & (t < 5.0 * 3600)), 3.0, 1.0)


def io_feed(topics):
    """Raw LDMS lustre_client rows keyed by node (as LDMS sends them), probes keyed by probe, queued jobs."""
    rng = np.random.default_rng(8)
    t = np.arange(0.0, IO_HOURS * 3600.0, IO_STEP_S)
    rows = []
    for i, node in enumerate(IO_NODES):
        read = 2.5e8 * rng.lognormal(0.0, 0.2 + 0.4 * (slowdown(t) > 1), t.size) / slowdown(t)
        write = 1e8 * rng.lognormal(0.0, 0.1, t.size) / slowdown(t)
        cum_r, cum_w = np.cumsum(read * IO_STEP_S), np.cumsum(write * IO_STEP_S)
        rows += [(IO_T0 + t[k], (node, {"timestamp": float(IO_T0 + t[k]), "component_id": i + 1, "ProducerName": node,
                                         "job_id": 0, "read_bytes": float(cum_r[k]), "write_bytes": float(cum_w[k])}))
                 for k in range(t.size)]
    ends = np.arange(600.0, IO_HOURS * 3600.0, 300.0)
    runtime = 600.0 * np.array([slowdown(np.arange(e - 600.0, e)).mean() for e in ends])
    probes = [(IO_T0 + e, (f"p{k}", {"probe_id": f"p{k}", "probe_type": "probe-1", "start": float(IO_T0 + e - r),
                                     "end": float(IO_T0 + e), "runtime_s": float(r), "v": 1}))
              for k, (e, r) in enumerate(zip(ends, runtime))]
    script = "#!/bin/bash\n#SBATCH -N 2\nsrun ./ior -w -t 1m -b 16g -F /p/lustre1/out\n"
    jobs = [(str(j), {"job_id": str(j), "event": "submit", "time": IO_T0 + 3.5 * 3600, "num_nodes": 2,
                      "script": script, "v": 1}) for j in (71, 72)]
    jobs.append(("73", {"job_id": "73", "event": "submit", "time": IO_T0 + IO_HOURS * 3600, "v": 1}))
    timed = sorted([(ts, topics.ldms[0], kv) for ts, kv in rows] + [(ts, topics.probes, kv) for ts, kv in probes],
                   key=lambda x: x[0])
    return jobs, [(topic, kv) for _, topic, kv in timed]


def released(actions) -> bool:
    """Every IO-sensitive queued job (71, 72) was delayed and, as often, released: the last action is out."""
    kinds = {j: [a["kind"] for a in sorted(actions, key=lambda a: a["time"]) if a.get("job_id") == j]
             for j in ("71", "72")}
    return all(k and k[-1] == "release" and len(k) % 2 == 0 for k in kinds.values())


def run_io(kafka_settings, tmp_path, workers):
    prefix = f"io{uuid.uuid4().hex[:8]}"
    procs = []
    for i in range(workers):
        (tmp_path / f"w{i}").mkdir(parents=True)
        procs.append(WorkerProcess(kafka_settings, tmp_path / f"w{i}", roles=["normalize", "io", "jobs"],
                                   env=IO_ENV, prefix=prefix, partitions=4))
    for p in procs:
        p.__enter__()
    try:
        w = procs[0]
        jobs, telemetry = io_feed(w.topics)
        w.produce(w.topics.jobs, jobs)
        w.produce_many(telemetry)
        windows = w.wait_for(w.topics.io_degradation, lambda r: len(r) >= IO_HOURS * 60 - 1, timeout_s=300)
        # a window's actions follow its verdict: wait until each held job's last action is its release
        actions = w.wait_for(w.topics.actions, released, timeout_s=60)
        dead = w.wait_for(w.topics.dlq, lambda r: True, timeout_s=5)
    finally:
        for p in procs:
            p.__exit__(None, None, None)
    verdicts = sorted((x["window_end"], x["degraded"], x["probability"], tuple(sorted(x["features"].items())))
                      for x in windows)
    return verdicts, sorted((a["time"], a["action_id"], a["kind"], a["job_id"]) for a in actions), dead


def test_two_workers_judge_the_file_system_as_one_worker(kafka_settings, tmp_path):
    one, one_actions, one_dead = run_io(kafka_settings, tmp_path / "one", 1)
    two, two_actions, two_dead = run_io(kafka_settings, tmp_path / "two", 2)
    assert one_dead == two_dead == []  # no sample judged late, none lost
    assert len(one) == IO_HOURS * 60 - 1 and [v[0] for v in one] == [IO_T0 + 60.0 * (k + 1) for k in range(len(one))]
    degraded = np.array([v[0] - IO_T0 for v in one if v[1]])
    assert ((degraded > 4.0 * 3600) & (degraded <= 5.0 * 3600 + 120)).sum() > 30  # the second episode
    assert two == one
    assert two_actions == one_actions
    for job in ("71", "72"):  # the IO-sensitive queue is held while degraded and released after
        kinds = [k for _, _, k, j in one_actions if j == job]
        assert kinds[:2] == ["delay", "release"] and len(kinds) % 2 == 0
