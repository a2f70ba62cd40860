"""Lead-time networks and the ensemble's inference/state (seed 000 §4.2.3)."""
import numpy as np
import pytest
import torch

from hpcguard.models.failure.ensemble import FailureEnsemble
from hpcguard.models.failure.networks import LEAD_MINUTES, LeadNetwork, StackedNetworks, make_networks

torch.set_num_threads(1)


def test_network_shape_70_52_tanh_2_softmax():
    net = LeadNetwork(2)
    assert (net.hidden.in_features, net.hidden.out_features, net.out.out_features) == (70, 52, 2)
    p = net.probabilities(torch.randn(5, 70))
    assert p.shape == (5, 2) and torch.allclose(p.sum(dim=1), torch.ones(5))
    # the hidden layer is tanh: scaling the input weights huge saturates at ±1
    with torch.no_grad():
        assert torch.tanh(net.hidden(torch.randn(3, 70) * 1e6)).abs().max() <= 1.0


def test_six_networks_have_their_own_initialisation_and_leads():
    nets = make_networks(seed=3)
    assert [n.lead_minutes for n in nets] == list(LEAD_MINUTES) == [2, 3, 4, 5, 6, 7]
    w = [n.hidden.weight.detach() for n in nets]
    assert all(not torch.equal(w[0], wi) for wi in w[1:])
    again = make_networks(seed=3)
    assert torch.equal(again[4].out.weight, nets[4].out.weight)   # seeded: reproducible


def test_stacked_inference_equals_per_network_inference():
    nets = make_networks(seed=1)
    stacked = StackedNetworks.from_networks(nets)
    x = torch.randn(7, 70)
    with torch.no_grad():
        per = torch.stack([n.failure_probability(x) for n in nets], dim=1).numpy()
    assert np.allclose(stacked.failure_probabilities(x.numpy()), per, atol=1e-6)
    x3 = torch.randn(7, 6, 70)
    with torch.no_grad():
        per3 = torch.stack([n.failure_probability(x3[:, i]) for i, n in enumerate(nets)], dim=1).numpy()
    assert np.allclose(stacked.failure_probabilities(x3.numpy()), per3, atol=1e-6)
    with pytest.raises(ValueError):
        stacked.failure_probabilities(np.zeros((7, 5, 70)))


def test_a_rows_probabilities_do_not_depend_on_its_batch():
    """The worker predicts a few nodes at a time, the offline scan thousands: the same bits."""
    ens = FailureEnsemble.untrained(seed=4)
    x = np.random.default_rng(3).normal(size=(500, 70))
    batch = ens.predict_batch(x)
    for rows in (slice(0, 1), slice(17, 18), slice(100, 137), slice(499, 500)):
        part = ens.predict_batch(x[rows])
        assert np.array_equal(part.network_probabilities, batch.network_probabilities[rows])
        assert np.array_equal(part.vote_probability, batch.vote_probability[rows])
    # per-lead inputs (lead_shift, the evaluation protocol) give the same bits where every network reads the row
    per_lead = ens.predict_batch(np.repeat(x[:, None], len(ens.nets), axis=1))
    assert np.array_equal(per_lead.network_probabilities, batch.network_probabilities)
    assert np.array_equal(per_lead.vote_probability, batch.vote_probability)


def test_inference_follows_weights_changed_in_place():
    """The fused inference weights are rebuilt after an in-place change (an optimiser step, load_state_dict)."""
    ens, other = FailureEnsemble.untrained(seed=4), FailureEnsemble.untrained(seed=5)
    x = np.random.default_rng(3).normal(size=(20, 70))
    ens.predict_batch(x)
    for net, o in zip(ens.nets, other.nets):
        net.load_state_dict(o.state_dict())
    ens.voter.load_state_dict(other.voter.state_dict())
    assert np.array_equal(ens.predict_batch(x).vote_probability, other.predict_batch(x).vote_probability)
    with torch.no_grad():
        ens.nets[0].hidden.weight.mul_(2.0)
    assert not np.array_equal(ens.predict_batch(x).network_probabilities[:, 0],
                              other.predict_batch(x).network_probabilities[:, 0])


def test_ensemble_predict_batch_and_state_round_trip():
    ens = FailureEnsemble.untrained(seed=2)
    x = np.random.default_rng(0).normal(size=(9, 70))
    x[0, 3] = np.nan                                     # missing feature is imputed, not propagated
    out = ens.predict_batch(x)
    assert out.network_probabilities.shape == (9, 6) and np.isfinite(out.network_probabilities).all()
    assert out.vote_probability.shape == (9,) and out.warn.dtype == bool
    assert np.all(np.isin(out.lead_minutes, [2, 3, 4, 5, 6, 7]))
    again = FailureEnsemble.from_state(ens.to_state()).predict_batch(x)
    assert np.array_equal(again.vote_probability, out.vote_probability)
    with pytest.raises(ValueError):
        ens.predict_batch(np.zeros((3, 69)))
    with pytest.raises(ValueError):
        FailureEnsemble.from_state({"config": {"kind": "other"}, "weights": {}})
    # a model whose feature set has since gained statistics is refused with the reason, not misfed
    stale = ens.to_state()
    stale["config"]["statistics"] = stale["config"]["statistics"][:-1]
    with pytest.raises(ValueError, match="another version of feature set 'paper'.*retrain"):
        FailureEnsemble.from_state(stale)


def test_reported_lead_is_the_smallest_lead_whose_network_fired():
    ens = FailureEnsemble.untrained(seed=0)
    ens.vote, ens.n_unanimous = "unanimous", 2          # sequence starts with the 7- and 6-minute nets
    with torch.no_grad():
        for net, fire in zip(ens.nets, [False, False, True, False, True, True]):   # leads 2..7
            net.out.weight.zero_()
            net.out.bias.copy_(torch.tensor([0.0, 5.0 if fire else -5.0]))
    out = ens.predict_batch(np.zeros((2, 70)))
    assert out.warn.all()
    assert out.lead_minutes.tolist() == [4.0, 4.0]


@pytest.mark.parametrize("features", ["paper", "robust"])
def test_lead_shifted_online_vote_is_the_event_vote_two_minutes_later(features):
    """With ``lead_shift`` the online inputs are those the voter was trained and thresholded on:
    the history ending at step ``e`` gives each network exactly the window an event at ``e + 8``
    (2 minutes later) gives it — not the same latest window for all six."""
    from hpcguard.models.failure.dataset import event_features
    from hpcguard.models.failure.voting import LstmVoter
    from hpcguard.models.features import feature_set

    fs = feature_set(features)
    width = len(fs.feature_names)
    torch.manual_seed(4)
    nets = [LeadNetwork(lead, n_inputs=width) for lead in LEAD_MINUTES]
    stats = (np.zeros(width), np.zeros(width), np.ones(width))
    shifted = FailureEnsemble(nets, LstmVoter(), *stats, features=features, lead_shift=True)
    assert shifted.shift_steps == (0, 4, 8, 12, 16, 20)
    assert shifted.history_steps == fs.history_steps + 20
    values = np.random.default_rng(3).normal(size=(3, 400, 10))
    ends = np.array([shifted.history_steps, 250, 400])                 # exclusive end steps of histories
    histories = np.stack([values[1, e - shifted.history_steps:e] for e in ends])
    online = shifted.predict_windows(histories)
    offline = shifted.predict_batch(event_features(values, np.full(ends.size, 1), ends + 8, 15.0, LEAD_MINUTES, fs))
    assert np.array_equal(online.network_probabilities, offline.network_probabilities)
    assert np.array_equal(online.vote_probability, offline.vote_probability)
    assert np.array_equal(shifted.online_vote(histories), offline.vote_probability)
    # without the shift every network reads the latest history: another input, another vote
    same = FailureEnsemble(nets, shifted.voter, *stats, features=features)
    latest = same.predict_windows(histories[:, 20:])
    assert np.array_equal(latest.network_probabilities[:, 0], online.network_probabilities[:, 0])  # the 2-min net
    assert not np.array_equal(latest.network_probabilities[:, 1:], online.network_probabilities[:, 1:])
    # the shift travels with the model; a model saved without it (trained before it) reads the latest history
    assert FailureEnsemble.from_state(shifted.to_state()).history_steps == shifted.history_steps
    old = shifted.to_state()
    del old["config"]["lead_shift"]
    assert FailureEnsemble.from_state(old).history_steps == fs.history_steps
