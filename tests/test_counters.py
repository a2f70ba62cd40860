import numpy as np

from hpcguard.models.counters import FLAGS, CounterRate, counter_deltas, counter_rates, flag_counts


def test_rates_resets_gaps_and_disorder():
    t = np.array([0.0, 15, 30, 45, 120, 135, 135, 150])
    v = np.array([0.0, 150, 300, 100, 400, 550, 560, 700])
    rates, flags = counter_rates(t, v, max_gap_s=60)
    assert [FLAGS[f] for f in flags] == ["first", "ok", "ok", "reset", "gap", "ok", "out_of_order", "ok"]
    np.testing.assert_allclose(rates[[1, 2, 5, 7]], [10.0, 10.0, 10.0, 140 / 15])
    assert np.isnan(rates[[0, 3, 4, 6]]).all()
    assert flag_counts(flags) == {"ok": 4, "first": 1, "out_of_order": 1, "gap": 1, "reset": 1}


def test_keys_interleaved_and_2d():
    t = np.array([0.0, 0.0, 1.0, 1.0, 2.0])
    keys = np.array(["a", "b", "a", "b", "a"])
    v = np.array([[0.0, 0.0], [10.0, 5.0], [2.0, 4.0], [11.0, 3.0], [5.0, 8.0]])
    d, dt, flags = counter_deltas(t, v, 10, keys)
    assert flags.shape == (5, 2)
    np.testing.assert_array_equal(flags[:, 0], [1, 1, 0, 0, 0])
    np.testing.assert_allclose(d[2], [2.0, 4.0])
    assert np.isnan(d[3, 1]) and flags[3, 1] == FLAGS.index("reset") and d[3, 0] == 1.0
    np.testing.assert_allclose(dt, [np.nan, np.nan, 1.0, 1.0, 1.0])


def test_streaming_matches_vectorised():
    rng = np.random.default_rng(3)
    n = 2000
    keys = rng.integers(0, 5, n)
    t = np.cumsum(rng.choice([0.0, 1.0, 1.0, 1.0, 9.0], n))  # duplicates and gaps
    v = np.cumsum(rng.integers(0, 100, n)).astype(float)
    v[rng.random(n) < 0.02] = 0.0  # resets
    rates, flags = counter_rates(t, v, max_gap_s=5.0, keys=keys)
    c = CounterRate(max_gap_s=5.0)
    streamed = np.array([np.nan if (r := c.update_one(k, ti, vi)) is None else r for k, ti, vi in zip(keys, t, v)])
    np.testing.assert_array_equal(np.isnan(streamed), np.isnan(rates))
    np.testing.assert_allclose(streamed[~np.isnan(streamed)], rates[~np.isnan(rates)])
    assert c.stats == flag_counts(flags)
    assert c.stats["reset"] > 0 and c.stats["gap"] > 0 and c.stats["out_of_order"] > 0


def test_nan_value_is_not_a_rate():
    rates, flags = counter_rates(np.array([0.0, 1, 2]), np.array([0.0, np.nan, 5]), 10)
    assert np.isnan(rates).all()
    c = CounterRate(10)
    assert [c.update_one("k", t, x) for t, x in [(0, 0.0), (1, float("nan")), (2, 5.0)]] == [None, None, None]
