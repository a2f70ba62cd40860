"""§4.3 nested filters for IO-sensitive / IO-resistant job labels."""
import numpy as np

from hpcguard.models.canario.labelling import RESISTANT, SENSITIVE, UNLABELLED, label_jobs, overlap_count

H = 3600.0
# one degraded probe from 10 h to 12 h, one normal probe from 20 h to 21 h
PROBES = dict(probe_start=np.array([10 * H, 20 * H]), probe_end=np.array([12 * H, 21 * H]),
              probe_degraded=np.array([True, False]))


def _label(rows):
    key, start, runtime, nodes, io = (np.array(c) for c in zip(*rows))
    return label_jobs(key, start.astype(float), start + runtime, nodes, io.astype(float), **PROBES)


def test_overlap_count_matches_brute_force():
    rng = np.random.default_rng(0)
    s, e = rng.uniform(0, 100, 50), None
    e = s + rng.uniform(0, 20, 50)
    os_ = rng.uniform(0, 100, 30)
    oe = os_ + rng.uniform(0, 20, 30)
    brute = ((os_[None, :] < e[:, None]) & (oe[None, :] > s[:, None])).sum(1)
    np.testing.assert_array_equal(overlap_count(s, e, os_, oe), brute)


def test_short_and_small_runs_are_dropped():
    lab = _label([("a", 9 * H, 50, 64, 1), ("a", 11 * H, 50, 64, 1),       # < 1 min: failed at start
                  ("b", 9 * H, 1200, 1, 1), ("b", 11 * H, 1500, 1, 1)])   # 20–25 node-minutes < 30
    assert (lab.label == UNLABELLED).all()
    assert lab.funnel["after_min_runtime_and_node_minutes"] == 0


def test_single_runs_are_dropped_and_expected_is_minimum():
    lab = _label([("once", 11 * H, 3600, 2, 1), ("rep", 5 * H, 3700, 2, 1), ("rep", 15 * H, 3600, 2, 1)])
    assert lab.label[0] == UNLABELLED
    assert np.isnan(lab.expected_s[0]) and lab.expected_s[1] == 3600 and lab.expected_s[2] == 3600
    assert lab.funnel["after_repeated"] == 2


def test_sensitive_requires_degraded_runs_to_overlap_degraded_probe():
    # s: 10 % slower while the degraded probe ran → IO-sensitive
    # x: 10 % slower, but that run overlapped only the normal probe → not explained by IO → unlabelled
    lab = _label([("s", 2 * H, 3600, 2, 100), ("s", 10 * H, 3960, 2, 100), ("s", 20 * H, 3600, 2, 100),
                  ("x", 2 * H, 3600, 2, 100), ("x", 19.5 * H, 3960, 2, 100), ("x", 10 * H, 3600, 2, 100)])
    assert (lab.label[:3] == SENSITIVE).all()
    assert (lab.label[3:] == UNLABELLED).all()
    assert lab.degraded.tolist() == [False, True, False, False, True, False]


def test_resistant_needs_no_degradation_and_a_degraded_probe_overlap():
    lab = _label([("r", 2 * H, 3600, 2, 1), ("r", 10 * H, 3620, 2, 1),    # ran through the episode, < 5 % slower
                  ("q", 2 * H, 3600, 2, 1), ("q", 20 * H, 3600, 2, 1)])   # never met a degraded probe
    assert (lab.label[:2] == RESISTANT).all()
    assert (lab.label[2:] == UNLABELLED).all()


def test_total_io_consistency_rejects_input_deck_changes():
    # the slow run did 50 % more IO: the slowdown came from a bigger input, not from the PFS
    lab = _label([("d", 2 * H, 3600, 2, 100), ("d", 10 * H, 4600, 2, 150), ("d", 20 * H, 3600, 2, 100)])
    assert (lab.label == UNLABELLED).all()
    ok = _label([("d", 2 * H, 3600, 2, 100), ("d", 10 * H, 4600, 2, 101), ("d", 20 * H, 3600, 2, 100)])
    assert (ok.label == SENSITIVE).all()
