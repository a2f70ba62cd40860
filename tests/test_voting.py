"""Unanimous and LSTM voting, ROC threshold choice (seed 000 Figs. 4.4, 4.5, 4.11)."""
import numpy as np
import pytest
import torch

from hpcguard.models.failure.voting import LstmVoter, choose_threshold, networks_evaluated, unanimous_vote

torch.set_num_threads(1)


def _sequential_reference(row, n, threshold):
    """Literal Fig. 4.4 procedure: classify in sequence, stop at the first negative."""
    for p in row[:n]:
        if not p > threshold:
            return False
    return True


def test_unanimous_vote_matches_sequential_procedure():
    rng = np.random.default_rng(0)
    probs = rng.random((500, 6)) ** 0.3
    for n in range(1, 7):
        expected = [_sequential_reference(r, n, 0.5) for r in probs]
        assert unanimous_vote(probs, n).tolist() == expected


def test_adding_networks_never_adds_positives():
    probs = np.random.default_rng(1).random((1000, 6))
    counts = [unanimous_vote(probs, n).sum() for n in range(1, 7)]
    assert all(a >= b for a, b in zip(counts, counts[1:])) and counts[0] > counts[-1]


def test_sequence_stops_at_first_negative():
    p = np.array([[0.2, 0.9, 0.9], [0.9, 0.3, 0.9], [0.9, 0.9, 0.9]])
    assert networks_evaluated(p, 3).tolist() == [1, 2, 3]
    with pytest.raises(ValueError):
        unanimous_vote(p, 4)
    with pytest.raises(ValueError):
        unanimous_vote(p[0], 1)


def test_lstm_voter_shape_six_inputs_four_hidden_two_outputs():
    v = LstmVoter()
    assert v.lstm.hidden_size == 4 and v.out.out_features == 2
    logits = v(torch.rand(8, 6))
    assert logits.shape == (8, 2)
    p = v.failure_probability(torch.rand(8, 6))
    assert torch.all((p >= 0) & (p <= 1))


def test_threshold_default_is_highest_tpr_at_lowest_fpr_step():
    # negatives 0..999 scaled; positives mostly above the largest negative
    rng = np.random.default_rng(2)
    neg = rng.random(1000) * 0.8
    pos = np.concatenate([rng.uniform(0.85, 1.0, 70), rng.uniform(0.0, 0.8, 30)])
    neg[0] = 0.9                                          # one confusing negative at 0.9
    y = np.r_[np.zeros(1000), np.ones(100)]
    s = np.r_[neg, pos]
    t = choose_threshold(y, s)
    assert t["fpr"] == pytest.approx(1 / 1000)             # lowest non-zero fpr step
    # the highest tpr among thresholds that admit exactly one false positive
    second_neg = np.sort(neg)[-2]
    assert t["threshold"] == pytest.approx(pos[pos > second_neg].min())
    assert t["tpr"] == pytest.approx((pos > second_neg).mean())
    # a looser target fpr admits more true positives
    loose = choose_threshold(y, s, target_fpr=0.05)
    assert loose["fpr"] <= 0.05 and loose["tpr"] >= t["tpr"]
    with pytest.raises(ValueError):
        choose_threshold(y, s, target_fpr=2.0)


def test_a_target_kept_with_confidence_needs_enough_healthy_events_under_it():
    """A point estimate at the target rests on a handful of false positives; the kept ceiling must
    hold the exact upper bound of its rate under the target, and say so when it cannot."""
    from hpcguard.models.metrics import rate_upper_bound

    rng = np.random.default_rng(5)
    y = np.r_[np.zeros(50_000), np.ones(300)]
    s = np.r_[rng.normal(0.0, 1.0, 50_000), rng.normal(3.5, 1.0, 300)]
    point = choose_threshold(y, s, target_fpr=4e-4)
    kept = choose_threshold(y, s, target_fpr=4e-4, confidence=0.95)
    k_point = int((s[y == 0] >= point["threshold"]).sum())
    assert point["fpr"] == pytest.approx(k_point / 50_000) and point["fpr"] <= 4e-4
    assert point["fpr_upper"] == pytest.approx(rate_upper_bound(k_point, 50_000)) and point["fpr_upper"] > 4e-4
    k_kept = int((s[y == 0] >= kept["threshold"]).sum())
    assert kept["fpr_upper"] == pytest.approx(rate_upper_bound(k_kept, 50_000)) and kept["fpr_upper"] <= 4e-4
    # the loosest such threshold: one more false positive would break the bound
    assert rate_upper_bound(k_kept + 1, 50_000) > 4e-4
    assert kept["target_met"] and kept["threshold"] > point["threshold"] and kept["tpr"] < point["tpr"]
    # weighted healthy events count by their Kish effective number: 10× weights on a tenth the draws
    few = np.r_[np.flatnonzero(y == 0)[::10], np.flatnonzero(y == 1)]
    w = np.where(y[few] == 0, 10.0, 1.0)
    sparse = choose_threshold(y[few], s[few], target_fpr=4e-4, sample_weight=w, confidence=0.95)
    assert sparse["fpr_upper"] == pytest.approx(rate_upper_bound(sparse["fpr"] * 5_000, 5_000))
    # 1,000 healthy events cannot bound a 4e-4 rate (zero of 1,000 leaves up to 3e-3): strictest point, not met
    tiny = choose_threshold(y[::50], s[::50], target_fpr=4e-4, confidence=0.95)
    assert not tiny["target_met"] and tiny["fpr"] == 0.0
    with pytest.raises(ValueError, match="confidence"):
        choose_threshold(y, s, target_fpr=4e-4, confidence=1.5)
    with pytest.raises(ValueError, match="keeps a target_fpr"):
        choose_threshold(y, s, confidence=0.95)
