"""Feature statistics (seed 000 Tab. 4.3) against a plain per-window reference."""
import math
import statistics

import numpy as np
import pytest

from hpcguard.models.features import CANONICAL_SENSORS, FEATURE_NAMES, io_window_features, window_features


def reference_features(window):
    """Plain-Python seven statistics per sensor, skipping missing values."""
    out = []
    for s in range(len(window[0])):
        xs = [row[s] for row in window if not math.isnan(row[s])]
        mean = sum(xs) / len(xs)
        var = sum((x - mean) ** 2 for x in xs) / len(xs)
        out += [statistics.median(xs), min(xs), math.sqrt(var), sum(xs), var, max(xs), mean]
    return out


def test_matches_reference_with_missing_values():
    rng = np.random.default_rng(3)
    windows = rng.normal(50, 10, size=(5, 16, 10))
    windows[rng.random(windows.shape) < 0.1] = np.nan
    windows[:, 0, :] = rng.normal(50, 10, size=(5, 10))  # at least one value per sensor
    got = window_features(windows)
    assert got.shape == (5, 70)
    for i in range(5):
        np.testing.assert_allclose(got[i], reference_features(windows[i].tolist()), rtol=1e-12)


def test_all_missing_sensor_gives_nan_not_zero():
    w = np.ones((16, 10))
    w[:, 3] = np.nan
    f = window_features(w).reshape(10, 7)
    assert np.isnan(f[3]).all()
    assert not np.isnan(np.delete(f, 3, axis=0)).any()


def test_feature_names_order():
    assert len(FEATURE_NAMES) == 70
    assert FEATURE_NAMES[0] == f"{CANONICAL_SENSORS[0]}.median"
    assert FEATURE_NAMES[7] == f"{CANONICAL_SENSORS[1]}.median"


def test_io_window_features():
    f = io_window_features(np.array([1.0, 2.0, 3.0, np.nan]), np.array([4.0, 4.0]))
    assert f["read_min"] == 1.0 and f["read_max"] == 3.0 and f["read_median"] == 2.0
    assert f["read_var"] == pytest.approx(2 / 3)
    assert f["write_std"] == 0.0 and len(f) == 12
