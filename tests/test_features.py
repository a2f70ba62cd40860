"""Feature statistics (seed 000 Tab. 4.3) against a plain per-window reference."""
import math
import statistics

import numpy as np
import pytest

from hpcguard.models.features import (CANONICAL_SENSORS, FEATURE_NAMES, FEATURE_SETS, baseline_features, feature_set,
                                      io_window_features, robust_features, window_features)


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


def _history(seed=0, n=4):
    rng = np.random.default_rng(seed)
    return rng.normal(50.0, 1.0, size=(n, FEATURE_SETS["site"].history_steps, 10))


def test_site_features_ignore_per_node_baselines_and_units():
    """A node whose fans run 2,000 RPM higher (or whose BMC reports another scale) looks the same."""
    h = _history()
    h[:, -16:, 1] += np.linspace(0, 6, 16)
    z = baseline_features(h).reshape(4, 10, 7)[..., :5]
    for other in (h + 15.0, h * 3.0):                 # another per-node baseline; another unit scale
        assert np.allclose(baseline_features(other).reshape(4, 10, 7)[..., :5], z, rtol=0.05, atol=0.05)


def test_site_features_see_a_ramp_spikes_and_missing_values():
    h = _history(n=3)
    h[0, -16:, 0] += np.linspace(0, 10, 16)          # ramp in the last 4 minutes
    h[1, -16::3, 2] -= 30.0                          # intermittent single-poll droops
    h[2, -16:, 5] = np.nan                           # sensor lost in the window
    f = baseline_features(h).reshape(3, 10, 7)
    names = list(FEATURE_SETS["site"].statistics)
    assert f[0, 0, names.index("z_slope")] > 1.0 and f[0, 0, names.index("z_last")] > 5.0
    assert f[1, 2, names.index("spike_excess")] > 0.3 and f[1, 2, names.index("z_min")] < -10
    assert f[2, 5, names.index("missing")] == 1.0 and f[2, 5, names.index("z_mean")] == 0.0
    quiet = f[1, 4]
    assert abs(quiet[names.index("spike_excess")]) < 0.1 and quiet[names.index("missing")] == 0.0


def test_feature_sets_check_their_history():
    assert FEATURE_SETS["paper"].history_steps == 16 and len(FEATURE_SETS["site"].feature_names) == 70
    assert np.allclose(FEATURE_SETS["paper"](np.ones((2, 16, 10))), window_features(np.ones((2, 16, 10))))
    with pytest.raises(ValueError, match="176"):
        FEATURE_SETS["site"](np.ones((2, 16, 10)))
    with pytest.raises(ValueError, match="unknown feature set"):
        feature_set("nope")


def _robust(h):
    return robust_features(h).reshape(len(h), 10, len(FEATURE_SETS["robust"].statistics))


def test_robust_features_see_leaks_droops_and_fan_decay_but_not_a_job_start_in_the_baseline():
    rng = np.random.default_rng(1)
    h = rng.normal(50.0, 0.5, size=(4, FEATURE_SETS["robust"].history_steps, 10))
    h[:, :, 1] = rng.normal(7000.0, 30.0, size=h.shape[:2])         # fan RPM
    h[:, :, 2] = rng.normal(1.05, 0.003, size=h.shape[:2])          # Vcore
    h[:, :, 7] = rng.normal(30.0, 0.3, size=h.shape[:2])            # memory %
    h[0, -16:, 7] = np.linspace(30, 97, 16)                         # memory leak toward 100 %
    h[1, -16::4, 2] -= 0.15                                         # single-poll Vcore droops
    h[2, -16:, 1] -= np.linspace(0, 1500, 16)                       # one fan decaying (min over fans)
    h[3, 10:40, 4] += 30.0                                          # a job that ran inside the baseline only
    f = _robust(h)
    names = list(FEATURE_SETS["robust"].statistics)
    z_last, level, jump, rise = (names.index(k) for k in ("z_last", "level", "jump", "z_rise"))
    assert f[0, 7, z_last] == 20.0 and f[0, 7, level] > 0.9 and f[3, 7, level] == pytest.approx(0.3, abs=0.02)
    assert f[1, 2, jump] > 2.0 + f[3, 2, jump] and f[1, 2, names.index("z_min")] < -10
    assert f[2, 1, rise] < -10 and f[2, 1, level] < -0.15
    # the median/MAD baseline is not dragged by a past job: the node's load reads as its idle level
    assert abs(f[3, 4, z_last]) < 4 and abs(f[3, 4, level]) < 0.05


def test_robust_features_ignore_per_node_offsets_and_mark_missing():
    h = _history()[:, -FEATURE_SETS["robust"].history_steps:]
    h[:, -16:, 0] += np.linspace(0, 6, 16)
    h[1, -16:, 6] = np.nan
    f = _robust(h)
    shifted = _robust(h + 15.0)
    z = slice(0, 6)                                  # z features do not move with a per-node offset
    assert np.allclose(f[..., z], shifted[..., z], atol=0.2)
    missing = list(FEATURE_SETS["robust"].statistics).index("missing")
    full_in = list(FEATURE_SETS["robust"].statistics).index("full_in")
    assert f[1, 6, missing] == 1.0 and f[1, 6, full_in] == 100.0 and not np.isnan(f).any()
    assert np.all(np.delete(f[1, 6], [full_in, missing]) == 0.0)
    assert len(FEATURE_SETS["robust"].feature_names) == 160


def test_robust_pace_tells_a_slow_climb_from_a_fast_one_where_the_z_statistics_saturate():
    """A leak creeping up 4 points a minute and a job filling RAM 16 a minute both end far beyond 20
    baseline scales; the window's change per minute in the sensor's own units still tells them apart."""
    rng = np.random.default_rng(2)
    h = rng.normal(50.0, 0.5, size=(3, FEATURE_SETS["robust"].history_steps, 10))
    h[:, :, 7] = rng.normal(40.0, 0.3, size=h.shape[:2])
    h[0, -16:, 7] = np.linspace(76, 92, 16)            # memory leak: 16 points over the 4-minute window
    h[1, -16:, 7] = np.linspace(28, 92, 16)            # a job filling RAM: 64 points
    h[2, -16:, 1] = 7000.0 - np.linspace(0, 700, 16)   # a fan losing 10 % of its baseline speed
    h[2, :-16, 1] = rng.normal(7000.0, 30.0, size=h.shape[1] - 16)
    f = _robust(h)
    names = list(FEATURE_SETS["robust"].statistics)
    z_last, pace = names.index("z_last"), names.index("pace")
    assert f[0, 7, z_last] == f[1, 7, z_last] == 20.0                         # saturated alike
    # percent sensors: points per minute / 100 (the first and the last minute's means lie 3 minutes apart)
    assert f[0, 7, pace] == pytest.approx(16 * 12 / 15 / 3 / 100, rel=0.02)
    assert f[1, 7, pace] == pytest.approx(4 * f[0, 7, pace], rel=0.02)
    assert f[2, 1, pace] == pytest.approx(-700 * 12 / 15 / 3 / 7000, rel=0.05)  # others: relative to the baseline
    assert abs(f[0, 0, pace]) < 0.002                                            # a steady sensor: no pace


def test_robust_curve_tells_a_leak_speeding_up_from_a_job_filling_ram_evenly():
    """All three reach about the same level; a leak speeds up toward 100 % (positive curve), a job
    fills RAM at an even pace (none) or fills it and holds it (negative).  ``full_in`` is the
    minutes until 100 % at the window's pace; a flat or unknown percent sensor is never read as
    filling up."""
    rng = np.random.default_rng(3)
    h = rng.normal(50.0, 0.5, size=(4, FEATURE_SETS["robust"].history_steps, 10))
    h[:, :, 7] = rng.normal(60.0, 0.3, size=h.shape[:2])
    x = np.linspace(0.0, 1.0, 16)
    h[0, -16:, 7] = 60.0 + 33.0 * x ** 2                      # leak: 60 % → 93 %, speeding up
    h[1, -16:, 7] = 60.0 + 33.0 * x                           # job filling RAM evenly: 60 % → 93 %
    h[2, -16:, 7] = np.minimum(60.0 + 33.0 * x / 0.6, 93.0)   # job that filled RAM and holds it
    h[3, -16:, 7] = np.nan                                    # memory not reported in the window
    f = _robust(h)
    names = list(FEATURE_SETS["robust"].statistics)
    curve, full_in, level = names.index("curve"), names.index("full_in"), names.index("level")
    assert f[:3, 7, level] == pytest.approx([0.91, 0.92, 0.93], abs=0.01)
    assert f[0, 7, curve] > 0.05 and abs(f[1, 7, curve]) < 1e-9 and f[2, 7, curve] < -0.05
    assert np.all(f[:3, 7, full_in] < 2.0) and f[3, 7, full_in] == 100.0     # about a minute at their pace
    assert np.all(f[:, 5, full_in] == 100.0)                                   # cpu_user flat at 50 %
    assert np.all(f[:, [k for k in range(10) if k not in (5, 6, 7)], full_in] == 0.0)   # only percent sensors


def test_robust_features_of_one_node_equal_its_row_of_a_batch():
    """The worker computes one node's history at a time; the offline scan, thousands at once."""
    rng = np.random.default_rng(5)
    h = rng.normal(50.0, 1.0, size=(37, FEATURE_SETS["robust"].history_steps, 10))
    h[3, -9:-5, 2] = np.nan
    batch = robust_features(h)
    single = np.concatenate([robust_features(h[i:i + 1]) for i in range(len(h))])
    assert np.array_equal(batch, single)
    leads = np.stack([h[:, :-2], h[:, 1:-1], h[:, 2:]], axis=1)[..., -FEATURE_SETS["robust"].history_steps:, :]
    assert np.array_equal(robust_features(leads)[:, 1], robust_features(h[:, 1:-1][:, -leads.shape[2]:]))


def test_robust_shape_tells_an_oscillation_and_a_growing_droop_rate_from_their_look_alikes():
    """A PSU oscillating with a 2-minute period and a PSU warming with a job reach the same
    peak; only the oscillation travels beyond its net change, leaves a quadratic and reverses.
    Single-poll Vcore droops more frequent in the window's second half have a positive
    ``spike_trend``; the same number spread evenly has none.  A lost poll holds the reading
    before it: no reversal of its own."""
    rng = np.random.default_rng(4)
    h = rng.normal(50.0, 0.3, size=(5, FEATURE_SETS["robust"].history_steps, 10))
    h[:, :, 2] = rng.normal(1.8, 0.003, size=h.shape[:2])
    k = np.arange(16)
    h[0, -16:, 3] += 6.0 + 6.0 * np.sin(k * np.pi / 4)           # oscillation, 2-minute period, peak +12
    h[1, -16:, 3] += 12.0 * np.sin(k * np.pi / 30)               # warming toward the same peak
    h[2, -16:, 2][[6, 12, 13, 15]] *= 0.9                        # droops bunching toward the end
    h[3, -16:, 2][[1, 5, 9, 13]] *= 0.9                          # as many, evenly spread
    h[4, -16:, 3] += 6.0 + 6.0 * np.sin(k * np.pi / 4)
    h[4, -10, 3] = np.nan
    f = _robust(h)
    names = list(FEATURE_SETS["robust"].statistics)
    wiggle, wave, reversals, trend = (names.index(n) for n in ("wiggle", "wave", "reversals", "spike_trend"))
    osc, warm = f[0, 3], f[1, 3]
    assert abs(osc[names.index("z_max")] - warm[names.index("z_max")]) < 1.0     # the same peak in z
    assert osc[reversals] >= 3 and warm[reversals] == 0
    assert osc[wave] > 3 * warm[wave] and osc[wiggle] > warm[wiggle] + 1.0
    assert f[2, 2, trend] == 2 and f[3, 2, trend] == 0                          # 3 of 4 late against 2 and 2
    assert not np.isnan(f).any() and f[4, 3, reversals] == osc[reversals]
    assert f[4, 3, wave] == pytest.approx(osc[wave], rel=0.3)
