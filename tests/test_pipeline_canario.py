"""Through the real broker: 1 s IO samples and probe runs → 1-minute observation windows
→ online kNN (trained on late probe labels) → ``io.degradation`` during a PFS episode."""
import numpy as np
import pytest

from _pipeline import WorkerProcess
from hpcguard.connectors.kafka import ensure_topics
from hpcguard.simulators.pfs import simulate_pfs

pytestmark = pytest.mark.broker

HOURS = 16


def series():
    """The system IO of ``simulate_pfs`` with two severe episodes (as tests/test_canario_agents.py)."""
    trace = simulate_pfs(np.random.default_rng(4), 0.0, HOURS * 3600.0, episodes_per_day=0.0, jobs_per_hour=1)
    slow = trace.slowdown.copy()
    slow[6 * 3600:8 * 3600] = 3.0  # an episode the detector learns from (late probe labels)
    slow[11 * 3600:14 * 3600] = 3.0  # the episode to detect
    rng = np.random.default_rng(1)
    sigma = 0.25 + 0.6 * np.minimum(slow - 1, 1.5)
    read = (trace.io_read * trace.slowdown / slow * rng.lognormal(-sigma ** 2 / 2, sigma)
            / rng.lognormal(-0.03, 0.25, slow.size))
    return read, trace.io_write * trace.slowdown / slow, slow


def test_pfs_episode_is_detected_online(kafka_settings, tmp_path):
    read, write, slow = series()
    t0 = 1_700_000_000.0
    # one NodeSamples record per minute of 1 s samples, as normalize publishes LDMS rows (one Kafka record per
    # batch); keyed and merged by the batch's last sample time
    samples = [("fs1", {"samples": [{"node": "fs1", "time": t0 + k, "source": "ldms:lustre_client", "v": 1,
                                     "values": {"io_read_bytes": float(read[k]), "io_write_bytes": float(write[k])}}
                                    for k in range(m, min(m + 60, slow.size))], "v": 1})
               for m in range(0, slow.size, 60)]
    probe_ends = np.arange(1200.0, HOURS * 3600.0 + 1.0, 600.0)  # the last one ends with the data: no window waits
    probes = [(f"p{i}", {"probe_id": f"p{i}", "probe_type": "ior-write", "v": 1,
                         "start": t0 + e - 1200.0 * slow[int(e) - 1200:int(e)].mean(), "end": t0 + e,
                         "runtime_s": 1200.0 * float(slow[int(e) - 1200:int(e)].mean())})
              for i, e in enumerate(probe_ends)]
    # the wait for probe labels is bounded by job_wait_s since the probe stream last moved: on a loaded CI
    # machine the probe hop (probes → internal.probes) can stand still longer than the 10 s default
    env = {"HPCGUARD_WORKER__IO_INITIAL_BANK_H": "5", "HPCGUARD_WORKER__PROBE_BASELINE_RUNS": "5",
           "HPCGUARD_WORKER__JOB_WAIT_S": "30"}
    w = WorkerProcess(kafka_settings, tmp_path, roles=["io"], env=env)
    # probes complete before the windows they label are judged, as in a live system with lag
    merged = sorted([(w.topics.samples_io, kv, kv[1]["samples"][-1]["time"]) for kv in samples]
                    + [(w.topics.probes, kv, kv[1]["end"]) for kv in probes], key=lambda x: x[2])
    # all of it before the worker starts: it drains a 16 h backlog in large batches, whose state records must
    # stay under the producer's request size (a 1 MB delta once crashed the worker)
    ensure_topics(kafka_settings, w.topics.all(), w.partitions)
    # the job source's progress marker: no job runs until the end, so no IO action waits for the job stream
    w.produce(w.topics.jobs, [("", {"event": "progress", "time": t0 + HOURS * 3600.0, "v": 1})])
    w.produce_many([(topic, kv) for topic, kv, _ in merged])
    with w:
        windows = w.wait_for(w.topics.io_degradation, lambda r: len(r) >= HOURS * 60 - 2, timeout_s=240)
        log = w.log()

    ends = np.array([x["window_end"] - t0 for x in windows])
    degraded = np.array([x["degraded"] for x in windows])
    assert {x["model"] for x in windows} == {"knn"}
    assert set(windows[0]["features"]) >= {"read_mean", "read_std", "write_max", "write_median"}
    inside = (ends > 11.5 * 3600) & (ends <= 13.5 * 3600)
    quiet = ((ends > 5 * 3600) & ~((ends > 5.5 * 3600) & (ends <= 8.5 * 3600))
             & ~((ends > 10.5 * 3600) & (ends <= 14.5 * 3600)))
    assert degraded[inside].mean() > 0.8, (ends[inside][~degraded[inside]], log[-4000:])  # detected online
    assert 1 - degraded[quiet].mean() >= 0.95  # non-degraded windows stay non-degraded
    assert not degraded[ends <= 5 * 3600].any()  # no verdicts before the initial bank is full
