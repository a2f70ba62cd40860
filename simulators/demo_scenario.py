"""A PFS degradation scenario for ``hpcguard demo``: two severe episodes and the probe runs.

CanarIO (seed 004 ch. 4–5) labels a 1-minute IO window only once every probe run
overlapping it has completed; without probe start events the worker's
:class:`~hpcguard.models.canario.detector.LateLabeler` waits its timeout
(``3 × 1408 s``, the longest probe three times) after the window.  A demo of a
few hours therefore needs the episodes placed on purpose:

* the probes' first runs start together at the trace start, so the baseline
  (expected runtime = the first run of each type, ``probe_baseline_runs = 1``)
  is measured on a healthy file system; one slot per probe type keeps the probes'
  cost (a node each, all the time) at five nodes;
* episode 1 starts right after those baseline runs: its windows are labelled
  degraded by the stretched probes and join the online k-NN bank one label lag later;
* episode 2 starts one label lag after episode 1, when the detector has learnt
  episode 1: it is the one detected online (it lasts at least ``MIN_DETECT_S``);
* the recording ends with ``HEALTHY_TAIL_S`` of healthy file system after episode 2, so the
  detector sees the degradation end and the jobs it held are released (Fig. 5.1c).

For CanarIO's IO-aware actions the jobs need predicted IO sensitivities:
:func:`write_job_scripts` writes a batch script ``jobscripts/<job_id>.sh`` for every
job of the telemetry's ``slurm/sacct.txt`` (templates of
:func:`~hpcguard.simulators.pfs.scripts_for_jobs`, ground truth in
``jobscripts/sensitivity.csv``; the replay attaches each script to its job's submit
event) and :func:`train_job_classifier` pre-trains the PRIONN classifier on a
separate simulated PFS history and saves it for the worker (``worker.job_classifier``).

:func:`offline_io_actions` decides CanarIO's actions on the recorded files without a broker (the
worker's ``io`` role in event time): the demo compares them with the streamed ones, and
``benchmarks/demo_seeds.py`` counts them over many seeds.

The per-second slowdown divides every node's Lustre rates in
:func:`~hpcguard.simulators.telemetry.simulate_telemetry` (``io_slowdown=``) and
stretches the probe runtimes (IO fraction 0.9) as in
:func:`~hpcguard.simulators.pfs.simulate_pfs`.

Example
-------
>>> import tempfile
>>> sc = pfs_scenario(tempfile.mkdtemp(), start=0.0, hours=2.0, seed=7, nodes=4)
>>> sc["io_slowdown"].shape, len(sc["summary"]["episodes"]), sc["summary"]["expected_detectable"]
((7200,), 2, True)
>>> sorted(sc["env"])[:2]
['HPCGUARD_WORKER__IO_INITIAL_BANK_H', 'HPCGUARD_WORKER__IO_RETRAIN_MINUTES']
"""
from __future__ import annotations

import csv
import math
import os

import numpy as np

from hpcguard.models.canario.detector import LateLabeler
from hpcguard.models.canario.probes import PROBE_TYPES
from hpcguard.simulators.pfs import scripts_for_jobs, simulate_pfs, write_episodes_csv, write_probes_csv

PEAK_SLOWDOWN = 3.0          # severe (seed 004 Fig. 4.2 spikes reach 2–4×)
PROBE_HEAD_S = 60.0          # the probes' first runs all start within this
BASELINE_RUNS = 1            # expected runtime = the first run of a type (one slot per type: see PROBE_SLOTS)
PROBE_SLOTS = 1              # one probe run at a time per type: five nodes, the probes' node-hours are a cost
EPISODE1_S = 1200.0          # 20 minutes of episode 1
MIN_DETECT_S = 600.0         # episode 2 must last this long to detect it
HEALTHY_TAIL_S = 600.0       # healthy minutes after episode 2: the detector sees the degradation end
GRID_S = 15.0                # the telemetry's 1 s grid is rounded up to 15 s


def scenario_episodes(span_s: float, label_lag_s: float | None = None) -> tuple[list[dict], bool]:
    """Two severe episodes (seconds from the start) and whether episode 2 is learnable in time.

    Episode 2 ends ``HEALTHY_TAIL_S`` before the end of the span (its windows turn healthy again
    while the stream still runs); a span too short for that keeps the fallback layout (no
    online detection expected).

    >>> eps, ok = scenario_episodes(7200.0)
    >>> [(round(e["start"]), round(e["end"])) for e in eps], ok
    ([(1609, 2809), (5833, 6600)], True)
    >>> eps, ok = scenario_episodes(3600.0)
    >>> [(round(e["start"]), round(e["end"])) for e in eps], ok
    ([(720, 1260), (2160, 3240)], False)
    """
    lag = LateLabeler().timeout_s if label_lag_s is None else float(label_lag_s)
    first = max(p.expected_runtime_s for p in PROBE_TYPES) * 1.1 + PROBE_HEAD_S  # baseline runs done
    ep1 = (first, first + EPISODE1_S)
    ep2 = (first + lag, span_s - HEALTHY_TAIL_S)
    detectable = ep2[1] - ep2[0] >= MIN_DETECT_S
    if not detectable:  # too short to learn online: still show two episodes (no detection expected)
        ep1, ep2 = (0.2 * span_s, 0.35 * span_s), (0.6 * span_s, 0.9 * span_s)
    episodes = [{"start": float(a), "end": float(b), "kind": "short", "severity": "severe",
                 "peak_slowdown": PEAK_SLOWDOWN} for a, b in (ep1, ep2)]
    return episodes, bool(detectable)


def pfs_scenario(out_dir: str, start: float, hours: float, seed: int, nodes: int) -> dict:
    """Simulate the scenario and write ``probes.csv`` and ``degradation.csv`` into ``out_dir``.

    Parameters
    ----------
    out_dir
        The recorded-data directory the demo replays (the telemetry goes there too).
    start
        Epoch seconds of the telemetry's first sample.
    hours, seed, nodes
        As for :func:`~hpcguard.simulators.telemetry.simulate_telemetry`.

    Returns
    -------
    dict
        ``io_slowdown`` (per-second factors for ``simulate_telemetry(io_slowdown=...)``),
        ``env`` (worker settings overrides: small initial bank, short retrain cadence,
        few baseline probe runs) and ``summary`` (episodes in epoch seconds, probe count,
        whether episode 2 can be detected online).
    """
    if hours <= 0 or nodes < 1:
        raise ValueError("hours must be > 0 and nodes >= 1")
    span = int(math.ceil(hours * 3600.0 / GRID_S) * GRID_S)
    episodes, detectable = scenario_episodes(float(span))
    trace = simulate_pfs(np.random.default_rng(seed), float(start), float(start + span), n_nodes=nodes,
                         jobs_per_hour=0.0, episodes=episodes, probe_head_s=PROBE_HEAD_S, probe_slots=PROBE_SLOTS)
    recorded = trace.probes["end"] <= start + span  # a recording holds only probes completed by its end
    probes = {k: v[recorded] for k, v in trace.probes.items()}
    os.makedirs(out_dir, exist_ok=True)
    write_probes_csv(probes, os.path.join(out_dir, "probes.csv"))
    write_episodes_csv(trace.episodes, os.path.join(out_dir, "degradation.csv"))
    # the detector's first training after episode 1 has begun; retrained every 2 min of stream time
    bank_h = max(0.25, (episodes[0]["start"] + 300.0) / 3600.0)
    env = {"HPCGUARD_WORKER__IO_INITIAL_BANK_H": f"{bank_h:.3f}",
           "HPCGUARD_WORKER__IO_RETRAIN_MINUTES": "2",
           "HPCGUARD_WORKER__PROBE_BASELINE_RUNS": str(BASELINE_RUNS)}
    summary = {"episodes": [{k: ep[k] for k in ("start", "end", "peak_slowdown")} for ep in trace.episodes],
               "probes": int(probes["start"].size), "expected_detectable": detectable}
    return {"io_slowdown": trace.slowdown, "env": env, "summary": summary}


def write_job_scripts(out_dir: str, seed: int) -> dict:
    """Write ``jobscripts/<job_id>.sh`` (and ``jobscripts/sensitivity.csv``) for the jobs of ``slurm/sacct.txt``.

    Each job gets a template of :func:`~hpcguard.simulators.pfs.scripts_for_jobs`
    (application and its ground-truth IO sensitivity) rendered for its own nodes, time
    limit, user and name.  Returns ``{"jobs": n, "io_sensitive": k}``.
    """
    from hpcguard.connectors.errors import Rejected
    from hpcguard.connectors.sacct import read_sacct

    sacct = os.path.join(out_dir, "slurm", "sacct.txt")
    if not os.path.isfile(sacct):
        raise FileNotFoundError(f"{sacct} not found: simulate the telemetry first")
    jobs = [r for r in read_sacct(sacct) if not isinstance(r, Rejected)]
    made = scripts_for_jobs(np.random.default_rng(seed), jobs)
    script_dir = os.path.join(out_dir, "jobscripts")
    os.makedirs(script_dir, exist_ok=True)
    with open(os.path.join(script_dir, "sensitivity.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["job_id", "app", "io_sensitive"])
        for job, m in zip(jobs, made):
            with open(os.path.join(script_dir, f"{job['job_id']}.sh"), "w") as sh:
                sh.write(m["script"])
            w.writerow([job["job_id"], m["app"], int(m["io_sensitive"])])
    return {"jobs": len(jobs), "io_sensitive": sum(int(m["io_sensitive"]) for m in made)}


def train_job_classifier(path: str, seed: int, hours: float = 6.0, jobs_per_hour: float = 100.0) -> dict:
    """Pre-train PRIONN on a separate simulated PFS history (seed ``seed``) and save it to ``path``.

    Trains on the last 500 jobs (§4.4's training set) of ``hours`` of
    :func:`~hpcguard.simulators.pfs.simulate_pfs`; one torch thread.
    Returns ``{"path", "jobs", "io_sensitive", "seed"}``.
    """
    from hpcguard.connectors.canario_io import save_job_classifier
    from hpcguard.models.canario.prionn import JobSensitivityClassifier

    trace = simulate_pfs(np.random.default_rng(seed), 0.0, hours * 3600.0, n_nodes=32, jobs_per_hour=jobs_per_hour)
    ids = trace.jobs["job_id"]
    if ids.size == 0:
        raise ValueError("the training history has no jobs: raise hours or jobs_per_hour")
    clf = JobSensitivityClassifier(seed=seed, n_threads=1)
    clf.learn_many([trace.scripts[j] for j in ids], trace.jobs["io_sensitive"])
    save_job_classifier(clf, path)
    n = min(int(ids.size), clf.train_size)
    return {"path": path, "jobs": n, "io_sensitive": int(trace.jobs["io_sensitive"][-n:].sum()), "seed": seed}


def offline_io_actions(data_dir: str, env: dict, settings=None) -> dict:
    """CanarIO's decisions on a recorded demo directory without a broker: the worker's ``io`` role
    (:mod:`~hpcguard.streams.agents_io`) replayed in event time.

    The nodes' 1 s Lustre rates (``ldms/lustre_client.csv``, decoded as normalize decodes them)
    are summed into the system's 1-minute windows (:class:`~hpcguard.models.canario.online.SystemIoWindows`),
    each window is judged by the same :class:`~hpcguard.models.canario.online.CanarioState` the worker
    builds from ``env`` (the scenario's ``HPCGUARD_WORKER__*`` settings, the pre-trained job
    classifier included) after the probes that ended by then, and while degraded (or holding a job)
    Fig. 5.1 decides on the queue and the running jobs at the window's end (the jobs' batch scripts
    from their submit events).  A node whose samples stop (a failure, the recording's end) goes idle
    and no longer holds the windows back, as in the stream; the recording's last window is not
    judged (the newest clock never passes its end by the lateness).

    Returns ``{"windows": [(window_end, degraded, probability)], "actions": [...]}`` (the actions as
    the worker publishes them, with the same ids).
    """
    import json as _json
    from pathlib import Path

    from hpcguard.connectors.ldms import LdmsDecoder
    from hpcguard.connectors.replay import iter_recorded
    from hpcguard.connectors.sacct import decode_slurm_envelope
    from hpcguard.models.canario.online import SystemIoWindows
    from hpcguard.models.jobs import JobTimeline
    from hpcguard.settings import Settings
    from hpcguard.connectors.mapping import SensorMapping
    from hpcguard.streams.agents_io import canario_state, window_actions

    prefix = "HPCGUARD_WORKER__"
    worker = {k[len(prefix):].lower(): v for k, v in env.items() if k.startswith(prefix)}
    settings = (settings or Settings.load()).with_overrides(worker=worker)
    d = Path(data_dir)
    canario = canario_state(settings)
    timeline = JobTimeline()
    decoder = LdmsDecoder(SensorMapping.load(settings.worker.sensor_map or None))
    names, times, reads, writes = [], [], [], []
    paths = [p for p in (d / "ldms" / "lustre_client.csv", d / "slurm", d / "probes.csv") if p.exists()]
    for m in iter_recorded(paths):
        kind = getattr(m, "kind", "")
        value = _json.loads(m.value) if isinstance(m.value, (bytes, str)) else m.value
        if kind == "slurm":
            event = decode_slurm_envelope(value)
            if event.get("job_id"):
                timeline.add(event)
        elif kind == "probes":
            canario.on_probe(value["probe_id"], value["probe_type"], value["start"], value["end"])
        elif kind == "ldms:lustre_client":
            s = decoder.decode("lustre_client", value)
            if s is not None:
                names.append(s["node"])
                times.append(s["time"])
                reads.append(s["values"].get("io_read_bytes", 0.0))
                writes.append(s["values"].get("io_write_bytes", 0.0))
    windows = SystemIoWindows(window_s=settings.worker.io_window_s, idle_s=settings.worker.idle_s)
    closed, _late = windows.add_many(names, np.array(times), np.array(reads), np.array(writes), now=0.0)
    # the stream's nodes go idle once their samples stop (a failed node, the recording's end): then the
    # newest clock, not a silent node's, closes the windows
    closed += windows.advance(math.inf)
    verdicts, actions = [], []
    for window_end, features in closed:
        state = canario.on_window(window_end, features)
        verdicts.append((float(window_end), bool(state["degraded"]), float(state["probability"])))
        actions += window_actions(canario, settings.worker.system, window_end, timeline)
    return {"windows": verdicts, "actions": actions}
