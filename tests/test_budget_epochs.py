"""The budget controller as a stream can run it (models/budget_epochs.py): per-epoch thresholds,
labels from silences, answers independent of the arrival order and of a restart."""
from __future__ import annotations

import json

import numpy as np
import pytest
from test_budget import STEP_S, _site

from hpcguard.models.budget_epochs import EpochBudget, epoch_scan
from hpcguard.models.failure.assessment import hindsight_best, scored_after


def _budget(fixed: float) -> EpochBudget:
    return EpochBudget(2.0, initial=fixed, epoch_s=3600.0, silence_s=300.0, step_s=STEP_S)


def test_silences_alone_hold_the_budget_where_the_fixed_threshold_is_ten_times_over():
    votes, times, fn, ft = _site(2)   # a failed node's votes stop for 30 minutes: its only label is that silence
    args = (times, fn, ft, None, votes.shape[0], times[-1] + STEP_S, 86400.0)
    run = epoch_scan(votes, times, [str(n) for n in range(votes.shape[0])], _budget(0.5))
    with np.errstate(invalid="ignore"):
        fixed = scored_after(votes >= 0.5, *args)
    ctrl, best = scored_after(run["warn"], *args), hindsight_best(votes, *args, budget=2.0)
    assert fixed["false_alarms_per_100_node_days"] >= 20.0
    assert ctrl["false_alarms_per_100_node_days"] <= 2.0
    assert ctrl["warned_2min_share"] >= best["warned_2min_share"] - 0.10
    changes = np.flatnonzero(np.diff(run["threshold"]))
    assert changes.size and np.all(((times[changes + 1]) % 3600.0) < STEP_S)   # it moves only as an epoch starts


def _stream(votes, times):
    return [(str(n), float(t), float(votes[n, k])) for k, t in enumerate(times) for n in range(votes.shape[0])
            if votes[n, k] == votes[n, k]]


def test_arrival_order_and_a_restart_change_no_threshold():
    votes, times, _, _ = _site(4, nodes=12, days=3.0)
    records = _stream(votes, times)
    reference = _budget(0.5)
    expected = {(n, t): reference.observe(n, t, v) for n, t, v in records}
    labels = reference.take_labels()
    # another replay speed: each node's records in order, nodes behind each other by up to 4 minutes
    lag = {str(n): float(x) for n, x in enumerate(np.random.default_rng(1).uniform(0.0, 240.0, votes.shape[0]))}
    shuffled = sorted(records, key=lambda r: (r[1] + lag[r[0]], r[0]))
    b = _budget(0.5)
    got, got_labels = {}, []
    for i, (n, t, v) in enumerate(shuffled):
        if i == len(shuffled) // 2:  # a worker restart from the changelogged state
            got_labels += b.take_labels()
            b = EpochBudget.from_state(json.loads(json.dumps(b.to_state())))
        got[(n, t)] = b.observe(n, t, v)
    assert got == expected and len(set(expected.values())) >= 3
    # the labels too: the same failures and resolved episodes, each once (their order within an epoch may differ)
    key = json.dumps
    assert sorted(map(key, got_labels + b.take_labels())) == sorted(map(key, labels))
    kinds = {(x["kind"], x.get("outcome")) for x in labels}
    assert {("failure", None), ("episode", "false")} <= kinds, kinds


def test_a_silent_node_fails_once_at_the_step_after_its_last_prediction():
    b = EpochBudget(2.0, epoch_s=600.0, silence_s=300.0, step_s=15.0)
    for t in np.arange(0.0, 1200.0, 15.0):
        b.observe("a", float(t), 0.1)
        if t < 300.0 or t >= 900.0:  # b is silent from 300 s to 900 s
            b.observe("b", float(t), 0.1)
    assert b.failures == {"b": [300.0]}  # found at the 600 s epoch and again when b came back: once
    assert b.take_labels() == [{"kind": "failure", "node": "b", "time": 300.0, "source": "silence",
                                "label_id": "failure:b:300"}]


def test_a_node_whose_last_steps_the_stream_holds_fails_after_them():
    """A stream holds a stopped node's last steps (its watermark trails its newest sample): the failure
    comes after those, as offline, where every step is judged, and not while they are recent."""
    b = EpochBudget(2.0, epoch_s=600.0, silence_s=300.0, step_s=15.0)
    b.held_until = lambda node: 330.0 if node == "b" else None
    for t in np.arange(0.0, 1800.0, 15.0):
        b.observe("a", float(t), 0.1)
        if t < 300.0:
            b.observe("b", float(t), 0.1)
        if t == 600.0:
            assert b.failures == {}  # at the 600 s epoch its held steps are recent: not silent yet
    assert b.failures == {"b": [345.0]}


def test_warning_episodes_resolve_true_before_a_failure_and_false_without_one():
    b = EpochBudget(2.0, initial=0.5, epoch_s=600.0, silence_s=300.0, step_s=15.0)
    for t in np.arange(0.0, 7200.0, 15.0):
        b.observe("a", float(t), 0.9 if 600.0 <= t < 700.0 else 0.1)           # warned, then nothing follows
        if t < 2400.0:
            b.observe("b", float(t), 0.9 if 2000.0 <= t < 2100.0 else 0.1)      # warned, then silent at 2400 s
    got = b.take_labels()
    assert {"kind": "episode", "node": "a", "start": 600.0, "end": 690.0, "outcome": "false",
            "failure_time": None, "label_id": "episode:a:600"} in got
    assert {"kind": "episode", "node": "b", "start": 2010.0, "end": 2085.0, "outcome": "true",
            "failure_time": 2400.0, "label_id": "episode:b:2010"} in got
    assert {"kind": "failure", "node": "b", "time": 2400.0, "source": "silence", "label_id": "failure:b:2400"} in got
    assert len(got) == 3


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="epoch_s"):
        EpochBudget(epoch_s=0.0)
    with pytest.raises(ValueError, match="epoch-budget"):
        EpochBudget.from_state({"kind": "other"})
