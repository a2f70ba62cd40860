"""Per-stream CanarIO state: windows from node samples, detection and actions during a PFS episode."""
import numpy as np
import pytest

from hpcguard.models.canario.detector import IO_FEATURE_NAMES, IoDegradationDetector, io_window_features_batch
from hpcguard.models.canario.probes import ProbeTracker
from hpcguard.simulators.pfs import simulate_pfs
from hpcguard.models.canario.online import CanarioState, SystemIoWindows


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
