"""Through the real broker: two workers on a 4-partition topic set decide exactly what one
worker decides (the same action ids, kinds, jobs and nodes)."""
import uuid

import pytest

from _pipeline import WorkerProcess, baseline_model
from test_pipeline_actions import T0, samples

pytestmark = [pytest.mark.broker, pytest.mark.slow]

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
