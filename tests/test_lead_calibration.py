"""The lead a warning reports: calibrated on validation per key of the networks that fired (issue 55)."""
import numpy as np
import pytest

from hpcguard.models.failure.ensemble import EnsembleOutput, FailureEnsemble, calibrate_leads, lead_keys
from hpcguard.models.failure.site_training import GRID_S, Recorded, warned_leads

TABLE = {"by_key": {"7": 5.5, "4": 3.0}, "overall": 4.25, "quantile": 0.25, "failures": 9}


def _with_probs(ens, probs):
    ens.network_probabilities = lambda features: np.asarray(probs, float)   # what the networks "say"
    return ens


PROBS = [[0.9, 0.1, 0.1, 0.1, 0.1, 0.9],    # 2 and 7 fired: key 7
         [0.1, 0.1, 0.9, 0.1, 0.1, 0.1],    # 4 fired: key 4
         [0.1, 0.9, 0.1, 0.1, 0.1, 0.1],    # 3 fired: key 3, not in the table -> overall
         [0.1, 0.1, 0.1, 0.1, 0.1, 0.1]]    # none fired: key 0 -> overall


def test_predict_batch_reports_the_calibrated_lead_per_key_and_todays_lead_without_a_table():
    ens = _with_probs(FailureEnsemble.untrained(seed=0), PROBS)
    assert ens.predict_batch(np.zeros((4, 70))).lead_minutes.tolist() == [2.0, 4.0, 3.0, 2.0]   # smallest fired
    ens.lead_calibration = dict(TABLE)
    assert ens.predict_batch(np.zeros((4, 70))).lead_minutes.tolist() == [5.5, 3.0, 4.25, 4.25]
    assert lead_keys(np.asarray(PROBS) > 0.5, ens.leads).tolist() == [7, 4, 3, 0]


def test_the_workers_predictor_reports_the_ensembles_lead():
    """The worker (and the offline scan of parity, which calls the same predictor) report the ensemble's
    lead: nothing else computes one."""
    from hpcguard.streams.predictors import EnsemblePredictor
    ens = _with_probs(FailureEnsemble.untrained(seed=0), PROBS)
    ens.lead_calibration = dict(TABLE)
    windows = np.zeros((4, ens.history_steps, 10))
    verdicts = EnsemblePredictor(ens, "t", {}).predict(["a", "b", "c", "d"], windows)
    assert [v.lead_minutes for v in verdicts] == ens.predict_windows(windows).lead_minutes.tolist() \
        == [5.5, 3.0, 4.25, 4.25]


def test_the_table_round_trips_through_the_state_and_older_states_have_none():
    ens = FailureEnsemble.untrained(seed=0)
    ens.lead_calibration = dict(TABLE)
    state = ens.to_state()
    assert FailureEnsemble.from_state(state).lead_calibration == TABLE
    del state["config"]["lead_calibration"]                 # a model saved before the table existed
    assert FailureEnsemble.from_state(state).lead_calibration is None


def test_the_table_survives_the_model_directory(tmp_path):
    from hpcguard.connectors.model_store import load_model, save_model
    ens = FailureEnsemble.untrained(seed=0)
    ens.lead_calibration = dict(TABLE)
    save_model(ens, tmp_path / "m", {})
    assert load_model(tmp_path / "m")[0].lead_calibration == TABLE


def _kth(x, k):
    return np.sort(x)[k - 1]


def test_calibration_takes_the_quantiles_lower_bound_per_key_and_pools_sparse_keys():
    rng = np.random.default_rng(0)
    t7, t4 = rng.uniform(3, 12, 40), rng.uniform(1, 6, 20)
    keys = np.concatenate([np.full(40, 7), np.full(20, 4), [3, 3], [0]])
    minutes = np.concatenate([t7, t4, [1.0, 2.0], [9.0]])
    table = calibrate_leads(keys, minutes)
    assert set(table["by_key"]) == {"7", "4"}                # 3 and 0 rest on too few failures: overall
    # the k-th smallest with P(Binomial(n, 0.25) >= k) >= 0.8: 40 failures -> 8th, 20 -> 3rd, 63 -> 13th
    assert table["by_key"]["7"] == pytest.approx(_kth(t7, 8), abs=0.01) and table["by_key"]["7"] <= _kth(t7, 8)
    assert table["by_key"]["4"] == pytest.approx(_kth(t4, 3), abs=0.01)
    assert table["overall"] == pytest.approx(_kth(minutes, 13), abs=0.01)
    assert table["failures"] == 63 and table["failures_by_key"]["3"] == 2
    assert (table["quantile"], table["confidence"]) == (0.25, 0.8)
    # what it promises on its own failures: at least 3 in 4 had at least that long
    assert (t7 >= table["by_key"]["7"]).mean() >= 0.75 and (minutes >= table["overall"]).mean() >= 0.75
    assert calibrate_leads([], []) is None and calibrate_leads([7], [np.nan]) is None
    assert calibrate_leads(np.full(5, 7), np.arange(5.0)) is None          # 5 failures bound nothing at 80 %
    assert calibrate_leads(np.full(6, 7), np.arange(6.0))["overall"] == 0.0
    with pytest.raises(ValueError):
        calibrate_leads(keys, minutes, quantile=1.0)


@pytest.mark.parametrize("n", [6, 12, 200])
def test_the_calibrated_lead_is_below_the_true_quantile_with_the_confidence_it_claims(n):
    """Times to failure drawn from a known law (uniform 1..9 min: 25th percentile 3 min): over many
    validation draws of n failures, the lead lies at or below 3 min in at least 80 % of them, and it
    approaches 3 min as the failures grow."""
    rng = np.random.default_rng(n)
    leads = np.array([calibrate_leads(np.full(n, 6), rng.uniform(1.0, 9.0, n))["overall"] for _ in range(1000)])
    assert (leads <= 3.0).mean() >= 0.8 - 0.03                # binomial noise of 1000 draws
    assert (leads <= 3.0).mean() <= 0.8 + 0.15 + (0.05 if n < 20 else 0)   # not much more cautious
    if n >= 200:
        assert np.median(leads) == pytest.approx(3.0, abs=0.35)


class _Rising:
    """A stand-in ensemble: warns when sensor 0 of the newest step exceeds 1; network 7 fires from 1,
    the others only from 2."""
    grid_s, history_steps, net_threshold, leads = GRID_S, 4, 0.5, (2, 3, 4, 5, 6, 7)

    def predict_windows(self, w):
        x = w[:, -1, 0]
        probs = np.where(np.arange(6)[None, :] == 5, x[:, None] > 1, x[:, None] > 2).astype(float)
        return EnsembleOutput(probs, x, x > 1, np.zeros(len(x)))


def test_warned_leads_measure_the_first_warning_before_each_failure():
    t0, steps = 0.0, 400
    v = np.zeros((2, steps, 10))
    v[0, 100:120, 0] = 1.5          # node 0 fails at step 120: first warning raised at step 101 -> 19 steps
    v[0, 110:120, 0] = 3.0
    v[1, 300:310, 0] = 3.0          # node 1 fails at step 310: first warning at step 301 -> 9 steps, all fired
    v[1, 50:60, 0] = 3.0            # a warning > 15 min before node 1's failure answers nothing
    rec = Recorded(v, t0, np.array([0, 1, 1]), np.array([120, 310, 200]) * GRID_S, ["n0", "n1"])
    keys, minutes = warned_leads(_Rising(), [rec])
    assert keys.tolist() == [7, 7] and minutes.tolist() == [19 * GRID_S / 60, 9 * GRID_S / 60]
    keys, minutes = warned_leads(_Rising(), [rec], since=150 * GRID_S)   # the validation period's only
    assert minutes.tolist() == [9 * GRID_S / 60]
