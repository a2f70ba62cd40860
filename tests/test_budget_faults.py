"""The false-alarm budget across faults (issue 56 item 2, fault suite): two workers, and kill -9s of a
worker in the middle of a replay, judge every vote with the same threshold as the offline side.

The budget's state is in the node-grids changelog (a delta of judged votes per partition and batch,
a snapshot now and then); after a kill the restarted worker rebuilds it from there and judges again
the predictions it finds published past its mark."""
from __future__ import annotations

from collections import Counter

import pytest

from _budget_site import budget_site
from _fault_harness import FaultRun, read_topic
from hpcguard.settings import Settings
from hpcguard.simulators.parity import compare, evaluate_online_run, offline_decisions

pytestmark = [pytest.mark.faults, pytest.mark.broker, pytest.mark.slow]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return budget_site(tmp_path_factory.mktemp("budget-faults"))


def test_two_workers_judge_as_one(site, kafka_bootstrap, tmp_path):
    data, model, config = site
    report = evaluate_online_run(data, model, workers=2, bootstrap=kafka_bootstrap, config=config,
                                 workdir=str(tmp_path), timeout_s=400)
    c = report["counts"]
    assert c["threshold_differs"] == 0 and c["budgeted_predictions"] > 1000 and c["identical"], report


def test_kill_9_mid_replay_changes_no_threshold(site, kafka_bootstrap, tmp_path):
    data, model, config = site
    # the fault harness makes its topics with one partition: the offline side must judge with one budget too
    offline = offline_decisions(data, model, Settings.load(config).with_overrides(topics=dict(partitions=1)))
    assert len({p["threshold"] for p in offline["predictions"]}) >= 2
    expected = len(offline["predictions"])
    with FaultRun(kafka_bootstrap, data, model, tmp_path, 120.0, extra=("--config", config)) as run:
        run.start_replay()
        for fraction in (0.4, 0.7):  # after the warm-up: the threshold has moved by then
            assert run.wait_outputs("predictions", int(fraction * expected)), run.log_tail()
            run.kill_worker()
            run.start_worker()
        run.settle()
        out = run.outcome()
        labels = [v for v, _, _ in read_topic(kafka_bootstrap, run.topics.labels) if isinstance(v, dict)]
    assert out.exits == [], f"the restarted worker exited on its own: {out.exits}\n{run.log_tail()}"
    preds = [r for r, _ in out.records["predictions"]]
    twice = [k for k, n in Counter((p["node"], p["time"]) for p in preds).items() if n > 1]
    assert not twice, f"published twice: {twice[:5]}"
    report = compare(offline, {"predictions": preds, "actions": [r for r, _ in out.records["actions"]],
                               "labels": labels})
    c = report["counts"]
    assert c["online_labels"] >= 3 and c["labels_only_online"] == 0, report  # a label found again: the same id
    assert c["threshold_differs"] == 0 and c["warn_differs"] == 0, report
    assert c["predictions_only_offline"] == 0 and c["identical"], report
