"""Dataset construction and training of the failure ensemble on synthetic grids."""
import numpy as np
import pytest
import torch

from hpcguard.models.failure.dataset import (Events, build_events, event_features, event_windows, healthy_mask, impute,
                                             learn_imputation, stream_windows)
from hpcguard.models.failure.evaluation import (PREDICTION_TARGETS, check_targets, ensemble_rows, online_scan,
                                                history_ends, online_summary, online_vote_scan, tpr_at_fpr,
                                                warnings_at)
from hpcguard.models.failure.training import stratified_split, time_split, train_ensemble, train_voter
from hpcguard.streams.predictors import EnsemblePredictor
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
    predictor = EnsemblePredictor(ens, "t", {})
    scan = online_scan(predictor.predict, v, T0, GRID, predictor.history_steps)
    assert scan["warn"].shape == (4, v.shape[1] - 15)
    summary = online_summary(scan, fn, ft, healthy_mask(4, v.shape[1], T0, GRID, fn, ft), T0, GRID)
    assert summary["failures"] == len(ft) and summary["warned"] >= 1 and summary["warned_2min"] >= 1
    assert summary["healthy_evaluations"] > 0 and 0 <= summary["fpr_per_step"] < 0.05
    assert summary["node_days"] == pytest.approx(4 * v.shape[1] * GRID / 86400)
    # every 4th step: a subset of the same evaluations, same verdicts
    sparse = online_scan(predictor.predict, v, T0, GRID, predictor.history_steps, stride=4)
    assert np.array_equal(sparse["warn"], scan["warn"][:, ::4])


@pytest.mark.parametrize("persistence,lead_shift", [(1, False), (3, False), (1, True), (3, True)])
def test_the_online_vote_at_the_threshold_is_the_workers_warning(trained, persistence, lead_shift):
    """One pass of the online vote gives the warnings of any threshold; at the model's, the worker's
    (the scan's series_votes compute each window's features once; the worker's call, per history)."""
    ens, _ = trained
    v, fn, ft = synthetic_grid(seed=12, nodes=3)
    v[1, 400:403] = np.nan                                    # node 1 down for three steps
    saved = ens.persistence, ens.lead_shift
    ens.persistence, ens.lead_shift = persistence, lead_shift
    try:
        predictor = EnsemblePredictor(ens, "t", {})
        warned = online_scan(predictor.predict, v, T0, GRID, predictor.history_steps, stride=2)
        votes = online_vote_scan(ens.series_votes, v, T0, GRID, ens.history_steps, stride=2)
    finally:
        ens.persistence, ens.lead_shift = saved
    assert warned["warn"].any()                               # the comparison below is not of empty scans
    assert np.array_equal(warnings_at(votes, ens.threshold)["warn"], warned["warn"])
    assert np.array_equal(warnings_at(votes, ens.threshold)["time"], warned["time"])
    ends = history_ends(v.shape[1], predictor.history_steps, 2)
    holding_down = (ends > 400) & (ends - predictor.history_steps <= 402)
    assert holding_down.any() and np.isnan(votes["vote"][1, holding_down]).all()   # never warns
    lower = warnings_at(votes, np.nanpercentile(votes["vote"], 50))["warn"]
    assert lower.sum() > warned["warn"].sum() and (lower | ~warned["warn"]).all()


def test_online_scan_equals_offline_features_of_the_same_history(trained):
    """Parity: the scan's predictor call on a window cut from the grid equals the event features' prediction."""
    ens, _ = trained
    v, fn, ft = synthetic_grid(seed=12, nodes=2)
    ends = np.array([300, 301, 777])
    feats = event_features(v, np.zeros(3, int), ends, GRID, leads=(2,))[:, 0]   # windows ending 8 steps earlier
    expected = ens.predict_batch(feats).warn
    scan = online_scan(EnsemblePredictor(ens, "t", {}).predict, v[:1], T0, GRID, 16)
    assert np.array_equal(scan["warn"][0, ends - 8 - 16], expected)


def test_too_few_events_is_a_clear_error():
    v, fn, ft = synthetic_grid(nodes=1, failures_per_node=1)
    ev = build_events(v, T0, GRID, fn, ft, ok_ratio=2)
    with pytest.raises(ValueError, match="too few"):
        train_ensemble(ev)


def test_time_split_keeps_later_failures_for_validation():
    y = np.r_[np.ones(10), np.zeros(30)].astype(int)
    t = np.r_[np.arange(10) * 100.0, np.linspace(0, 1000, 30)]
    early, late = time_split(y, t, 0.3)
    assert t[early].max() < t[late].min()
    assert y[late].sum() == 3 and y[early].sum() == 7
    with pytest.raises(ValueError, match="at least 2 failures"):
        time_split(np.array([1, 0]), np.array([0.0, 1.0]), 0.5)


def test_voter_reports_validation_failures_with_a_wilson_interval(trained):
    _, report = trained
    v = report["voter"]
    assert v["split"] == "time" and v["validation_failures"] >= 2
    lo, hi = v["tpr_ci95"]
    assert 0 <= lo <= v["tpr"] <= hi <= 1 and hi - lo > 0.05   # few failures: a wide interval, said so


def test_the_threshold_rate_counts_the_sites_own_healthy_events_only():
    # a borrowed (simulated) history's healthy tail is another site's: counted in the rate it
    # would push the threshold above this site's target
    rng = np.random.default_rng(3)
    n_fail, n_own, n_borrowed = 60, 3000, 120
    y = np.r_[np.ones(n_fail), np.zeros(n_own + n_borrowed)].astype(int)
    level = np.r_[rng.uniform(0.5, 1.0, n_fail), rng.uniform(0.0, 0.6, n_own), rng.uniform(0.6, 0.95, n_borrowed)]
    probs = np.clip(level[:, None] + rng.normal(0, 0.02, (y.size, 6)), 0, 1)
    times = rng.uniform(0, 1e5, y.size)
    own = np.r_[np.ones(n_fail + n_own, bool), np.zeros(n_borrowed, bool)]
    common = dict(seed=0, target_fpr=0.01, max_epochs=40, times=times)
    _, every = train_voter(probs, y, **common)
    _, rated = train_voter(probs, y, ok_weight=own.astype(float), **common)
    validation = times >= np.sort(times[y == 1])[n_fail // 2]
    assert every["validation_ok"] == int((validation & (y == 0)).sum())
    assert rated["validation_ok"] == int((validation & own & (y == 0)).sum())
    assert rated["validation_failures"] == every["validation_failures"] == int((validation & (y == 1)).sum())
    assert rated["fpr"] <= 0.01 and every["fpr"] <= 0.01
    assert rated["threshold"] < every["threshold"] and rated["tpr"] > every["tpr"]
    # a healthy event weighs the node-steps it stands for: 50 per look-alike draw puts the
    # threshold above every one of them, where one each let some through
    _, weighed = train_voter(probs, y, ok_weight=np.where(own, 1.0, 50.0), **common)
    assert weighed["threshold"] > every["threshold"] and weighed["fpr"] <= 0.01
    assert weighed["validation_ok_effective"] < weighed["validation_ok"] == every["validation_ok"]
    with pytest.raises(ValueError, match="no weighted healthy event"):
        train_voter(probs, y, ok_weight=np.zeros(y.size), **common)


def test_hard_negatives_sit_on_benign_look_alikes():
    v, fn, ft = synthetic_grid(seed=4, nodes=6, failures_per_node=1)
    starts = T0 + np.array([1000.0, 1500.0]) * GRID
    ev = build_events(v, T0, GRID, fn, ft, ok_ratio=5, seed=0, look_alikes=(np.array([0, 5]), starts, starts + 180),
                      per_look_alike=4)
    hard = ev.hard
    assert hard.sum() >= 1 and (ev.labels[hard] == 0).all()
    for node, t in zip(ev.nodes[hard], ev.times[hard]):
        k = list(np.array([0, 5])).index(node)
        assert starts[k] + 120 - GRID <= t <= starts[k] + 180 + 420
    assert (ev.features[hard].shape[1:] == (6, 70))
    # each draw stands for its share of the node-steps it was drawn from
    assert np.allclose(ev.node_steps[hard], (180 + 420 - 120) / GRID / 4) and (ev.node_steps[ev.labels == 1] == 1).all()
    every = build_events(v, T0, GRID, fn, ft, ok_ratio=np.inf, seed=0)
    drawn = ev.node_steps[(ev.labels == 0) & ~hard]
    assert np.allclose(drawn, (every.labels == 0).sum() / drawn.size) and (every.node_steps == 1).all()


def test_site_feature_ensemble_round_trips_and_needs_its_history():
    from hpcguard.models.failure.ensemble import FailureEnsemble

    ens = FailureEnsemble.untrained(seed=0)
    ens2 = FailureEnsemble(ens.nets, ens.voter, ens.medians, ens.mean, ens.std, features="site", persistence=3)
    assert ens2.history_steps == 176 + 2
    again = FailureEnsemble.from_state(ens2.to_state())
    assert again.feature_set.name == "site" and again.history_steps == 178
    w = np.random.default_rng(0).normal(50, 1, size=(3, 178, 10))
    assert np.allclose(again.predict_windows(w).vote_probability, ens2.predict_windows(w).vote_probability)
    with pytest.raises(ValueError, match="178"):
        ens2.predict_windows(w[:, 1:])


def test_no_warning_from_a_history_in_which_the_node_was_down():
    """A restart inside the history would compare a reboot with the running node: never a warning."""
    from hpcguard.models.failure.ensemble import FailureEnsemble

    ens = FailureEnsemble.untrained(seed=0)
    ens.threshold = 0.0                                  # the vote fires on everything
    w = np.random.default_rng(1).normal(50, 1, size=(3, 16, 10))
    w[1, 3, :] = np.nan                                  # node down for one step
    w[2, 5, :4] = np.nan                                 # BMC poll missing, OS metrics present: still up
    assert ens.predict_windows(w).warn.tolist() == [True, False, True]


def test_shifted_failure_windows_train_the_networks_only():
    v, fn, ft = synthetic_grid(seed=5, nodes=8)
    ev = build_events(v, T0, GRID, fn, ft, ok_ratio=10, seed=0)
    shifted = [build_events(v, T0, GRID, fn, ft - GRID * k, max_ok=0, seed=0) for k in (1, 2)]
    for k, s in zip((1, 2), shifted):
        s.times = s.times + GRID * k                       # the failure each copies (time split)
    shifted = Events.concat(shifted)
    assert (shifted.labels == 1).all() and len(shifted.labels) == 2 * ev.labels.sum()
    _, plain = train_ensemble(ev, seed=0, mc_splits=1, max_epochs=20)
    _, more = train_ensemble(ev, seed=0, mc_splits=1, max_epochs=20, augment=shifted)
    assert more["network_failure_events"] == 3 * plain["network_failure_events"]
    assert more["voter"]["validation_failures"] == plain["voter"]["validation_failures"]


def test_tpr_at_fpr_lets_at_most_that_share_of_healthy_events_warn():
    rng = np.random.default_rng(3)
    y = np.r_[np.ones(200, int), np.zeros(10_000, int)]
    s = np.r_[rng.normal(2.0, 1.0, 200), rng.normal(0.0, 1.0, 10_000)]
    for fpr in (0.0, 2e-4, 1e-3, 1e-2):
        r = tpr_at_fpr(y, s, fpr)
        assert r["false_positives"] == int(np.floor(fpr * 10_000))    # continuous scores: no ties
        assert r["tpr"] == pytest.approx((s[:200] > r["threshold"]).mean())
    tprs = [tpr_at_fpr(y, s, f)["tpr"] for f in (0.0, 2e-4, 1e-3, 1e-2)]
    assert tprs == sorted(tprs) and tprs[-1] > tprs[0]
    # ties at the threshold never let more healthy events through than the bound
    tied = np.r_[s[:200], np.full(10_000, 0.5)]
    assert tpr_at_fpr(y, tied, 1e-2)["false_positives"] == 0
    # counting only some failures (those with a precursor)
    counted = np.r_[np.arange(200) < 50, np.zeros(10_000, bool)]
    r = tpr_at_fpr(y, s, 1e-3, counted)
    assert r["failures"] == 50 and r["tpr"] == pytest.approx((s[:50] > r["threshold"]).mean())
    with pytest.raises(ValueError, match="both"):
        tpr_at_fpr(np.zeros(5, int), np.zeros(5), 0.1)


def test_targets_need_the_tpr_within_the_fpr_bound_and_the_online_pair():
    good = {"tpr": 0.55, "tpr_precursor": 0.75, "fpr": PREDICTION_TARGETS["vote_fpr"]}
    online = {"precursor_warned_2min_share": 0.71, "false_alarms_per_100_node_days": 2.0}
    assert all(t["met"] for t in check_targets(good, online))
    assert len(check_targets(good)) == 3                                 # no online scan: no online targets
    met = {t["target"]: t["met"] for t in check_targets({**good, "tpr": 0.49, "fpr": 1e-4},
                                                         {**online, "false_alarms_per_100_node_days": 2.1})}
    assert met == {"LSTM vote fpr": True, "LSTM vote tpr": False, "LSTM vote tpr (precursor failures)": True,
                   "online: precursor failures warned >= 2 min ahead": True,
                   "online: false-alarm episodes per 100 node-days": False}
    assert not any(t["met"] for t in check_targets({**good, "fpr": 3e-4}))   # tpr bought with false positives
    assert not check_targets({**good, "tpr_precursor": float("nan")})[2]["met"]


def test_a_busy_healthy_tail_outside_validation_raises_the_threshold_when_the_rate_counts_it():
    """rate_from="all" with rate_probs: healthy events the voter never fits that vote like failures (a busy
    hour the validation half does not hold) are kept under the target; the validation half alone misses them."""
    rng = np.random.default_rng(0)
    n_ok, n_fail = 4000, 200
    y = np.r_[np.zeros(n_ok, np.int64), np.ones(n_fail, np.int64)]
    probs = np.r_[rng.uniform(0.0, 0.3, (n_ok, 6)), rng.uniform(0.6, 1.0, (n_fail, 6))]
    times = rng.permutation(y.size) * 15.0
    busy = np.r_[rng.uniform(0.0, 0.3, (3900, 6)), rng.uniform(0.75, 0.95, (100, 6))]   # 2.5 % vote high
    common = dict(seed=0, target_fpr=5e-3, times=times, max_epochs=150)
    _, alone = train_voter(probs, y, **common)
    voter, counted = train_voter(probs, y, rate_from="all", rate_probs=busy, rate_weight=np.ones(len(busy)),
                                 **common)
    healthy = np.r_[voter.vote(probs[y == 0]), voter.vote(busy)]   # the same voter (same fit) either way
    assert (healthy[n_ok:] >= alone["threshold"]).mean() > 0.02          # the busy hour over the target
    assert (healthy >= counted["threshold"]).mean() <= 5e-3              # every healthy event under it
    assert counted["threshold"] > alone["threshold"] and counted["tpr"] < alone["tpr"]
    assert counted["validation_ok"] == n_ok + len(busy) and alone["validation_ok"] < n_ok   # both halves + busy
    assert counted["validation_failures"] == alone["validation_failures"] < n_fail          # tpr: validation only
    with pytest.raises(ValueError, match="rate_from"):
        train_voter(probs, y, rate_from="week", **common)


def test_a_threshold_rated_over_the_whole_history_leaves_the_networks_rows_out():
    """calibration_span="history": calibration events before the voter's period count in the threshold's rate,
    never the networks' own training rows; the networks and the voter are the same either way."""
    from hpcguard.models.failure.training import voter_period_start

    v, fn, ft = synthetic_grid(seed=3)
    ev = build_events(v, T0, GRID, fn, ft, ok_ratio=10, seed=0)
    cal = build_events(v, T0, GRID, fn, ft, max_ok=1500, seed=5)
    cal = cal.subset(np.flatnonzero(cal.labels == 0))
    start = voter_period_start(ev)
    net_rows = ev.subset(np.flatnonzero((ev.labels == 0) & (ev.times < start)))
    common = dict(seed=0, mc_splits=1, max_epochs=40)
    ens_v, last = train_ensemble(ev, calibration=cal, **common)
    ens_h, whole = train_ensemble(ev, calibration=cal, calibration_span="history", **common)
    _, padded = train_ensemble(ev, calibration=Events.concat([cal, net_rows]), calibration_span="history", **common)
    earlier = int((cal.times < start).sum())
    assert earlier > 0 and whole["voter"]["validation_ok"] > last["voter"]["validation_ok"] + earlier // 2
    assert padded["voter"]["validation_ok"] == whole["voter"]["validation_ok"]   # the networks' rows: not counted
    x = ev.features[:50]
    assert np.array_equal(ens_h.predict_batch(x).vote_probability, ens_v.predict_batch(x).vote_probability)
    with pytest.raises(ValueError, match="calibration_span"):
        train_ensemble(ev, calibration=cal, calibration_span="week", **common)


def test_false_positives_in_runs_make_the_bound_count_runs():
    """clusters: healthy events that vote alike on one node for minutes are one run in the fpr's bound, so a
    threshold kept with confidence sits higher than with independent draws; histories sharing node numbers
    and times stay apart."""
    from hpcguard.models.failure.training import _event_keys

    rng = np.random.default_rng(1)
    n_fail = 300
    one = rng.uniform(0.0, 0.3, (2000, 6))
    one[:40] = rng.uniform(0.6, 0.9, (40, 6))                   # 40 healthy episodes that vote like failures
    probs = np.r_[np.repeat(one, 5, axis=0), rng.uniform(0.6, 1.0, (n_fail, 6))]   # each seen 5 times in a row
    y = np.r_[np.zeros(10_000, np.int64), np.ones(n_fail, np.int64)]
    times = np.r_[np.arange(10_000) * 15.0, rng.uniform(0, 10_000 * 15.0, n_fail)]
    runs = np.r_[np.repeat(np.arange(2000), 5), -1 - np.arange(n_fail)]
    common = dict(seed=0, target_fpr=5e-3, fpr_confidence=0.95, times=times, max_epochs=150, rate_from="all")
    voter, alone = train_voter(probs, y, **common)
    _, counted = train_voter(probs, y, clusters=runs, **common)
    assert counted["threshold"] > alone["threshold"] and counted["fpr_upper"] <= 5e-3
    assert alone["fpr_design_effect"] == 1.0 and (counted["fpr"] == 0 or counted["fpr_design_effect"] > 1)
    healthy = voter.vote(probs[:10_000])
    assert (healthy >= alone["threshold"]).mean() > (healthy >= counted["threshold"]).mean()
    ev = Events(np.zeros((4, 1, 1)), np.zeros(4, np.int8), np.array([3, 3, 3, 4]), np.array([0.0, 60.0, 900.0, 0.0]),
                source=np.array([0, 0, 0, 0]))
    twin = Events.concat([ev, Events(ev.features, ev.labels, ev.nodes, ev.times, source=np.ones(4, np.int64))])
    keys = _event_keys(twin, np.arange(8), 600.0)               # 10-minute blocks
    assert keys[0] == keys[1] != keys[2] and keys[0] != keys[3] and len(set(keys[:4]) & set(keys[4:])) == 0


def test_a_rate_resting_on_one_history_makes_the_bound_count_histories():
    """histories: the same false positives concentrated in one of four histories (its episode) make the bound
    count the spread between the histories, so the threshold sits higher than with the draws pooled; one
    history, or no histories given, leave the threshold where it was."""
    rng = np.random.default_rng(2)
    n_fail = 300
    probs = np.r_[rng.uniform(0.0, 0.3, (10_000, 6)), rng.uniform(0.6, 1.0, (n_fail, 6))]
    probs[:60] = rng.uniform(0.6, 0.9, (60, 6))                 # healthy events that vote like failures
    y = np.r_[np.zeros(10_000, np.int64), np.ones(n_fail, np.int64)]
    times = np.r_[np.arange(10_000) * 15.0, rng.uniform(0, 10_000 * 15.0, n_fail)]
    four = np.r_[np.repeat(np.arange(4), 2_500), rng.integers(0, 4, n_fail)]   # the 60 all in history 0
    common = dict(seed=0, target_fpr=1e-2, fpr_confidence=0.95, times=times, max_epochs=150, rate_from="all")
    voter, pooled = train_voter(probs, y, **common)
    _, spread = train_voter(probs, y, histories=four, **common)
    _, one = train_voter(probs, y, histories=np.zeros(y.size, np.int64), **common)
    assert spread["threshold"] > pooled["threshold"] and spread["fpr_upper"] <= 1e-2
    assert spread["fpr"] > 0 and spread["fpr_design_effect"] > 1      # measured: 2.1e-3 at design effect 21
    assert one["threshold"] == pooled["threshold"] and one["fpr_design_effect"] == pooled["fpr_design_effect"] == 1.0
    healthy = voter.vote(probs[:10_000])
    assert (healthy >= pooled["threshold"]).sum() > (healthy >= spread["threshold"]).sum()
