"""The false-alarm budget in the stream (issue 56 item 2): the worker's windows agent judges every
LSTM vote with its input partition's event-time budget, and the offline side
(``simulators.parity.judge_with_budget``) judges the same votes the same way: the same warnings and
the same threshold per verdict, at any speed and worker count; a kill -9 changes nothing."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from _budget_site import budget_site
from hpcguard.cli import app
from hpcguard.models.labels import merge_stream_labels
from hpcguard.settings import Settings
from hpcguard.simulators.parity import evaluate_online_run, offline_decisions


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return budget_site(tmp_path_factory.mktemp("budget-site"))


@pytest.fixture(scope="module")
def offline(site):
    data, model, config = site
    return offline_decisions(data, model, Settings.load(config))


def test_offline_labels_name_failures_and_resolve_episodes(offline):
    kinds = {(x["kind"], x.get("outcome")) for x in offline["labels"]}
    assert ("failure", None) in kinds and ("episode", "false") in kinds, kinds
    assert len({x["label_id"] for x in offline["labels"]}) == len(offline["labels"])


def test_offline_budget_moves_the_threshold_and_changes_warnings(site, offline):
    data, model, config = site
    thresholds = [p["threshold"] for p in offline["predictions"]]
    assert len(set(thresholds)) >= 2, "the threshold never moved: the test would not see a wrong move"
    fixed = offline_decisions(data, model, Settings.load(config).with_overrides(worker=dict(false_alarms=0)))
    assert all("threshold" not in p for p in fixed["predictions"])
    first = min(offline["predictions"], key=lambda p: p["sample_time"])["threshold"]  # the model's own, in warm-up
    moved = [(p, q) for p, q in zip(offline["predictions"], fixed["predictions"]) if p["threshold"] != first]
    assert moved and all(p["node"] == q["node"] and p["sample_time"] == q["sample_time"] for p, q in moved)
    # where it moved, the budget decides: some verdict there differs from the fixed threshold's, each as its
    # own threshold says
    assert any(p["warn"] != q["warn"] for p, q in moved)
    assert all(p["warn"] == (p["score"] is not None and p["score"] >= p["threshold"]) for p, _ in moved)
    assert all(p["warn"] == q["warn"] for p, q in zip(offline["predictions"], fixed["predictions"])
               if p["threshold"] == first)


@pytest.mark.broker
@pytest.mark.slow
def test_worker_judges_as_offline(site, offline, kafka_bootstrap, tmp_path):
    data, model, config = site
    report = evaluate_online_run(data, model, bootstrap=kafka_bootstrap, config=config, workdir=str(tmp_path),
                                 timeout_s=300)
    c = report["counts"]
    assert c["threshold_differs"] == 0 and c["warn_differs"] == 0, report
    assert c["budgeted_predictions"] > 1000 and c["identical"], report
    # hpcguard.labels: the failures and resolved episodes the offline budgets found (but those whose
    # horizon the stream's end never passed), none it did not
    assert c["online_labels"] >= 3 and c["labels_only_online"] == 0 and c["labels_only_offline"] <= 8, report
    # Slurm's node events (sacctmgr's dump beside sacct.txt) became the same labels in the stream
    events = {x["label_id"] for x in offline["labels"] if x.get("source") == "event"}
    assert len(events) == 2 and not {k[0] for k in report["labels_only_offline"]} & events, report

    # a site without a failures.csv: the shadow report scores against the failures the stream recognised
    res = CliRunner().invoke(app, ["report", "shadow", "--bootstrap", kafka_bootstrap, "--prefix",
                                   report["run"]["prefix"], "--data", data, "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    # silences, NODE_FAIL jobs and node events merged as `hpcguard label` merges them: n003 (all three), n005
    # (silence, DOWN*); n004 shared job 4034's NODE_FAIL with n003 and never went silent (0.4 < 0.5)
    merged = merge_stream_labels(offline["labels"])
    assert [(f["node"], f["family"]) for f in merged] == [("n003", "event+node_fail+silence"),
                                                           ("n005", "event+silence")]
    assert r["labels_source"].endswith(".labels") and r["failures"] == 2, r
    assert r["savings"] is not None and r["node_days"] > 0


@pytest.fixture(scope="module")
def primed_model(site, tmp_path_factory):
    """The site's model after ``train threshold`` on its own history: its manifest holds the budget prior."""
    data, model, _ = site
    out = tmp_path_factory.mktemp("primed") / "model"
    res = CliRunner().invoke(app, ["train", "threshold", "--model", model, "--data", data, "--false-alarms", "1000",
                                   "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    return str(out)


def test_a_primed_budget_starts_from_the_prior_not_the_models_threshold(site, primed_model):
    from hpcguard.connectors.model_store import load_model
    from hpcguard.models.budget import primed_by

    data, _, config = site
    settings = Settings.load(config)
    ensemble, manifest = load_model(primed_model)
    primed = primed_by(manifest, budget=settings.worker.false_alarms, initial=ensemble.threshold,
                       step_s=settings.worker.grid_s, warmup_node_days=settings.worker.budget_warmup_node_days)
    assert primed is not None and primed.node_days > settings.worker.budget_warmup_node_days
    offline = offline_decisions(data, primed_model, settings)
    first = min(offline["predictions"], key=lambda p: p["sample_time"])["threshold"]
    assert first == primed.threshold != ensemble.threshold   # no warm-up on the model's own threshold


@pytest.mark.broker
@pytest.mark.slow
def test_two_workers_with_a_primed_budget_judge_as_offline(site, primed_model, kafka_bootstrap, tmp_path):
    data, _, config = site
    report = evaluate_online_run(data, primed_model, workers=2, bootstrap=kafka_bootstrap, config=config,
                                 workdir=str(tmp_path), timeout_s=300)
    c = report["counts"]
    assert c["threshold_differs"] == 0 and c["warn_differs"] == 0, report
    assert c["budgeted_predictions"] > 1000 and c["identical"], report
