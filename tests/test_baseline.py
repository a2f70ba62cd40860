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
    histories = np.concatenate([test, test[:, -1:]], axis=1)  # 17 steps: two windows one step apart
    warn = det.predict_many(histories)
    assert warn.sum() == 0
    assert (det.score_many(test) > 0).mean() < 0.02


def test_fan_failure_precursor_warns_after_persistence(healthy):
    det = BaselineDetector(persistence=3).learn_many(healthy)
    assert det.history_steps == 18
    node = np.concatenate([healthy[0], healthy[1]])  # 32 steps of one node
    node[20:, 1] *= 0.5  # fan slowing from step 20
    # the decision at step e reads steps e-17..e: warn once three windows ending at e-2, e-1, e contain step 20
    flags = [det.predict_one(node[e - 17:e + 1]) for e in range(17, 32)]
    assert flags == [False] * 5 + [True] * 10
    assert "cpu_fan_rpm" in det.violations(node[10:26])
    assert det.predict_one(healthy[5:7].reshape(32, 10)[:18]) is False  # no state kept between calls


def test_state_round_trip(healthy):
    det = BaselineDetector().learn_many(healthy)
    again = BaselineDetector.from_state(det.to_state())
    np.testing.assert_array_equal(det.score_many(healthy[:10]), again.score_many(healthy[:10]))
    assert (again.window_steps, again.history_steps) == (16, 17)


def test_unlearned_detector_raises():
    with pytest.raises(RuntimeError, match="learn_many"):
        BaselineDetector().score_many(np.zeros((1, 16, 10)))


def test_healthy_windows_exclude_failure_neighbourhood():
    values = np.ones((2, 200, 10))
    all_w = healthy_windows(values, [], window_steps=16, exclude_steps=60, stride=1)
    near = healthy_windows(values, [(0, 100)], window_steps=16, exclude_steps=60, stride=1)
    assert len(all_w) == 2 * (200 - 15)
    assert len(all_w) - len(near) == 119  # window ends 41..159 on node 0 dropped
