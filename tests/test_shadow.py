"""Shadow mode (issue 56 item 3): ``hpcguard worker --shadow`` applies nothing and says so;
``hpcguard report shadow`` scores what it published against the failure labels."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from _pipeline import HEALTHY, WorkerProcess, baseline_model
from hpcguard.cli import app
from hpcguard.models.metrics import poisson_interval, wilson_interval
from hpcguard.models.warning_eval import score_warnings, warning_episodes
from hpcguard.simulators.pipeline_run import read_topic

T0 = 1_700_000_000.0
END = T0 + 11 * 60  # every node sends 12 minutes of samples; steps up to here close within the lateness


def samples(node, anomaly=None, minutes=12):
    """``minutes`` of 15 s IPMI samples; ``anomaly`` (from, to) minutes: fan down, CPU hot."""
    rng = np.random.default_rng(sum(map(ord, node)))
    out = []
    for k in range(4 * minutes):
        t = T0 + 15 * k
        values = {s: v * (1 + 0.01 * rng.standard_normal()) for s, v in HEALTHY.items()}
        if anomaly and T0 + 60 * anomaly[0] <= t < T0 + 60 * anomaly[1]:
            values["cpu_fan_rpm"] *= 0.4
            values["cpu_temp"] += 25
        out.append((node, {"node": node, "time": t, "source": "ipmi", "values": values, "v": 1}))
    return out


def sacct_time(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))


@pytest.mark.broker
def test_shadow_worker_applies_nothing_and_the_report_scores_it(kafka_settings, tmp_path):
    """n2 (job 42) and n3 (idle) fail after warnings, n5 fails unwarned, n4 warns and never fails; healthy n1
    streams on, so the others' last steps close as their sources go idle."""
    failures = {"n5": T0 + 11 * 60, "n2": T0 + 13 * 60, "n3": T0 + 13 * 60}
    with WorkerProcess(kafka_settings, tmp_path, baseline_model(tmp_path / "model"),
                       roles=["windows", "jobs", "decide", "adapter"], extra=["--shadow"],
                       env={"HPCGUARD_WORKER__GRID_SOURCES": "ipmi", "HPCGUARD_WORKER__IDLE_S": "3"}) as w:
        t = w.topics
        w.produce(t.jobs, [("42", {"job_id": "42", "event": "start", "time": T0, "nodes": ["n2"], "num_nodes": 1,
                                   "v": 1}),
                           ("44", {"job_id": "44", "event": "submit", "time": T0 + 30 * 60, "v": 1})])
        w.wait_for(t.node_jobs, lambda r: len(r) >= 1)
        feed = (samples("n1", minutes=16) + samples("n2", (8, 12)) + samples("n3", (7, 12)) + samples("n4", (3, 5))
                + samples("n5"))
        w.produce(t.samples_ipmi, sorted(feed, key=lambda kv: kv[1]["time"]))
        # every node's steps judged as far as the lateness lets them close, and every action acknowledged
        nodes = {"n1", "n2", "n3", "n4", "n5"}
        preds = w.wait_for(t.predictions, lambda r: {p["node"] for p in r if p["time"] >= END} == nodes)
        actions = w.wait_for(t.actions, lambda r: {n for a in r for n in a["nodes"]} >= {"n2", "n3", "n4"})
        acks = w.wait_for(t.acks, lambda r: {a["action_id"] for a in r} >= {a["action_id"] for a in actions})
        log = w.log()
    assert "shadow mode: nothing is applied" in log

    # nothing applied: every ack (and audit record) is the shadow's would_apply, with the plan it would have run
    assert {a["status"] for a in acks} == {"would_apply"} and {a["adapter"] for a in acks} == {"shadow"}
    assert all(a["detail"].startswith("shadow: would run: ") for a in acks)
    audit = [json.loads(line) for line in w.audit_log.read_text().splitlines()]
    assert {r["ack"]["adapter"] for r in audit} == {"shadow"} and all(r["would_apply"] for r in audit)
    assert {a["kind"] for a in actions} >= {"migrate", "drain"}

    labels = tmp_path / "labels.csv"   # as `hpcguard label` writes it (time,node,...)
    labels.write_text("time,node,job_id,cause,family\n" + "".join(
        f"{t_:.0f},{n},{'42' if n == 'n2' else ''},node_fail,thermal\n" for n, t_ in failures.items()))
    sacct = tmp_path / "sacct.txt"
    sacct.write_text("JobID|JobName|User|Partition|NNodes|NodeList|Submit|Start|End|Timelimit|State|ExitCode\n"
                     f"42|a.sh|alice|batch|1|n2|{sacct_time(T0)}|{sacct_time(T0)}|{sacct_time(failures['n2'])}|"
                     "UNLIMITED|NODE_FAIL|0:0\n")
    res = CliRunner().invoke(app, ["report", "shadow", "--bootstrap", kafka_settings.bootstrap, "--prefix", w.prefix,
                                   "--failures", str(labels), "--sacct", str(sacct), "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)

    # the same figures computed offline on the same records
    preds = [p for p, _ in read_topic(kafka_settings, t.predictions)]  # complete: the worker stopped
    warn = [(p["node"], p["sample_time"]) for p in preds if p["warn"]]
    wn, wt = np.array([n for n, _ in warn]), np.array([s for _, s in warn], float)
    offline = score_warnings(wn, wt, np.array(list(failures)), np.array(list(failures.values())), 900.0, 600.0,
                             per_failure=True)
    node_days = len({(p["node"], p["time"]) for p in preds}) * 15.0 / 86400.0
    early = sum(1 for x in offline["per_failure_lead_minutes"] if x >= 2.0)
    assert r["node_days"] == pytest.approx(node_days) and r["nodes"] == 5
    assert r["warning_episodes"] == len(warning_episodes(wn, wt, 600.0))
    assert r["false_alarm_episodes"] == offline["false_alarms"] >= 1                  # n4's episode
    assert r["false_alarms_per_100_node_days"] == pytest.approx(100.0 * offline["false_alarms"] / node_days)
    assert r["false_alarms_per_100_node_days_ci95"] == pytest.approx(
        list(poisson_interval(offline["false_alarms"], node_days / 100.0)))
    assert r["within_budget"] is False and r["budget_verdict"] in ("over", "undecided") and r["budget"] == 2.0
    assert r["failures"] == 3 and r["warned_2min"] == early == 2                        # n2 and n3, not n5
    assert r["recall"] == pytest.approx(2 / 3) and r["recall_ci95"] == pytest.approx(list(wilson_interval(2, 3)))
    assert r["actions"]["total"] == len(actions) and r["acks"] == {"would_apply": len(acks)} and r["applied"] == 0
    s = r["savings"]
    assert s["jobs"] == 1 and s["net"] == pytest.approx(s["saved"] - s["spent"])
    assert s["by_kind"]["migrate"]["saved"] > 0                                          # job 42 moved off n2

    (day,) = r["by_day"]  # a 16-minute run: one day, whose figures are the run's
    assert (day["node_days"], day["false_alarm_episodes"], day["failures"], day["warned_2min"]) == \
        (pytest.approx(node_days), r["false_alarm_episodes"], 3, 2)

    plot = tmp_path / "shadow.png"
    res = CliRunner().invoke(app, ["report", "shadow", "--bootstrap", kafka_settings.bootstrap, "--prefix", w.prefix,
                                   "--failures", str(labels), "--plot", str(plot)])
    assert res.exit_code == 0, res.output
    assert "false alarms:" in res.output and "recall: 2 of 3 failures" in res.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"plot: {plot}" in res.output


def test_the_report_shows_each_day_and_the_thresholds_the_controller_applied():
    """Three days of two nodes: the false alarms of the first day (under the model's own threshold) show in
    its row and keep the running rate over the budget until later days dilute it."""
    from hpcguard.models.shadow import shadow_summary

    day = 86400.0
    preds = []
    for k in range(0, int(3 * day), 900):  # a prediction every 15 min per node
        threshold = 0.9 if k < day else 0.99  # the controller moved after the first day
        for node in ("n1", "n2"):
            warn = (node == "n2" and k in (3600, 7200 + 3600 * 3)) or (node == "n1" and k == int(2.5 * day))
            preds.append({"node": node, "time": T0 + k, "warn": warn,
                          "detail": {"budget": {"partition": 0, "threshold": threshold, "score": 0.5}}})
    failures = [{"node": "n1", "time": T0 + 2.5 * day + 300}]
    s = shadow_summary(preds, [], [], failures, grid_s=900.0, budget=2.0)
    rows = [(d["day"], d["node_days"], d["false_alarm_episodes"], d["failures"], d["warned_2min"],
             d["threshold"]["median"]) for d in s["by_day"]]
    assert rows == [(0, 2.0, 2, 0, 0, 0.9), (1, 2.0, 0, 0, 0, 0.99), (2, 2.0, 0, 1, 1, 0.99)]
    running = [d["cumulative_false_alarms_per_100_node_days"] for d in s["by_day"]]
    assert running == pytest.approx([100.0, 50.0, 100.0 / 3])
    assert s["by_day"][-1]["cumulative_ci95"] == pytest.approx(list(poisson_interval(2, 0.06)))
    assert sum(d["false_alarm_episodes"] for d in s["by_day"]) == s["false_alarm_episodes"] == 2
    hourly = shadow_summary(preds, [], [], failures, grid_s=900.0, budget=2.0, hourly=True)["by_hour"]
    assert len(hourly) == 72 and sum(h["false_alarm_episodes"] for h in hourly) == 2


def test_shadow_refuses_an_acting_adapter():
    for kind in ("slurm", "command"):
        res = CliRunner().invoke(app, ["worker", "--shadow", "--adapter", kind])
        assert res.exit_code == 2 and "--shadow applies nothing" in res.output
