"""The label-free load-and-peer deviations (models/peer_deviation.py, issue 57): small and fast."""
import numpy as np

from hpcguard.models.peer_deviation import (SENSORS, calibrated, family_vote_score, load_peer_deviations,
                                            vote_of)

N, T = 9, 700


def _site(seed: int = 0):
    """Nine nodes in three racks; temperature, PSU and 1-min load follow the lagged utilisation."""
    rng = np.random.default_rng(seed)
    util = np.full((N, T), 0.02)
    jobs = np.zeros((N, T), int)
    util[0:3, 150:450], jobs[0:3, 150:450] = 0.9, 11       # a three-node job
    util[3:6, 250:600], jobs[3:6, 250:600] = 0.5, 12
    util[6:9, 300:650], jobs[6:9, 300:650] = 0.7, 13
    lag = np.zeros_like(util)
    for k in range(1, T):
        lag[:, k] = lag[:, k - 1] + 0.22 * (util[:, k] - lag[:, k - 1])
    inlet = 22.0 + np.cumsum(rng.normal(0, 0.05, (3, T)), axis=1)          # a rack-wide drift
    racks = np.repeat(np.arange(3), 3)
    x = np.full((N, T, len(SENSORS)), np.nan)
    col = SENSORS.index
    x[..., col("cpu_user")] = 100 * util + rng.normal(0, 0.5, (N, T))
    x[..., col("cpu_temp")] = inlet[racks] + 18 + 25 * lag + rng.normal(0, 0.3, (N, T))
    x[..., col("psu_temp")] = inlet[racks] + 10 + 8 * lag + rng.normal(0, 0.3, (N, T))
    x[..., col("load_1min")] = 64 * lag + rng.exponential(0.05, (N, T))
    return x, jobs, racks


def test_job_starts_and_rack_drift_are_not_anomalies():
    x, jobs, racks = _site()
    fam = load_peer_deviations(x, hardware=["a"] * N, racks=racks, jobs=jobs, warmup_steps=60, halflife_steps=240)
    assert set(fam) == {"thermal", "power", "load", "memory", "disk", "network"}
    for name in ("thermal", "power", "load"):
        assert fam[name].shape == (N, T)
        assert np.nanmax(fam[name][:, 120:]) < 8.0, name       # jobs start and end, racks drift: quiet


def test_a_node_that_heats_at_the_same_load_stands_out_and_the_score_is_causal():
    x, jobs, racks = _site()
    x[4, 500:560, SENSORS.index("cpu_temp")] += np.linspace(1.0, 10.0, 60)    # node 4 overheats in its job
    fam = load_peer_deviations(x, racks=racks, jobs=jobs, warmup_steps=60, halflife_steps=240)
    th = fam["thermal"]
    assert int(np.nanargmax(th[:, 555])) == 4 and th[4, 555] > 15.0
    # causal: the steps before the change score exactly as without it
    clean = load_peer_deviations(_site()[0], racks=racks, jobs=jobs, warmup_steps=60, halflife_steps=240)["thermal"]
    np.testing.assert_array_equal(np.nan_to_num(th[:, :500], nan=-1), np.nan_to_num(clean[:, :500], nan=-1))


def test_hung_tasks_raise_the_load_family_not_a_job_start():
    x, jobs, racks = _site()
    x[7, 480:540, SENSORS.index("load_1min")] += np.linspace(5.0, 80.0, 60)    # load without CPU: tasks in D state
    fam = load_peer_deviations(x, racks=racks, jobs=jobs, warmup_steps=60, halflife_steps=240)
    assert int(np.nanargmax(fam["load"][:, 535])) == 7
    score = family_vote_score(fam)
    assert score.shape == (N, T) and np.all(np.isnan(score[:, :480]))   # calibrated from step 480 on
    assert int(np.nanargmax(score[:, 535])) == 7
    v = vote_of(score, scale=1.0)
    assert np.nanmin(v) >= 0.0 and np.nanmax(v) < 1.0


def test_calibrated_uses_only_the_past():
    s = np.arange(2000.0).reshape(2, 1000)
    c = calibrated(s, q=0.5, every=100, min_steps=200)
    assert np.isnan(c[:, :200]).all()
    assert c[0, 250] == s[0, 250] / np.quantile(s[:, :200], 0.5)
