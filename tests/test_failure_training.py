"""Dataset construction and training of the failure ensemble on synthetic grids."""
import numpy as np
import pytest
import torch

from hpcguard.models.failure.dataset import (build_events, event_features, event_windows, healthy_mask, impute,
                                             learn_imputation, stream_windows)
from hpcguard.models.failure.evaluation import ensemble_rows, online_scan, online_summary
from hpcguard.models.failure.training import stratified_split, train_ensemble
from hpcguard.models.features import window_features
from _failure_data import GRID, T0, synthetic_grid

torch.set_num_threads(1)


def test_events_use_windows_ending_lead_minutes_before_the_failure():
    v, fn, ft = synthetic_grid()
    ev = build_events(v, T0, GRID, fn, ft, ok_ratio=10, seed=0)
    pos = ev.labels == 1
    assert ev.features.shape[1:] == (6, 70)
    assert pos.sum() == len(ft) and (~pos).sum() == 10 * len(ft)
    # the lead-2 column of the first failure is exactly the window of steps [s−8−16, s−8)
    s = int((ft[0] - T0) / GRID)
    expected = window_features(v[fn[0], s - 8 - 16:s - 8])
    assert np.allclose(ev.features[pos][0, 0], expected, equal_nan=True)
    lead7 = window_features(v[fn[0], s - 28 - 16:s - 28])
    assert np.allclose(ev.features[pos][0, 5], lead7, equal_nan=True)
    # reproducible with the seed
    again = build_events(v, T0, GRID, fn, ft, ok_ratio=10, seed=0)
    assert np.array_equal(again.times, ev.times)


def test_ok_events_avoid_failures_and_downtime():
    v, fn, ft = synthetic_grid()
    ev = build_events(v, T0, GRID, fn, ft, ok_ratio=50, seed=1, exclude_before_s=900, downtime_s=1800)
    ok = ev.labels == 0
    for node, t in zip(ev.nodes[ok], ev.times[ok]):
        near = ft[fn == node]
        history_start = t - (7 * 60 + 16 * GRID)
        assert not np.any((near + 1800 >= history_start) & (near - 900 <= t))
    mask = healthy_mask(v.shape[0], v.shape[1], T0, GRID, fn, ft)
    s = int((ft[0] - T0) / GRID)
    assert not mask[fn[0], s - 10] and not mask[fn[0], s + 50] and mask[fn[0]].any()


def test_bad_inputs_are_rejected():
    v, fn, ft = synthetic_grid(nodes=2, failures_per_node=1)
    with pytest.raises(ValueError, match="nodes, steps"):
        build_events(v[..., :9], T0, GRID, fn, ft)
    with pytest.raises(ValueError, match="node index"):
        build_events(v, T0, GRID, [5], [T0 + 1000 * GRID])
    with pytest.raises(ValueError, match="multiples"):
        event_features(v, [0], [500], grid_s=7.0)


def test_missing_features_are_imputed_with_training_medians():
    x = np.array([[1.0, np.nan], [3.0, 2.0], [np.nan, 4.0]])
    med = learn_imputation(x)
    assert med.tolist() == [2.0, 3.0]
    assert impute(np.array([[np.nan, np.nan]]), med).tolist() == [[2.0, 3.0]]


def test_stream_windows_and_event_windows_agree():
    v, fn, ft = synthetic_grid(nodes=2, failures_per_node=1)
    views = stream_windows(v)
    assert views.shape == (2, v.shape[1] - 15, 16, 10)
    w = event_windows(v, [1], [T0 + 500 * GRID], T0, GRID, lead_minutes=2)
    assert np.array_equal(w[0], views[1, 500 - 8 - 16], equal_nan=True)


def test_split_is_stratified():
    y = np.r_[np.ones(20), np.zeros(200)]
    a, b = stratified_split(y, 0.4, np.random.default_rng(0))
    assert y[b].sum() == 8 and (y[b] == 0).sum() == 80 and np.intersect1d(a, b).size == 0


@pytest.fixture(scope="module")
def trained():
    v, fn, ft = synthetic_grid(seed=3)
    ev = build_events(v, T0, GRID, fn, ft, ok_ratio=10, seed=0)
    cal = build_events(v, T0, GRID, fn, ft, max_ok=1500, seed=5)
    cal = cal.subset(np.flatnonzero(cal.labels == 0))
    ens, report = train_ensemble(ev, seed=0, calibration=cal, mc_splits=2, max_epochs=150)
    return ens, report


def test_training_learns_the_precursor_and_reports_cv(trained):
    ens, report = trained
    assert len(report["networks"]) == 6 and all(len(r["splits"]) == 2 for r in report["networks"])
    assert report["voter"]["validation"] > 0 and 0 <= report["voter"]["threshold"] <= 1
    v, fn, ft = synthetic_grid(seed=11)                  # held-out grid
    test = build_events(v, T0, GRID, fn, ft, max_ok=3000, seed=2)
    rows, _ = ensemble_rows(ens, test.features, test.labels)
    by = {r["name"]: r for r in rows}
    assert by["single-network@2min"]["tpr"] > 0.8      # the ramp is visible 2 minutes ahead
    assert by["unanimous@6"]["fpr"] <= by["unanimous@1"]["fpr"]
    assert by["lstm-vote"]["tpr"] > 0.3 and by["lstm-vote"]["fpr"] < 0.05


def test_training_is_reproducible_with_fixed_seeds(trained):
    ens, _ = trained
    v, fn, ft = synthetic_grid(seed=3)
    ev = build_events(v, T0, GRID, fn, ft, ok_ratio=10, seed=0)
    cal = build_events(v, T0, GRID, fn, ft, max_ok=1500, seed=5)
    cal = cal.subset(np.flatnonzero(cal.labels == 0))
    again, _ = train_ensemble(ev, seed=0, calibration=cal, mc_splits=2, max_epochs=150)
    x = ev.features[:20]
    assert np.allclose(again.predict_batch(x).vote_probability, ens.predict_batch(x).vote_probability)
    assert np.allclose(again.mean, ens.mean)


def test_online_scan_warns_before_failures(trained):
    ens, _ = trained
    v, fn, ft = synthetic_grid(seed=12, nodes=4)
    scan = online_scan(ens, v, T0, GRID)
    assert scan["warn"].shape == (4, v.shape[1] - 15)
    summary = online_summary(scan, fn, ft, healthy_mask(4, v.shape[1], T0, GRID, fn, ft))
    assert summary["failures"] == len(ft) and summary["warned"] >= 1
    assert summary["healthy_steps"] > 0 and 0 <= summary["fpr_per_step"] < 0.05


def test_too_few_events_is_a_clear_error():
    v, fn, ft = synthetic_grid(nodes=1, failures_per_node=1)
    ev = build_events(v, T0, GRID, fn, ft, ok_ratio=2)
    with pytest.raises(ValueError, match="too few"):
        train_ensemble(ev)
