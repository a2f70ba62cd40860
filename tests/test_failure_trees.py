"""The learned ``trees`` feature set: the stored trees, batch-independent scores, a trees ensemble end to end."""
import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier

from hpcguard.connectors.model_store import load_model, save_model
from hpcguard.models.failure.dataset import Events, build_events
from hpcguard.models.failure.encoder import RAW_HISTORY, SequenceEncoder
from hpcguard.models.failure.ensemble import FailureEnsemble
from hpcguard.models.failure.training import train_ensemble
from hpcguard.models.failure.trees import HISTORY_STEPS, BoostedTrees, fit_trees, trees_feature_set
from hpcguard.models.features import feature_set, history_steps_of

from _failure_data import GRID, T0, synthetic_grid


def test_the_stored_trees_score_as_scikit_learn_does_missing_values_included():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 6))
    y = (x[:, 0] + 0.5 * x[:, 1] * x[:, 2] + rng.normal(0, 0.5, 3000) > 1.0).astype(int)
    x[rng.random(x.shape) < 0.1] = np.nan                       # missing samples take the learnt side
    model = HistGradientBoostingClassifier(max_iter=60, max_leaf_nodes=15, early_stopping=False,
                                           random_state=0).fit(x, y)
    trees = BoostedTrees.from_sklearn(model)
    assert trees.roots.size == 60 and trees.feature.size > 3 * trees.roots.size   # not stumps
    assert np.allclose(trees.decision_function(x), model.decision_function(x), rtol=0, atol=1e-9)
    again = BoostedTrees.from_state_dict(trees.state_dict())
    assert np.array_equal(again.decision_function(x), trees.decision_function(x))


def test_damaged_trees_are_refused_before_any_walk():
    rng = np.random.default_rng(2)
    n_inputs = len(feature_set("robust").feature_names)
    x = rng.normal(size=(500, n_inputs))
    y = (x[:, 3] > 0.5).astype(int)
    state = BoostedTrees.from_sklearn(HistGradientBoostingClassifier(max_iter=5, early_stopping=False,
                                                                     random_state=0).fit(x, y)).state_dict()
    inner = int(np.flatnonzero(~state["leaf"].numpy())[0])
    for field, value, message in (("left", inner, "outside its tree"),      # a split to itself would loop
                                  ("right", 10 ** 6, "outside its tree"),
                                  ("feature", n_inputs, "unknown input"),
                                  ("value", np.nan, "not finite")):
        bad = {k: v.clone() for k, v in state.items()}
        bad[field][inner if field != "value" else int(np.flatnonzero(state["leaf"].numpy())[0])] = value
        with pytest.raises(ValueError, match=message):
            BoostedTrees.from_state_dict(bad)
    bad = {k: v.clone() for k, v in state.items()}
    bad["threshold"] = bad["threshold"][:-1]
    with pytest.raises(ValueError, match="different lengths"):
        BoostedTrees.from_state_dict(bad)
    # trees fitted on another version of the robust statistics: their splits would read other inputs
    for older in ({k: v for k, v in state.items() if k != "n_inputs"}, {**state, "n_inputs": state["n_inputs"] - 10}):
        with pytest.raises(ValueError, match="another version of the robust statistics"):
            BoostedTrees.from_state_dict(older)


def test_a_rows_score_does_not_depend_on_its_batch():
    """The worker scores a few nodes at a time; the offline scan, thousands at once."""
    rng = np.random.default_rng(1)
    h = rng.normal(50.0, 1.0, (300, HISTORY_STEPS, 10))
    y = (np.arange(300) < 60).astype(np.int8)
    h[:60, -16:, 3] += np.linspace(0, 6, 16)                  # PSU temperature climbing before failures
    h[7, -9:-5, 2] = np.nan
    trees, report = fit_trees(feature_set("robust")(h), y, seed=0)
    assert report["max_abs_diff_sklearn"] < 1e-9 and report["train_auc"] > 0.99
    assert (report["events"], report["failures"], report["histories"]) == (300, 60, 300)
    stats = feature_set("robust")(h)
    _, two_leads = fit_trees(np.stack([stats, stats], axis=1), y, seed=0)   # each event through two histories
    assert (two_leads["events"], two_leads["failures"], two_leads["histories"]) == (300, 60, 600)
    assert report["min_samples_leaf"] == two_leads["min_samples_leaf"] == 20     # a small fit keeps the floor
    fs = trees_feature_set(trees)
    batch = fs(h)
    assert batch.shape == (300, 1)
    assert np.array_equal(batch, np.concatenate([fs(h[i:i + 1]) for i in range(len(h))]))
    assert np.array_equal(batch[:37], trees.decision_function(feature_set("robust")(h[:37]))[:, None])


def test_trees_is_a_learned_set_that_needs_its_trees():
    assert history_steps_of("trees") == HISTORY_STEPS == history_steps_of("robust")
    with pytest.raises(ValueError, match="learned with each model"):
        feature_set("trees")
    with pytest.raises(ValueError, match="need their fitted front-end"):
        FailureEnsemble([], None, np.zeros(1), np.zeros(1), np.ones(1), features="trees")
    with pytest.raises(ValueError, match="need their fitted front-end"):
        FailureEnsemble([], None, np.zeros(1), np.zeros(1), np.ones(1), features="trees", encoder=SequenceEncoder())
    with pytest.raises(ValueError, match="robust statistics"):
        fit_trees(np.zeros((10, 96, 10)), np.arange(10) % 2)


@pytest.fixture(scope="module")
def trees_model():
    """Trees and a trees ensemble trained on synthetic grids whose failures follow a ramp."""
    grids = [synthetic_grid(seed=s) for s in (1, 2)]
    windows, labels = [], []
    for k, (v, fn, ft) in enumerate(grids):
        ev = build_events(v, T0, GRID, fn, ft, leads=(2,), features=RAW_HISTORY, ok_ratio=10, seed=k)
        windows.append(ev.features[:, 0].reshape(-1, HISTORY_STEPS, 10))
        labels.append(ev.labels)
    trees, _ = fit_trees(feature_set("robust")(np.concatenate(windows)), np.concatenate(labels), seed=0)
    fs = trees_feature_set(trees)
    events = [build_events(v, T0, GRID, fn, ft, features=fs, ok_ratio=10, seed=k) for k, (v, fn, ft) in enumerate(grids)]
    ens, _ = train_ensemble(Events.concat(events), seed=0, mc_splits=1, max_epochs=80, features="trees",
                            encoder=trees)
    return ens, grids


def test_the_networks_read_the_trees_and_the_model_round_trips(trees_model, tmp_path):
    ens, grids = trees_model
    assert ens.feature_set.name == "trees" and ens.mean.size == 1 and ens.history_steps == HISTORY_STEPS
    v, fn, ft = synthetic_grid(seed=9)
    test = build_events(v, T0, GRID, fn, ft, features=ens.feature_set, ok_ratio=20, seed=3)
    p = ens.predict_batch(test.features).network_probabilities[:, 0]
    assert p[test.labels == 1].mean() > p[test.labels == 0].mean() + 0.3
    save_model(ens, tmp_path / "m", {"features": "trees"})
    loaded, manifest = load_model(str(tmp_path / "m"))
    assert manifest["architecture"]["encoder"]["kind"] == "boosted-trees"
    assert manifest["feature_names"] == ["trees.log_odds"]
    v0 = grids[0][0]
    h = np.stack([v0[n, 500:500 + HISTORY_STEPS] for n in range(v0.shape[0])])
    a, b = ens.predict_windows(h), loaded.predict_windows(h)
    assert np.array_equal(a.vote_probability, b.vote_probability) and np.array_equal(a.warn, b.warn)


def test_a_leaf_holds_a_share_of_the_rows(monkeypatch):
    """Leaves scale with the rows fitted on (a thousandth by default): 300 rows at a share of 0.1 give
    leaves of at least 30 rows, so no tree has more than 10."""
    from hpcguard.models.failure import trees as module

    rng = np.random.default_rng(2)
    stats = rng.normal(size=(300, len(feature_set("robust").feature_names)))
    y = (rng.random(300) < 0.3).astype(np.int8)
    stats[y == 1, :5] += 1.0
    _, loose = fit_trees(stats, y, seed=0)
    monkeypatch.setattr(module, "MIN_LEAF_SHARE", 0.1)
    strict, report = fit_trees(stats, y, seed=0)
    assert loose["min_samples_leaf"] == 20 and report["min_samples_leaf"] == 30
    leaves = np.bincount(np.searchsorted(strict.roots, np.flatnonzero(strict.leaf), side="right") - 1)
    assert leaves.size == strict.roots.size and leaves.max() <= 10
