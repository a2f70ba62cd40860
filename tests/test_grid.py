import json
import math
import random

import numpy as np
import pytest

from hpcguard.models.grid import LateSample, NodeGrid


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


def test_lateness_keeps_step_open_and_late_samples_after_close_raise():
    g = NodeGrid(grid_s=15, window_steps=2, lateness_s=30)
    g.add(1, {"cpu_temp": 1.0}, last_value=True)
    assert g.add(40, {"cpu_temp": 2.0}, last_value=True) == []  # 40 - 30 < 15
    assert g.add(10, {"cpu_temp": 9.0}, last_value=True) == []  # late but step 0 still open
    assert g.add(46, {"cpu_temp": 3.0}, last_value=True) == [0.0]
    with pytest.raises(LateSample, match="behind the node's watermark"):
        g.add(2, {"cpu_temp": 99.0}, last_value=True)  # step 0 already emitted
    assert g.window(0.0)[-1, 0] == 9.0 and g.late_samples == 1


def test_a_sample_the_broker_stored_twice_counts_once_across_a_restart():
    # a producer's retry after a broker crash writes a record again at a new offset: same source, time, values
    g = NodeGrid(grid_s=15, window_steps=2, lateness_s=0)
    g.add(3, {"load_1min": 1.0}, last_value=False, source="os")
    g.add(3, {"load_1min": 1.0}, last_value=False, source="os")
    g.add(3, {"mem_used": 0.5}, last_value=False, source="os")  # another schema at the same time: kept
    restored = NodeGrid(grid_s=15, window_steps=2, lateness_s=0).load_state(json.loads(json.dumps(g.to_state())))
    delta = NodeGrid(grid_s=15, window_steps=2, lateness_s=0).apply_delta(json.loads(json.dumps(g.take_delta())))
    for grid in (g, restored, delta):
        grid.add(3, {"load_1min": 1.0}, last_value=False, source="os")    # the copy, after a worker restart too
        grid.add(9, {"load_1min": 1.0}, last_value=False, source="os")    # same value, another time: a sample
        grid.add(9, {"load_1min": 3.0}, last_value=False, source="os")
        grid.add(9, {"load_1min": 3.0}, last_value=False, source="os")
        assert grid.add(16, {"load_1min": 0.0}, last_value=False, source="os") == [0.0]
        assert grid.window(0.0)[-1, 4] == pytest.approx(5.0 / 3.0)   # 1, 1 and 3, not 1, 1, 1, 3, 3
    assert (g.duplicate_samples, restored.duplicate_samples, delta.duplicate_samples) == (3, 2, 2)


def test_state_round_trip_through_json_and_history_kept():
    g = NodeGrid(grid_s=15, window_steps=3, lateness_s=0, keep_steps=5)
    for k in range(10):
        g.add(15.0 * k, {"cpu_temp": float(k)}, last_value=True, source="ipmi")
    assert g.size <= 5 + 1
    h = NodeGrid(grid_s=15, window_steps=3, lateness_s=0, keep_steps=5).load_state(json.loads(json.dumps(g.to_state())))
    np.testing.assert_array_equal(h.window(120.0)[:, 0], [6.0, 7.0, 8.0])
    np.testing.assert_array_equal(h.window(120.0, steps=5)[:, 0], [4.0, 5.0, 6.0, 7.0, 8.0])
    assert h.complete(120.0) and not h.complete(300.0)
    assert h.add(150.0, {"cpu_temp": 10.0}, last_value=True, source="ipmi") == [135.0]
    with pytest.raises(LateSample):
        h.add(100.0, {"cpu_temp": 1.0}, last_value=True, source="ipmi")


def test_a_lagging_source_holds_the_node_however_far_behind_it_is():
    """Event time: IPMI racing an hour ahead of the OS samples must not close steps."""
    g = NodeGrid(grid_s=15, window_steps=2, lateness_s=0, idle_s=60)
    g.add(1, {"cpu_temp": 40.0}, last_value=True, source="ipmi", now=0.0)
    g.add(2, {"load_1min": 1.0}, last_value=False, source="ldms:loadavg", now=0.0)
    assert g.add(3600, {"cpu_temp": 41.0}, last_value=True, source="ipmi", now=1.0) == []
    assert g.add(5, {"load_1min": 3.0}, last_value=False, source="ldms:loadavg", now=2.0) == []
    assert g.add(20, {"load_1min": 5.0}, last_value=False, source="ldms:loadavg", now=3.0) == [0.0]
    assert g.window(0.0)[-1, 4] == 2.0 and g.late_samples == 0  # both LDMS samples made it


def test_a_source_idle_by_processing_time_stops_holding_the_node():
    g = NodeGrid(grid_s=15, window_steps=2, lateness_s=0, idle_s=60)
    g.add(2, {"load_1min": 1.0}, last_value=False, source="ldms:loadavg", now=0.0)
    g.add(1, {"cpu_temp": 40.0}, last_value=True, source="ipmi", now=0.0)
    assert g.add(300, {"cpu_temp": 42.0}, last_value=True, source="ipmi", now=30.0) == []
    assert g.advance(now=59.0) == []  # the LDMS sampler has been quiet 59 wall seconds: still live
    assert sorted(g.live_sources(now=59.0)) == ["ipmi", "ldms:loadavg"]
    assert g.advance(now=61.0) == [0.0]  # idle now
    assert g.live_sources(now=61.0) == ["ipmi"] and g.live_sources(now=91.0) == []
    assert g.live_sources(now=91.0, hold={"ipmi"}) == ["ipmi"]
    with pytest.raises(LateSample):
        g.add(3, {"load_1min": 9.0}, last_value=False, source="ldms:loadavg", now=62.0)


def test_closed_windows_do_not_depend_on_arrival_order():
    rng = np.random.default_rng(0)
    recs = [(t, {"cpu_temp": float(rng.normal(50))}, True, "ipmi") for t in np.arange(0, 600, 15.0)]
    recs += [(t, {"load_1min": float(rng.normal(5))}, False, "ldms:loadavg") for t in np.arange(0, 600, 10.0)]

    def run(order):
        g = NodeGrid(grid_s=15, window_steps=4, lateness_s=0, sources=("ipmi", "ldms:loadavg"))
        closed = []
        for t, v, last, src in order:
            closed += g.add(t, v, last, source=src)
        return closed, g.window(closed[-1]).tolist()

    in_time = run(sorted(recs, key=lambda r: r[0]))
    # topic order: each source in its own time order, the sources interleaved at random
    for seed in range(5):
        a, b = [r for r in recs if r[3] == "ipmi"], [r for r in recs if r[3] != "ipmi"]
        order, r = [], random.Random(seed)
        while a or b:
            src = a if (a and (not b or r.random() < 0.5)) else b
            order.append(src.pop(0))
        got = run(order)
        assert got[0] == in_time[0]
        np.testing.assert_array_equal(got[1], in_time[1])
    assert len(in_time[0]) == 39


def test_coverage_counts_closed_steps_with_a_value_per_sensor():
    g = NodeGrid(grid_s=15, window_steps=2, lateness_s=0)
    for t in range(0, 100, 15):
        g.add(float(t), {"cpu_temp": 1.0}, last_value=True)
    assert g.steps_closed == 6 and g.present[0] == 6 and g.present[1:].sum() == 0


def test_a_source_whose_stream_has_a_backlog_is_never_idle():
    g = NodeGrid(grid_s=15, window_steps=2, lateness_s=0, idle_s=60)
    g.add(2, {"load_1min": 1.0}, last_value=False, source="ldms:loadavg", now=0.0)
    g.add(300, {"cpu_temp": 42.0}, last_value=True, source="ipmi", now=0.0)
    assert g.advance(now=500.0, hold={"ldms:loadavg"}) == []  # its topic still has unread records
    assert g.advance(now=500.0) != []


def test_no_source_goes_idle_while_nothing_arrives_at_all():
    """A broker outage: on the stream clock (streams.liveness.StreamClock) quiet sources stay live."""
    from hpcguard.streams.liveness import StreamClock

    wall = [0.0]
    clock = StreamClock(lambda: wall[0], fresh_s=10)
    g = NodeGrid(grid_s=15, window_steps=2, lateness_s=0, idle_s=60)
    clock.heard()
    g.add(2, {"load_1min": 1.0}, last_value=False, source="ldms:loadavg", now=clock())
    g.add(20, {"cpu_temp": 42.0}, last_value=True, source="ipmi", now=clock())
    wall[0] = 300.0  # five minutes with neither records nor broker answers
    assert g.advance(now=clock()) == []  # ldms:loadavg is not idle: the stream did not move
    clock.heard()  # the broker is back; the slow source's sample is not late
    assert g.add(8, {"load_1min": 2.0}, last_value=False, source="ldms:loadavg", now=clock()) == []
    for wall[0] in range(305, 400, 5):  # other nodes' records keep arriving: the stream moves
        clock.heard()
    assert g.advance(now=clock()) == [0.0]  # now the quiet source is idle


def test_deltas_rebuild_the_grid_whatever_the_batching():
    """A copy kept up to date by take_delta/apply_delta at random batch ends equals the grid (open and
    closed steps, clocks, coverage), with two sources far apart in event time."""
    rng = np.random.default_rng(3)
    g = NodeGrid(grid_s=15, window_steps=4, lateness_s=15, keep_steps=6, sources=("ipmi", "os"))
    copy = NodeGrid(grid_s=15, window_steps=4, lateness_s=15, keep_steps=6, sources=("ipmi", "os"))
    t0 = 1_700_000_000.0
    os_times = t0 + np.arange(0, 1800, 2.0)
    ipmi_times = t0 + np.arange(0, 1800, 15.0)
    events = ([(t, "os") for t in os_times[:400]] + [(t, "ipmi") for t in ipmi_times]
              + [(t, "os") for t in os_times[400:]])  # the OS source runs 800 s ahead, then IPMI catches up
    for i, (t, src) in enumerate(events):
        g.add(float(t), {"cpu_temp": float(rng.normal(40, 1))} if src == "ipmi" else {"mem_used": float(rng.random())},
              last_value=src == "ipmi", source=src)
        if rng.random() < 0.1 or i == len(events) - 1:
            copy.apply_delta(json.loads(json.dumps(g.take_delta())))
    a, b = g.to_state(), copy.to_state()
    assert a.keys() == b.keys() and len(a["closed"]) == 6 and g.steps_closed > 100
    for part in ("open", "closed"):
        assert a[part].keys() == b[part].keys()
        for k in a[part]:
            assert np.array_equal(np.array(a[part][k], float), np.array(b[part][k], float), equal_nan=True)
    assert {k: a[k] for k in a if k not in ("open", "closed")} == {k: b[k] for k in b if k not in ("open", "closed")}
