import math

import numpy as np

from hpcguard.models.grid import NodeGrid


def test_last_value_vs_mean_and_missing():
    g = NodeGrid(grid_s=15, window_steps=4, lateness_s=0)
    g.add(0, {"cpu_temp": 40.0}, last_value=True)
    g.add(5, {"cpu_temp": 41.0}, last_value=True)
    g.add(3, {"load_1min": 1.0}, last_value=False)
    g.add(9, {"load_1min": 3.0}, last_value=False)
    closed = g.add(16, {"cpu_temp": 50.0}, last_value=True)
    assert closed == [0.0]
    w = g.window(0.0)
    assert w[-1, 0] == 41.0  # IPMI: last value within the step
    assert w[-1, 4] == 2.0  # LDMS: mean within the step
    assert math.isnan(w[-1, 1])  # never sampled → NaN, not invented
    assert np.isnan(w[:-1]).all()  # steps before the stream began are missing


def test_lateness_keeps_step_open_and_late_samples_after_close_are_ignored():
    g = NodeGrid(grid_s=15, window_steps=2, lateness_s=30)
    g.add(1, {"cpu_temp": 1.0}, last_value=True)
    assert g.add(40, {"cpu_temp": 2.0}, last_value=True) == []  # 40 < 15 + 30
    assert g.add(10, {"cpu_temp": 9.0}, last_value=True) == []  # late but step 0 still open
    assert g.add(46, {"cpu_temp": 3.0}, last_value=True) == [0.0]
    g.add(2, {"cpu_temp": 99.0}, last_value=True)  # too late: step 0 already emitted
    assert g.window(0.0)[-1, 0] == 9.0


def test_state_round_trip_and_window_trim():
    g = NodeGrid(grid_s=15, window_steps=3, lateness_s=0)
    for k in range(10):
        g.add(15.0 * k, {"cpu_temp": float(k)}, last_value=True)
    assert g.size <= 3 + 1
    h = NodeGrid(grid_s=15, window_steps=3, lateness_s=0).load_state(g.to_state())
    np.testing.assert_array_equal(h.window(120.0)[:, 0], [6.0, 7.0, 8.0])
    assert h.complete(120.0) and not h.complete(300.0)


def test_step_waits_for_the_slowest_live_source_but_not_a_silent_one():
    g = NodeGrid(grid_s=15, window_steps=2, lateness_s=0, stale_s=120)
    g.add(1, {"cpu_temp": 40.0}, last_value=True, source="ipmi")
    g.add(2, {"load_1min": 1.0}, last_value=False, source="ldms:loadavg")
    # IPMI runs ahead (its topic was fetched first); the LDMS source is still at t=2
    assert g.add(61, {"cpu_temp": 41.0}, last_value=True, source="ipmi") == []
    assert g.add(5, {"load_1min": 3.0}, last_value=False, source="ldms:loadavg") == []
    closed = g.add(20, {"load_1min": 5.0}, last_value=False, source="ldms:loadavg")
    assert closed == [0.0]
    assert g.window(0.0)[-1, 4] == 2.0 and g.late_samples == 0  # both LDMS samples made it
    # the LDMS sampler goes silent: after stale_s the node is no longer held back by it
    assert g.add(300, {"cpu_temp": 42.0}, last_value=True, source="ipmi") != []
    g.add(3, {"load_1min": 9.0}, last_value=False, source="ldms:loadavg")
    assert g.late_samples == 1
