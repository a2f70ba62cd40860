"""PRIONN character-to-pixel mapping and the 2D CNN job classifier (seed 004 ch. 3, §4.4)."""
import numpy as np
import pytest

from hpcguard.models.canario.prionn import JobSensitivityClassifier, codes_to_pixels, script_to_codes


def test_mapping_pads_crops_and_preserves_layout():
    text = "\n".join(["x" * 100] + [f"line {i}" for i in range(80)])
    codes = script_to_codes(text)
    assert codes.shape == (64, 64)                     # §3.2.4: 64 rows × 64 columns
    assert (codes[0] == ord("x")).all()                # long line cropped at 64 characters
    assert bytes(codes[1, :6]).decode() == "line 0"    # each line stays on its own row
    assert (codes[1, 6:] == 32).all()                  # padded with spaces
    assert bytes(codes[63, :7]).decode() == "line 62"  # cropped after 64 lines


def test_non_ascii_and_bad_input():
    assert script_to_codes("é")[0, 0] == 127
    with pytest.raises(TypeError):
        script_to_codes(b"#!/bin/bash")


def test_binary_and_simple_transformations():
    codes = script_to_codes("a\tb c")
    assert codes_to_pixels(codes, "binary")[0, :5].tolist() == [1, 0, 1, 0, 1]
    assert codes_to_pixels(codes, "simple")[0, 0] == pytest.approx(ord("a") / 127)
    with pytest.raises(ValueError):
        codes_to_pixels(codes, "word2vec")


def _scripts(rng, n):
    out, labels = [], []
    for _ in range(n):
        io = rng.random() < 0.5
        nodes = rng.integers(1, 64)
        launch = (f"lfs setstripe -c 16 /p/lustre1/u/out\nsrun -n {nodes * 36} ./hacc_io /p/lustre1/u/out"
                  if io else f"cd /g/g20/u/hpl\nsrun -n {nodes * 36} ./xhpl")
        out.append(f"#!/bin/bash\n#SBATCH --nodes={nodes}\n#SBATCH --time=01:00:00\nmodule load gcc\n{launch}\n")
        labels.append(int(io))
    return out, np.array(labels)


def test_cnn_learns_io_sensitivity_from_script_text():
    rng = np.random.default_rng(0)
    train, y = _scripts(rng, 48)
    test, yt = _scripts(rng, 30)
    clf = JobSensitivityClassifier(min_train=10, epochs=5, seed=0)
    assert clf.predict_one(test[0]) == 0.5  # untrained
    clf.learn_many(train, y)
    acc = ((clf.predict_many(test) > 0.5) == yt).mean()
    assert acc >= 0.9


def test_retrains_after_every_n_completions_on_most_recent_jobs():
    rng = np.random.default_rng(1)
    scripts, y = _scripts(rng, 35)
    clf = JobSensitivityClassifier(train_size=12, retrain_every=10, min_train=10, epochs=1, warm_epochs=1)
    retrained = [clf.learn_one(s, bool(v)) for s, v in zip(scripts, y)]
    assert [i + 1 for i, r in enumerate(retrained) if r] == [10, 20, 30]
    assert clf.n_trainings == 3 and len(clf._buffer) == 12


def test_save_and_load_round_trip_keeps_predictions_and_training_state(tmp_path):
    from hpcguard.connectors.canario_io import load_job_classifier, save_job_classifier

    rng = np.random.default_rng(2)
    train, y = _scripts(rng, 24)
    test, _ = _scripts(rng, 10)
    clf = JobSensitivityClassifier(train_size=20, retrain_every=5, min_train=10, epochs=2, warm_epochs=1, seed=3)
    clf.learn_many(train, y)
    path = save_job_classifier(clf, str(tmp_path / "m" / "job_classifier.pt"))
    twin = load_job_classifier(path)
    np.testing.assert_allclose(twin.predict_many(test), clf.predict_many(test), rtol=1e-6)
    assert (twin.train_size, twin.retrain_every, twin.n_trainings) == (20, 5, 1)
    assert len(twin._buffer) == 20 and twin._buffer[-1][1] == int(y[-1])
    # online learning goes on from the restored state: the 5th new completion retrains
    more, ym = _scripts(rng, 5)
    assert [twin.learn_one(s, bool(v)) for s, v in zip(more, ym)] == [False] * 4 + [True]
    assert twin.n_trainings == 2


def test_loading_something_else_fails_clearly(tmp_path):
    from hpcguard.connectors.canario_io import load_job_classifier

    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="bad.pt"):
        load_job_classifier(str(bad))
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        load_job_classifier(str(tmp_path / "missing.pt"))
