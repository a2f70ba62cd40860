import numpy as np

from hpcguard.models.warning_eval import score_warnings, warning_episodes


def test_episodes_split_on_gap_and_node():
    eps = warning_episodes(np.array(["a", "a", "a", "b"]), np.array([0, 15, 1000, 15.0]), gap_s=600)
    assert eps == [("a", 0.0, 15.0), ("a", 1000.0, 1000.0), ("b", 15.0, 15.0)]


def test_warned_missed_false_alarm_and_lead():
    r = score_warnings(np.array(["n1", "n1", "n3"]), np.array([700.0, 715.0, 50.0]),
                       np.array(["n1", "n2"]), np.array([1000.0, 2000.0]), horizon_s=900)
    assert (r["injected"], r["warned"], r["missed"], r["false_alarms"]) == (2, 1, 1, 1)
    assert r["lead_minutes"] == [5.0]


def test_warning_after_failure_does_not_count():
    r = score_warnings(np.array(["n1"]), np.array([1010.0]), np.array(["n1"]), np.array([1000.0]))
    assert r["warned"] == 0 and r["false_alarms"] == 1
