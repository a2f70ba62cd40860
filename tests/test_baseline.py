import numpy as np
import pytest

from hpcguard.models.baseline import BaselineDetector, healthy_windows


@pytest.fixture
def healthy():
    rng = np.random.default_rng(1)
    base = np.array([50, 6000, 1.1, 40, 2, 50, 30, 40, 1e6, 1e6])
    return base * (1 + 0.02 * rng.standard_normal((800, 16, 10)))


def test_healthy_windows_rarely_warn(healthy):
    det = BaselineDetector(persistence=2).learn_many(healthy[:600])
    test = healthy[600:]
    warn = det.predict_many([f"n{i}" for i in range(len(test))], test)
    assert warn.sum() == 0
    assert (det.score_many(test) > 0).mean() < 0.02


def test_fan_failure_precursor_warns_after_persistence(healthy):
    det = BaselineDetector(persistence=3).learn_many(healthy)
    sick = healthy[:4].copy()
    sick[:, -6:, 1] *= 0.5  # fan slowing
    flags = [det.predict_one("n7", w) for w in sick]
    assert flags == [False, False, True, True]
    assert "cpu_fan_rpm" in det.violations(sick[0])
    assert det.predict_one("n7", healthy[5]) is False  # streak resets on a normal window


def test_state_round_trip(healthy):
    det = BaselineDetector().learn_many(healthy)
    again = BaselineDetector.from_state(det.to_state())
    np.testing.assert_array_equal(det.score_many(healthy[:10]), again.score_many(healthy[:10]))


def test_unlearned_detector_raises():
    with pytest.raises(RuntimeError, match="learn_many"):
        BaselineDetector().score_many(np.zeros((1, 16, 10)))


def test_healthy_windows_exclude_failure_neighbourhood():
    values = np.ones((2, 200, 10))
    all_w = healthy_windows(values, [], window_steps=16, exclude_steps=60, stride=1)
    near = healthy_windows(values, [(0, 100)], window_steps=16, exclude_steps=60, stride=1)
    assert len(all_w) == 2 * (200 - 15)
    assert len(all_w) - len(near) == 119  # window ends 41..159 on node 0 dropped
