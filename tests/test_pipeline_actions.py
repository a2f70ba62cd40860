"""Through the real broker: canonical samples → windows → prediction → action → ack."""
import json

import numpy as np
import pytest

from _pipeline import HEALTHY, WorkerProcess, baseline_model

pytestmark = pytest.mark.broker

T0 = 1_700_000_000.0


@pytest.fixture
def baseline_dir(tmp_path):
    return baseline_model(tmp_path / "model")


def samples(node, minutes, fan_drop_from=None):
    rng = np.random.default_rng(hash(node) % 2**32)
    out = []
    for k in range(int(minutes * 4)):
        t = T0 + 15 * k
        values = {s: v * (1 + 0.01 * rng.standard_normal()) for s, v in HEALTHY.items()}
        if fan_drop_from is not None and t >= T0 + 60 * fan_drop_from:
            values["cpu_fan_rpm"] *= 0.4
            values["cpu_temp"] += 25
        out.append((node, {"node": node, "time": t, "source": "ipmi", "values": values, "v": 1}))
    return out


def test_failing_nodes_lead_to_migrate_and_drain(kafka_settings, tmp_path, baseline_dir):
    """n2 runs job 42 and fails with a spare node free → migrate; idle n3 fails → drain."""
    with WorkerProcess(kafka_settings, tmp_path, baseline_dir, roles=["windows", "jobs", "decide", "adapter"],
                       env={"HPCGUARD_WORKER__GRID_SOURCES": "ipmi"}) as w:
        t = w.topics
        # job 42 runs on n2 from T0; job 43 starts on n3 only after n3's warning; job 44's submit moves the
        # job stream's clock past the warnings, so the decisions need not wait for it
        w.produce(t.jobs, [("42", {"job_id": "42", "event": "start", "time": T0, "nodes": ["n2"], "num_nodes": 1,
                                   "v": 1}),
                           ("43", {"job_id": "43", "event": "start", "time": T0 + 20 * 60, "nodes": ["n3"], "v": 1}),
                           ("44", {"job_id": "44", "event": "submit", "time": T0 + 30 * 60, "v": 1})])
        w.wait_for(t.node_jobs, lambda r: len(r) >= 1)
        # a malformed sample and a foreign schema version go to the dead-letter topic, the worker goes on
        w.produce(t.samples_ipmi, [("n9", b"{not json"), ("n9", {"node": "n9", "time": T0, "source": "ipmi",
                                                                 "values": {"cpu_temp": 1.0}, "v": 99})])
        feed = sorted(samples("n1", 12) + samples("n2", 12, fan_drop_from=8) + samples("n3", 12, fan_drop_from=9),
                      key=lambda kv: kv[1]["time"])
        w.produce(t.samples_ipmi, feed)
        acks = w.wait_for(t.acks, lambda r: len(r) >= 2)
        actions = w.wait_for(t.actions, lambda r: len(r) >= 2)
        preds = w.wait_for(t.predictions, lambda r: any(p["node"] == "n1" for p in r))
        dead = w.wait_for(t.dlq, lambda r: len(r) >= 2)

    kinds = {a["kind"]: a for a in actions}
    assert set(kinds) == {"migrate", "drain"}
    assert kinds["migrate"]["job_id"] == "42" and kinds["migrate"]["nodes"] == ["n2"]
    assert kinds["migrate"]["reason"]["branch"] == "migrate:lead>=migration"
    assert kinds["migrate"]["reason"]["expected_node_hours_saved"] > 0
    assert kinds["drain"]["nodes"] == ["n3"] and kinds["drain"]["job_id"] is None
    assert all(a["trigger_time"] for a in actions)
    assert kinds["migrate"]["time"] == first_warn_of(preds, "n2")  # event time, not the wall clock
    assert "job_join" not in kinds["migrate"]["reason"]
    assert {a["status"] for a in acks} == {"would_apply"}  # dry-run adapter: the plan, with its Slurm commands
    by_id = {a["action_id"]: a for a in acks}
    assert "scancel --signal=USR1 --batch 42; scontrol requeue 42" in by_id[kinds["migrate"]["action_id"]]["detail"]
    assert {a["action_id"] for a in acks} == {a["action_id"] for a in actions}
    assert not [p for p in preds if p["node"] == "n1" and p["warn"]]  # the healthy node is never warned
    first_warn = first_warn_of(preds, "n2")
    assert T0 + 8 * 60 <= first_warn <= T0 + 11 * 60
    assert {d["error_kind"] for d in dead} == {"bad_json", "out_of_range"}
    assert any("v: 99 is outside [1, 1]" in d["reason"] for d in dead)
    assert all(d["offset"] is not None and d["source"] == t.samples_ipmi for d in dead)
    audit = [json.loads(line) for line in w.audit_log.read_text().splitlines()]
    assert sorted(a["action"]["action_id"] for a in audit) == sorted(a["action_id"] for a in actions)


def first_warn_of(preds, node):
    return min(p["sample_time"] for p in preds if p["warn"] and p["node"] == node)
