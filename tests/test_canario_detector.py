"""Observation windows, late labels, online detector and its retraining cadence (seed 004 §4.5)."""
import numpy as np
import pytest

from hpcguard.models.canario.detector import (IO_FEATURE_NAMES, IoDegradationDetector, LateLabeler, binary_rates,
                                             io_window_features_batch, replay_detector, window_probe_labels)
from hpcguard.models.features import io_window_features


def test_batch_features_equal_per_window_features():
    rng = np.random.default_rng(0)
    read, write = rng.lognormal(20, 1, 180), rng.lognormal(19, 1, 180)
    read[5] = np.nan
    batch = io_window_features_batch(read, write)
    assert batch.shape == (3, 12)
    for w in range(3):
        ref = io_window_features(read[60 * w:60 * (w + 1)], write[60 * w:60 * (w + 1)])
        np.testing.assert_allclose(batch[w], [ref[k] for k in IO_FEATURE_NAMES], rtol=1e-12)


def test_window_labels_mean_ratio_of_executing_probes_and_label_time():
    ws = np.arange(6) * 60.0
    ratio, label_time = window_probe_labels(ws, probe_start=np.array([0.0, 100.0]), probe_end=np.array([150.0, 300.0]),
                                            probe_ratio=np.array([1.0, 2.0]))
    np.testing.assert_allclose(ratio[:5], [1.0, 1.5, 1.5, 2.0, 2.0])
    assert np.isnan(ratio[5])
    # window 0 is known when probe A ends; windows 1–4 only when probe B ends
    np.testing.assert_allclose(label_time, [150.0, 300.0, 300.0, 300.0, 300.0, 360.0])


def test_late_labeler_waits_for_overlapping_probes():
    lab = LateLabeler(timeout_s=1000.0)
    lab.add_window(60.0, "w1")
    lab.add_window(120.0, "w2")
    lab.probe_started("a", 30.0)
    lab.probe_started("b", 100.0)
    assert lab.ready(500.0) == []              # both probes still running
    lab.probe_completed("a", 30.0, 500.0, 1.2)
    (w, f, r), = lab.ready(500.0)              # w1 = [0, 60) only saw probe a
    assert (w, f, r) == (60.0, "w1", pytest.approx(1.2))
    lab.probe_completed("b", 100.0, 700.0, 1.8)
    (w, f, r), = lab.ready(700.0)
    assert (w, f) == (120.0, "w2") and r == pytest.approx(1.5)   # w2 = [60, 120) saw a and b


def test_late_labeler_timeout_without_start_events():
    lab = LateLabeler(timeout_s=300.0)
    lab.add_window(60.0, None)
    lab.add_window(120.0, None)
    lab.probe_completed("p1", 30.0, 100.0, 1.5)   # probes that ended by the window time are applied first
    assert lab.ready(359.0) == []                  # window time has not passed 60 + 300 yet
    (w, _f, r), = lab.ready(360.0)
    assert w == 60.0 and r == pytest.approx(1.5)
    (w, _f, r), = lab.ready(420.0)
    assert w == 120.0 and r == pytest.approx(1.5)  # [60, 120) saw p1 too
    lab.add_window(480.0, None)
    (w, _f, r), = lab.ready(780.0)
    assert w == 480.0 and np.isnan(r)              # no probe ran over it: unlabelled


def test_late_labels_are_a_function_of_window_time():
    """A probe credited before the window it overlaps arrives or after: the same labels at the same window times
    (the caller applies the probes that ended by a window time before asking what is final then)."""
    probes = sorted([("a", 30.0, 200.0, 1.2), ("b", 100.0, 500.0, 2.0), ("c", 700.0, 900.0, 1.0)],
                    key=lambda p: p[2])
    windows = [60.0 * k for k in range(1, 21)]

    def labels(probes_first):
        lab, out, pending = LateLabeler(timeout_s=450.0), {}, probes  # longer than any probe run (b: 400 s)
        for w in windows:
            due, pending = [p for p in pending if p[2] <= w], [p for p in pending if p[2] > w]
            if not probes_first:
                lab.add_window(w, None)
            for p in due:
                lab.probe_completed(*p)
            if probes_first:
                lab.add_window(w, None)
            out[w] = [(e, None if np.isnan(r) else r) for e, _f, r in lab.ready(w)]
        return out

    first, last = labels(True), labels(False)
    assert first == last and sum(map(len, first.values())) == 12  # windows 60 … 720 final at 510 … 1170
    final = {e: r for w in windows for e, r in first[w]}
    assert final[120.0] == pytest.approx(1.6) and final[480.0] == pytest.approx(2.0)


def _stream(n, seed=0):
    rng = np.random.default_rng(seed)
    slow = (np.arange(n) // 20) % 4 == 3
    x = np.column_stack([rng.lognormal(np.where(slow, 19, 21), 0.2) for _ in range(12)])
    ratio = np.where(slow, 1.6, 1.0) + rng.normal(0, 0.01, n)
    window_end = 60.0 * (np.arange(n) + 1)
    label_time = window_end + rng.uniform(0, 900, n)
    return x, window_end, ratio, label_time


def test_retraining_cadence_and_no_prediction_before_initial_bank():
    x, we, ratio, _ = _stream(200)
    det = IoDegradationDetector(initial_bank_s=3600.0, retrain_every_s=600.0)
    for i in range(200):
        out = det.observe_window(x[i], we[i])
        if we[i] < we[0] + 3600.0:
            assert out == (False, 0.0)
        det.add_label(we[i], ratio[i])
    # first retrain at first window end + 24 h-equivalent bank, then every 10 min of stream time
    expected = np.arange(we[0] + 3600.0, we[-1] + 1, 600.0)
    np.testing.assert_allclose(det.retrain_times, expected)


def test_online_detector_matches_vectorised_replay():
    x, we, ratio, lt = _stream(240, seed=3)
    det = IoDegradationDetector(initial_bank_s=3600.0, retrain_every_s=600.0, threshold=1.05)
    probs, labelled = [], set()
    for i in range(240):
        for j in np.flatnonzero((lt <= we[i]) & (we < we[i])):   # labels that have arrived by now
            if j not in labelled:
                det.add_label(we[j], ratio[j])
                labelled.add(j)
        probs.append(det.observe_window(x[i], we[i])[1])
    predicted, rep = replay_detector(x, we, ratio, lt, "knn", thresholds=(1.05,), initial_bank_s=3600.0)
    np.testing.assert_allclose(np.array(probs)[predicted], rep[1.05][predicted])
    assert binary_rates(ratio[predicted] > 1.05, rep[1.05][predicted] > 0.5)["f1"] > 0.9


@pytest.mark.parametrize("model", ["rf", "dt"])
def test_tree_alternatives(model):
    x, we, ratio, lt = _stream(200, seed=5)
    predicted, rep = replay_detector(x, we, ratio, lt, model, thresholds=(1.05,), initial_bank_s=6000.0)
    r = binary_rates(ratio[predicted] > 1.05, rep[1.05][predicted] > 0.5)
    assert r["tpr"] > 0.8 and r["tnr"] > 0.9
    det = IoDegradationDetector(model=model, initial_bank_s=600.0)
    for i in range(40):
        det.observe_window(x[i], we[i])
        det.add_label(we[i], ratio[i])
    assert det.trained


def test_binary_rates():
    r = binary_rates(np.array([1, 1, 1, 0, 0, 0, 0, 0]), np.array([1, 1, 0, 1, 0, 0, 0, 0]))
    assert (r["tp"], r["fn"], r["fp"], r["tn"]) == (2, 1, 1, 4)
    assert r["precision"] == pytest.approx(2 / 3) and r["recall"] == pytest.approx(2 / 3)
    assert r["tnr"] == pytest.approx(0.8) and r["fpr"] == pytest.approx(0.2)


def test_bad_features_rejected():
    det = IoDegradationDetector()
    with pytest.raises(ValueError, match="read_min"):
        det.observe_window({"write_max": 1.0}, 60.0)
    with pytest.raises(ValueError):
        IoDegradationDetector(model="svm")
