"""The learned ``conv`` feature set: sequence inputs, the encoder, and a conv ensemble end to end."""
import numpy as np
import pytest

from hpcguard.connectors.model_store import load_model, save_model
from hpcguard.models.failure.dataset import Events, build_events
from hpcguard.models.failure.encoder import HISTORY_STEPS, RAW_HISTORY, encoder_feature_set, fit_encoder
from hpcguard.models.failure.ensemble import FailureEnsemble
from hpcguard.models.failure.training import train_ensemble
from hpcguard.models.features import feature_set, history_steps_of, sequence_inputs

from _failure_data import GRID, T0, synthetic_grid


def test_sequence_inputs_ignore_per_node_offsets_and_mark_missing():
    rng = np.random.default_rng(0)
    h = rng.normal(50.0, 1.0, (1, HISTORY_STEPS, 10))
    a, b = sequence_inputs(h), sequence_inputs(2.0 * h)   # a node whose sensors sit twice as high
    assert a.shape == (1, 23, HISTORY_STEPS) and a.dtype == np.float32
    other = [0, 1, 2, 3, 4, 8, 9]   # not the percent sensors, whose level is their own channel
    assert np.allclose(a[0, other], b[0, other], atol=1e-6)
    assert np.allclose(2.0 * a[0, 20:], b[0, 20:], atol=1e-6)
    h[0, -5:, 2] = np.nan
    x = sequence_inputs(h)
    assert np.all(x[0, 12, -5:] == 1.0) and np.all(x[0, 12, :-5] == 0.0) and np.all(x[0, 2, -5:] == 0.0)
    assert not np.isnan(x).any()
    with pytest.raises(ValueError, match="windows must be"):
        sequence_inputs(np.zeros((2, 10, 10)))


def test_conv_is_a_learned_set_not_a_registered_one():
    assert history_steps_of("conv") == HISTORY_STEPS == history_steps_of("robust")
    with pytest.raises(ValueError, match="learned with each model"):
        feature_set("conv")
    with pytest.raises(ValueError, match="conv"):
        feature_set("nope")
    with pytest.raises(ValueError, match="need their fitted front-end"):
        FailureEnsemble([], None, np.zeros(3), np.zeros(3), np.ones(3), features="conv")


@pytest.fixture(scope="module")
def conv_model():
    """An encoder and a conv ensemble trained on synthetic grids whose failures follow a ramp."""
    events, windows, labels = [], [], []
    grids = [synthetic_grid(seed=s) for s in (1, 2)]
    for k, (v, fn, ft) in enumerate(grids):
        ev = build_events(v, T0, GRID, fn, ft, leads=(2,), features=RAW_HISTORY, ok_ratio=10, seed=k)
        windows.append(ev.features[:, 0].reshape(-1, HISTORY_STEPS, 10))
        labels.append(ev.labels)
    encoder, report = fit_encoder(np.concatenate(windows), np.concatenate(labels), seed=0, epochs=8)
    fs = encoder_feature_set(encoder)
    for k, (v, fn, ft) in enumerate(grids):
        events.append(build_events(v, T0, GRID, fn, ft, features=fs, ok_ratio=10, seed=k))
    ens, _ = train_ensemble(Events.concat(events), seed=0, mc_splits=1, max_epochs=80, features="conv",
                            encoder=encoder)
    return ens, report, grids


def test_the_encoder_learns_the_precursor_and_the_networks_read_its_outputs(conv_model):
    ens, report, _ = conv_model
    assert report["train_auc"] > 0.9 and len(report["loss"]) == 8 and report["loss"][-1] < report["loss"][0]
    assert ens.feature_set.name == "conv" and ens.history_steps == HISTORY_STEPS
    assert len(ens.feature_set.feature_names) == ens.mean.size == 144
    v, fn, ft = synthetic_grid(seed=9)
    test = build_events(v, T0, GRID, fn, ft, features=ens.feature_set, ok_ratio=20, seed=3)
    p = ens.predict_batch(test.features).network_probabilities[:, 0]
    assert p[test.labels == 1].mean() > p[test.labels == 0].mean() + 0.3


def test_conv_features_of_one_node_equal_its_row_of_a_batch(conv_model):
    """The worker computes a few nodes' histories at a time; the offline scan, thousands at once."""
    ens, _, _ = conv_model
    rng = np.random.default_rng(5)
    h = rng.normal(50.0, 1.0, size=(37, HISTORY_STEPS, 10))
    h[3, -9:-5, 2] = np.nan
    batch = ens.feature_set(h)
    single = np.concatenate([ens.feature_set(h[i:i + 1]) for i in range(len(h))])
    assert np.array_equal(batch, single)
    votes = ens.predict_windows(h).vote_probability
    assert np.array_equal(votes, np.concatenate([ens.predict_windows(h[i:i + 1]).vote_probability
                                                 for i in range(len(h))]))


def test_a_conv_model_round_trips_through_the_model_store(conv_model, tmp_path):
    ens, _, grids = conv_model
    v = grids[0][0]
    save_model(ens, tmp_path / "m", {"features": "conv"})
    loaded, manifest = load_model(str(tmp_path / "m"))
    assert manifest["architecture"]["encoder"] == {"channels": [32, 48, 48], "kernel": 5, "dilations": [1, 2, 4]}
    assert manifest["feature_names"][0] == "conv0.recent_max" and len(manifest["feature_names"]) == 144
    h = np.stack([v[n, 500:500 + HISTORY_STEPS] for n in range(v.shape[0])])
    a, b = ens.predict_windows(h), loaded.predict_windows(h)
    assert np.array_equal(a.vote_probability, b.vote_probability) and np.array_equal(a.warn, b.warn)
