"""Per-stream CanarIO state: windows from node samples, detection and actions during a PFS episode."""
import json

import numpy as np
import pytest

from hpcguard.models.canario.detector import (IO_FEATURE_NAMES, IoDegradationDetector, io_window_features,
                                              io_window_features_batch)
from hpcguard.models.canario.probes import ProbeTracker
from hpcguard.simulators.pfs import simulate_pfs
from hpcguard.models.canario.online import CanarioState, SystemIoWindows
from hpcguard.settings import Settings
from hpcguard.streams.agents_io import canario_state


def test_system_windows_sum_nodes_and_match_batch_features():
    rng = np.random.default_rng(0)
    read, write = rng.lognormal(20, 0.5, 180), rng.lognormal(19, 0.5, 180)
    w = SystemIoWindows(lateness_s=2)
    closed = []
    for t in range(180):  # two nodes share the system rate
        closed += w.add_sample("n1", 60.0 + t, 0.25 * read[t], 0.5 * write[t])
        closed += w.add_sample("n2", 60.0 + t + 0.3, 0.75 * read[t], 0.5 * write[t])
    closed += w.add_sample("n1", 300.0, 0.0, 0.0)
    assert [end for end, _ in closed] == [120.0, 180.0]  # n2's clock (239.3) holds the IO watermark back
    closed += w.add_sample("n2", 300.0, 0.0, 0.0)
    batch = io_window_features_batch(read, write)
    assert [end for end, _ in closed] == [120.0, 180.0, 240.0]
    for (end, f), ref in zip(closed, batch):
        np.testing.assert_allclose([f[k] for k in IO_FEATURE_NAMES], ref, rtol=1e-9)
    closed, late = w.add_many(["n3", "n1"], np.array([100.0, 301.0]), np.ones(2), np.ones(2))
    assert closed == [] and late == [0] and w.late_samples == 1
    with pytest.raises(ValueError):
        w.add_sample("n1", float("nan"), 1.0, 1.0)


def test_demo_degradation_and_actions_during_a_simulated_episode():
    trace = simulate_pfs(np.random.default_rng(4), 0.0, 16 * 3600.0, episodes_per_day=0.0, jobs_per_hour=1)
    # inject two severe episodes: one inside the 6 h bank period's aftermath to learn from, one to detect
    s = trace.slowdown.copy()
    s[6 * 3600:8 * 3600] = 3.0
    s[11 * 3600:14 * 3600] = 3.0
    rng = np.random.default_rng(1)
    sigma = 0.25 + 0.6 * np.minimum(s - 1, 1.5)
    read = trace.io_read * trace.slowdown / s * rng.lognormal(-sigma ** 2 / 2, sigma) / rng.lognormal(-0.03, 0.25, s.size)
    write = trace.io_write * trace.slowdown / s
    feats = io_window_features_batch(read, write)
    ends = 60.0 * (np.arange(len(feats)) + 1)
    state = CanarioState(detector=IoDegradationDetector(initial_bank_s=5 * 3600.0),
                         tracker=ProbeTracker(n_baseline=5))
    # probes: 2 per 20 min, runtime ratio follows the mean slowdown during the run
    probe_ends = np.arange(1200.0, 16 * 3600.0, 600.0)
    ratio = np.array([s[int(e) - 1200:int(e)].mean() for e in probe_ends])
    pe = 0
    degraded = np.zeros(len(ends), bool)
    for i, (end, f) in enumerate(zip(ends, feats)):
        while pe < probe_ends.size and probe_ends[pe] <= end:
            state.on_probe(f"p{pe}", "probe-1", probe_ends[pe] - 1200.0 * ratio[pe], probe_ends[pe])
            pe += 1
        degraded[i] = state.on_window(end, dict(zip(IO_FEATURE_NAMES, f)))["degraded"]
    inside = (ends > 11.5 * 3600) & (ends <= 13.5 * 3600)
    quiet = (ends > 5 * 3600) & ~((ends > 5.5 * 3600) & (ends <= 8.5 * 3600)) & ~((ends > 10.5 * 3600) & (ends <= 14.5 * 3600))
    assert degraded[inside].mean() > 0.8            # the severe episode is detected
    assert 1 - degraded[quiet].mean() >= 0.95  # non-degraded windows correctly identified
    # IO-aware actions while degraded (Fig. 5.1): delay the sensitive head, replace a young sensitive job
    state.state = {"degraded": True, "probability": 1.0, "window_end": 15 * 3600.0, "features": {}}
    state.sensitivity = {"q1": 0.9, "q2": 0.1, "r1": 0.95}
    queued = [{"job_id": "q1", "num_nodes": 1}, {"job_id": "q2", "num_nodes": 1}]
    running = [{"job_id": "r1", "nodes": ["n1"], "num_nodes": 1, "start_time": 14.9 * 3600, "time_limit_s": 7200.0}]
    kinds = [(a["kind"], a["job_id"]) for a in state.decide(15 * 3600.0, queued, running)]
    assert kinds == [("delay", "q1"), ("reschedule", "r1")]
    state.state = {"degraded": False, "probability": 0.0, "window_end": 21 * 3600.0, "features": {}}
    assert [(a["kind"], a["job_id"]) for a in state.decide(21 * 3600.0, queued, [])] == [("release", "q1")]
    assert state.delayed == set()


def test_a_batch_gives_what_the_same_samples_one_by_one_give():
    rng = np.random.default_rng(2)
    nodes = rng.choice(["n1", "n2", "n3"], 600)
    times = np.sort(rng.uniform(0, 300, 600)) + rng.normal(0, 8, 600)  # jitter: some samples arrive late
    reads, writes = rng.uniform(1, 2, 600), rng.uniform(1, 2, 600)
    one = SystemIoWindows(lateness_s=5)
    seq = [w for i in range(600) for w in one.add_sample(nodes[i], times[i], reads[i], writes[i])]
    batch = SystemIoWindows(lateness_s=5)
    out = []
    for lo in range(0, 600, 97):  # uneven batches
        out += batch.add_many(nodes[lo:lo + 97], times[lo:lo + 97], reads[lo:lo + 97], writes[lo:lo + 97])[0]
    assert one.late_samples == batch.late_samples > 0
    assert [e for e, _ in out] == [e for e, _ in seq]
    for (_, f), (_, g) in zip(out, seq):
        assert f == pytest.approx(g)


def _episode_inputs():
    trace = simulate_pfs(np.random.default_rng(4), 0.0, 10 * 3600.0, episodes_per_day=0.0, jobs_per_hour=1)
    s = trace.slowdown.copy()
    s[3 * 3600:4 * 3600] = 3.0
    s[7 * 3600:9 * 3600] = 3.0
    read = trace.io_read * trace.slowdown / s
    feats = io_window_features_batch(read, trace.io_write * trace.slowdown / s)
    probe_ends = np.arange(1200.0, 10 * 3600.0, 600.0)
    ratio = np.array([s[int(e) - 1200:int(e)].mean() for e in probe_ends])
    return feats, 60.0 * (np.arange(len(feats)) + 1), probe_ends, ratio


def _fresh_state():
    return CanarioState(detector=IoDegradationDetector(initial_bank_s=2 * 3600.0, retrain_every_s=600.0),
                        tracker=ProbeTracker(n_baseline=3))


def test_canario_state_survives_a_json_round_trip_mid_stream():
    """A worker that resumes from the changelogged state judges every later window as one that never stopped."""
    feats, ends, probe_ends, ratio = _episode_inputs()
    straight, resumed = _fresh_state(), _fresh_state()
    pe, verdicts = 0, {"straight": [], "resumed": []}
    for i, (end, f) in enumerate(zip(ends, feats)):
        if i == 335:  # 5.6 h, between retrainings: labels pending, probe baselines fixed
            resumed = _fresh_state().load_state(json.loads(json.dumps(resumed.to_state())))
        while pe < probe_ends.size and probe_ends[pe] <= end:
            for state in (straight, resumed):
                state.on_probe(f"p{pe}", "probe-1", probe_ends[pe] - 1200.0 * ratio[pe], probe_ends[pe])
            pe += 1
        for name, state in (("straight", straight), ("resumed", resumed)):
            verdicts[name].append((state.on_window(end, dict(zip(IO_FEATURE_NAMES, f)))["probability"]))
    assert straight.detector.bank_size > 100
    assert np.array(verdicts["straight"])[ends > 7.5 * 3600].mean() > 0.5  # the second episode is seen
    assert verdicts["resumed"] == verdicts["straight"]
    assert resumed.to_state() == straight.to_state()


def test_system_windows_resume_from_state_mid_window():
    rng = np.random.default_rng(5)
    nodes = np.array(["n1", "n2"] * 150)
    times = 1000.0 + np.repeat(np.arange(150.0), 2) + np.tile([0.0, 0.4], 150)
    reads, writes = rng.uniform(1, 2, 300), rng.uniform(1, 2, 300)
    straight = SystemIoWindows(lateness_s=2)
    first, _ = straight.add_many(nodes[:170], times[:170], reads[:170], writes[:170])
    resumed = SystemIoWindows(lateness_s=2).load_state(json.loads(json.dumps(straight.to_state())))
    rest_a, late_a = straight.add_many(nodes[170:], times[170:], reads[170:], writes[170:])
    rest_b, late_b = resumed.add_many(nodes[170:], times[170:], reads[170:], writes[170:])
    assert [e for e, _ in first] == [1020.0, 1080.0] and [e for e, _ in rest_a] == [1140.0]
    assert rest_a == rest_b and late_a == late_b == []
    assert resumed.add_many(["n1"], [1001.0], [1.0], [1.0])[1] == [0]  # its window was published before


def test_system_windows_kept_by_deltas_equal_the_windows():
    """Deltas taken at random batch ends, applied to a copy from an early state, rebuild the open seconds,
    clocks and closed end; a node far behind keeps many seconds open (the case deltas are for)."""
    rng = np.random.default_rng(8)
    nodes = np.array(["n1", "n2", "n3"] * 400)
    times = 1000.0 + np.repeat(np.arange(400.0), 3) + np.tile([0.0, 0.3, 0.6], 400)
    times[2::3] -= 200.0  # n3 lags 200 s: about 200 seconds stay open
    w = SystemIoWindows(lateness_s=2, nodes=["n1", "n2", "n3"])
    w.add_many(nodes[:30], times[:30], np.ones(30), np.ones(30))
    copy = SystemIoWindows(lateness_s=2, nodes=["n1", "n2", "n3"]).load_state(json.loads(json.dumps(w.to_state())))
    w.take_delta()
    i, closed = 30, []
    while i < nodes.size:
        j = min(nodes.size, i + int(rng.integers(1, 60)))
        closed += w.add_many(nodes[i:j], times[i:j], rng.uniform(1, 2, j - i), rng.uniform(1, 2, j - i))[0]
        copy.apply_delta(json.loads(json.dumps(w.take_delta())))
        i = j
    assert len(closed) >= 2 and w.size > 100
    assert copy.to_state() == w.to_state()




def test_io_actions_of_a_busy_file_system_pass_the_door():
    """Variances of GB/s rates are ~1e18 (bytes/s)²: the action's reason leaves them to io.degradation."""
    from hpcguard.connectors.validation import DoorLimits, check_record

    rng = np.random.default_rng(3)
    features = io_window_features(rng.uniform(0.3e9, 5e9, 60), rng.uniform(1e9, 4e9, 60))
    assert max(features.values()) > DoorLimits().max_abs_value  # the window itself holds such values
    state = CanarioState()
    state.state = {"degraded": True, "probability": 0.8, "window_end": 1_700_000_040.0, "features": features}
    state.sensitivity = {"4021": 0.9}
    actions = state.decide(1_700_000_040.0, [{"job_id": "4021", "num_nodes": 1}], [])
    assert [a["kind"] for a in actions] == ["delay"]
    checked = check_record("Action", actions[0], DoorLimits(), now=1_700_000_040.0)
    assert checked["reason"]["features"]["read_std"] == pytest.approx(features["read_std"])


def test_expected_nodes_hold_the_io_watermark_until_they_send_or_go_idle():
    """Another worker may normalize n2's samples later than n1's: they are waited for, not judged late."""
    t = np.arange(0.0, 130.0)
    w = SystemIoWindows(lateness_s=0, idle_s=60.0, nodes=["n1", "n2"])
    assert w.add_many(["n1"] * t.size, t, np.ones(t.size), np.ones(t.size), now=0.0) == ([], [])
    closed, late = w.add_many(["n2"] * t.size, t, np.ones(t.size), np.ones(t.size), now=5.0)
    assert late == [] and [(end, f["read_mean"]) for end, f in closed] == [(60.0, 2.0), (120.0, 2.0)]
    mixed = SystemIoWindows(lateness_s=0, idle_s=60.0, nodes=["n1", "n2"])  # n2 first heard of mid-batch
    nodes = ["n1"] * t.size + ["n2"] * t.size
    closed, late = mixed.add_many(nodes, np.r_[t, t], np.ones(2 * t.size), np.ones(2 * t.size), now=0.0)
    assert late == [] and [(end, f["read_mean"]) for end, f in closed] == [(60.0, 2.0), (120.0, 2.0)]
    quiet = SystemIoWindows(lateness_s=0, idle_s=60.0, nodes=["n1", "n2"])
    assert quiet.add_many(["n1"] * t.size, t, np.ones(t.size), np.ones(t.size), now=0.0)[0] == []
    assert [end for end, _ in quiet.advance(now=61.0)] == [60.0, 120.0]  # n2 never sent: idle after 60 s
    resumed = SystemIoWindows(nodes=["n1", "n2"]).load_state(json.loads(json.dumps(quiet.to_state())))
    assert resumed.watermark() == -np.inf  # n2 is still waited for after a restart


def test_the_bank_does_not_depend_on_how_far_the_probe_stream_runs_ahead():
    """A replay publishes the few probe records far ahead of the IO backlog, or just ahead, from several partitions
    (out of order): once the probe stream has passed a window (the agent waits for that, bounded), the verdicts
    are the same — probes are applied in end-time order at the window that passes them."""
    feats, ends, probe_ends, ratio = _episode_inputs()
    probes = [(f"p{k}", "probe-1", e - 1200.0 * r, e) for k, (e, r) in enumerate(zip(probe_ends, ratio))]
    runs = {}
    for lead_s, order in ((600.0, 1), (1e9, -1)):  # 10 min ahead in order, or all before any window, reversed
        state, applied, out = _fresh_state(), 0, []
        arriving = [p for p in probes if p[3] <= ends[0] + lead_s][::order]
        for end, f in zip(ends, feats):
            for p in arriving:
                state.on_probe(*p)
            applied += len(arriving)
            arriving = [p for p in probes[applied:] if p[3] <= end + 60.0 + lead_s]
            out.append(state.on_window(end, dict(zip(IO_FEATURE_NAMES, f)))["probability"])
        runs[lead_s] = out
    assert runs[600.0] == runs[1e9]
    assert max(runs[1e9]) == 1.0  # the detector learnt and fired


def test_no_io_node_is_idle_while_the_input_has_a_backlog():
    t = np.arange(0.0, 130.0)
    w = SystemIoWindows(lateness_s=0, idle_s=60.0)
    w.add_many(["n1"] * 10 + ["n2"] * t.size, np.r_[t[:10], t], np.ones(10 + t.size), np.ones(10 + t.size), now=0.0)
    assert w.advance(now=100.0, hold=True) == []  # n1's samples may be unread: it holds the windows back
    assert w.live_nodes(now=100.0, hold=True) == ["n1", "n2"] and w.live_nodes(now=100.0) == []
    closed, late = w.add_many(["n1"], [10.0], [1.0], [1.0], now=100.0, hold=True)
    assert late == [] and closed == []
    assert [end for end, _ in w.advance(now=161.0)] == [60.0, 120.0]  # the backlog is read: n1 is quiet


def test_the_worker_detector_keeps_a_bank_that_fits_one_kafka_record():
    """The CanarIO state is one changelog record: the bank is capped (worker.io_max_bank_h) below Kafka's 1 MB."""
    settings = Settings().with_overrides(worker=dict(io_max_bank_h=2.0, io_initial_bank_h=0.5))
    det = canario_state(settings).detector
    assert det.max_bank == 120  # 2 h of 1-minute windows
    rng = np.random.default_rng(0)
    sizes = {}
    for i in range(300):
        end = 60.0 * (i + 1)
        det.observe_window(rng.lognormal(18, 0.3, len(IO_FEATURE_NAMES)), end)
        det.add_label(end, float(rng.choice([1.0, 1.2])))
        if det.bank_size in (50, 100):
            sizes[det.bank_size] = len(json.dumps(det.to_state()))
    assert 120 <= det.bank_size <= 120 + 10  # trimmed at each 10-minute retraining
    per_window = (sizes[100] - sizes[50]) / 50
    default = canario_state(Settings()).detector.max_bank
    assert default == 72 * 60 and sizes[100] + per_window * (default + 10 - 100) < 1_000_000
    assert canario_state(Settings().with_overrides(worker=dict(io_max_bank_h=0))).detector.max_bank is None
