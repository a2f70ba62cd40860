"""Hot spares (``policy.hot_spares``): nodes the batch scheduler never uses, spare for migrations
whenever idle; a migration claims its spare until the migrated job's time limit, so a second
warning meanwhile finds no spare and checkpoints (issue 55 item 5)."""
from __future__ import annotations

import json

import pytest

from hpcguard.connectors.validation import DoorLimits, ValidationError, check_record
from hpcguard.models.decision_trace import decide_trace
from hpcguard.settings import Settings
from hpcguard.simulators.telemetry import generate_telemetry, simulate_telemetry
from hpcguard.streams.cluster_view import ClusterView
from hpcguard.streams.decisions import hot_spares, policy_for

T0 = 1_700_000_000.0


def _jobs() -> list[dict]:
    # two 4-node jobs on n1..n8, hours to run, and a 1-node job queued: it would start on n9 unless n9 is a hot spare
    return [{"job_id": "1", "event": "start", "time": T0, "nodes": [f"n{i}" for i in range(1, 5)],
             "time_limit_s": 8 * 3600},
            {"job_id": "2", "event": "start", "time": T0, "nodes": [f"n{i}" for i in range(5, 9)],
             "time_limit_s": 8 * 3600},
            {"job_id": "3", "event": "submit", "time": T0 + 10.0, "num_nodes": 1}]


def _warning(node: str, t: float) -> dict:
    return {"node": node, "time": t, "sample_time": t, "warn": True, "lead_minutes": 5.0,
            "failure_probability": 0.99, "model": "m"}


def test_a_migration_claims_the_hot_spare_and_the_next_warning_checkpoints():
    settings = Settings().with_overrides(policy=dict(hot_spares="n9"))
    nodes = [f"n{i}" for i in range(1, 10)]
    preds = [_warning("n2", T0 + 3600.0), _warning("n6", T0 + 5400.0)]
    actions = decide_trace(preds, _jobs(), nodes, policy_for(settings), quiet_s=600.0,
                           hot_spares=hot_spares(settings))
    assert [(a["kind"], a["job_id"]) for a in actions] == [("migrate", "1"), ("checkpoint", "2")]
    assert actions[0]["reason"]["spare"] == "n9" and actions[1]["reason"]["inputs"]["spare_nodes"] == 0
    # without the hot spare the idle n9 is the queue head's: no migration at all
    plain = decide_trace(preds, _jobs(), nodes, policy_for(Settings()), quiet_s=600.0)
    assert [a["kind"] for a in plain] == ["checkpoint", "checkpoint"]


def test_the_spare_is_free_again_after_the_migrated_job_s_time_limit():
    settings = Settings().with_overrides(policy=dict(hot_spares="n9"))
    nodes = [f"n{i}" for i in range(1, 10)]

    def second(at: float) -> tuple:
        preds = [_warning("n2", T0 + 3600.0), _warning("n6", at)]
        actions = decide_trace(preds, _jobs(), nodes, policy_for(settings), quiet_s=600.0, hot_spares=["n9"])
        assert (actions[0]["kind"], actions[0]["reason"]["spare"]) == ("migrate", "n9")
        return actions[1]["kind"], actions[1]["job_id"], actions[1]["reason"].get("spare")

    # job 1's limit ends at T0 + 8 h: its claim on n9 with it
    assert second(T0 + 8 * 3600.0 - 600.0) == ("checkpoint", "2", None)
    assert second(T0 + 8 * 3600.0 + 60.0) == ("migrate", "2", "n9")


def test_the_cluster_view_shares_claims_and_the_door_checks_them():
    v = ClusterView(nodes_configured=True)
    claim = {"node": "n9", "claimed_from": T0, "claimed_until": T0 + 600.0, "v": 1}
    record = check_record("ClusterUpdate", dict(claim), DoorLimits(), now=T0)
    v.apply_cluster(record, shared=True)
    v.apply_cluster(record, shared=True)  # idempotent
    assert v.claimed_at(T0 + 1.0) == {"n9"} and v.claimed_at(T0 + 600.0) == set()
    with pytest.raises(ValidationError):
        check_record("ClusterUpdate", {**claim, "claimed_until": float("nan")}, DoorLimits(), now=T0)
    with pytest.raises(ValidationError):
        check_record("ClusterUpdate", {**claim, "spare": "n10"}, DoorLimits(), now=T0)


def test_the_simulated_scheduler_never_places_a_job_on_a_hot_spare(tmp_path):
    t = generate_telemetry(8, 6.0, seed=3, hot_spares=2, utilization=0.95, runtime_median_minutes=60.0)
    spares = {6, 7}
    placed = [n for row in t.jobs["node_index"] for n in row] if "node_index" in t.jobs else []
    assert placed and not spares & set(int(n) for n in placed)
    summary = simulate_telemetry(str(tmp_path), nodes=8, hours=0.5, seed=3, hot_spares=1, io=False)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["hot_spares"] == [meta["nodes"][-1]] and summary["nodes"] == meta["nodes"]
    with pytest.raises(ValueError, match="hot_spares"):
        generate_telemetry(4, 0.5, seed=3, hot_spares=4)


def test_a_spare_failure_is_placed_on_the_spare_and_moves_nothing_else():
    """The demo's scenario knob: the last spare fails at a set minute after a psu precursor, drawn apart."""
    import numpy as np

    kw = dict(nodes=8, hours=1.0, seed=5, hot_spares=1, mtbf_hours=1e6)  # no other failure: the spare is free
    plain = generate_telemetry(**kw)
    placed = generate_telemetry(**kw, spare_failure_minutes=40.0)
    new = [f for f in placed.failures if f not in plain.failures]
    assert [(f["node"], f["time"], f["job_id"], f["cause"]) for f in new] == [(7, 2400.0, None, "psu")]
    assert 2400.0 - 600.0 <= new[0]["onset_time"] <= 2400.0 - 360.0   # the precursor lead's 6-10 min
    others = slice(0, 7)
    for name in ("lustre", "ipmi", "job1", "up1", "usec1"):
        assert np.array_equal(getattr(plain, name)[others], getattr(placed, name)[others], equal_nan=True), name
    assert not placed.up1[7, 2400:2401].any() and plain.up1[7].all()       # the spare is down from its failure
    assert [e for e in placed.node_events if e not in plain.node_events][0]["node"] == 7
    with pytest.raises(ValueError, match="hot_spares"):
        generate_telemetry(nodes=8, hours=1.0, seed=5, spare_failure_minutes=40.0)
    with pytest.raises(ValueError, match="recorded minutes"):
        generate_telemetry(**kw, spare_failure_minutes=90.0)


def test_the_demo_places_the_spare_failure_where_the_recording_allows(tmp_path):
    import json as _json

    from hpcguard.simulators.demo_run import simulate_demo_telemetry

    said: list[str] = []
    simulate_demo_telemetry(str(tmp_path / "a"), 8, 2.0, 53, say=said.append)   # minute 50 of 2 h: placed
    spare = _json.loads((tmp_path / "a" / "meta.json").read_text())["hot_spares"][0]
    rows = (tmp_path / "a" / "failures.csv").read_text().splitlines()[1:]
    assert any(r.split(",")[1] == spare and r.split(",")[3] == "psu" for r in rows) and not said
    simulate_demo_telemetry(str(tmp_path / "b"), 8, 1.0, 4, say=said.append)    # this seed's spare is down then
    assert len(said) == 1 and "no failure placed on the spare" in said[0]
    simulate_demo_telemetry(str(tmp_path / "c"), 8, 0.1, 53, say=said.append)   # 6 min: too short to place one
    assert len(said) == 1
