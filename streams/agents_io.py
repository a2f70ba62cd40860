"""io: CanarIO (seed 004) — system IO windows, probes, degradation verdicts, IO-aware actions.

Batches of 1 s node IO rates are summed into the system's 1-minute windows
(:class:`~hpcguard.models.canario.online.SystemIoWindows`: event time, watermark over the
nodes' clocks, idle nodes by processing time); samples behind the watermark are
dead-lettered as ``late``.  Each closed window is judged by the online detector and, once
the job stream's watermark has passed the window's end (bounded wait), the Fig. 5.1
actions are decided on the queue and running jobs *at* that time.  Probes label windows
late, by the probe stream's own clock.  One IO worker per file system (``worker.system``).
"""
from __future__ import annotations

import time

import faust
import numpy as np

from hpcguard.streams import metrics
from hpcguard.streams.agents_decide import emit_action
from hpcguard.streams.agents_jobs import wait_for_jobs
from hpcguard.streams.app import out

BATCH, WITHIN_S = 2000, 0.05


def canario_state(settings):
    """The configured CanarIO state (detector bank, probe baselines, optional PRIONN classifier)."""
    from hpcguard.models.canario.detector import IoDegradationDetector
    from hpcguard.models.canario.online import CanarioState
    from hpcguard.models.canario.probes import ProbeTracker

    w = settings.worker
    classifier = None
    if w.job_classifier:
        from hpcguard.connectors.canario_io import load_job_classifier

        classifier = load_job_classifier(w.job_classifier)
    return CanarioState(detector=IoDegradationDetector(initial_bank_s=3600.0 * w.io_initial_bank_h,
                                                       retrain_every_s=60.0 * w.io_retrain_minutes),
                        classifier=classifier, tracker=ProbeTracker(n_baseline=w.probe_baseline_runs))


def register(app: faust.App) -> None:
    from hpcguard.models.canario.online import SystemIoWindows

    hpc = app.hpc
    pipe, door, w = hpc.pipeline, hpc.plumbing, hpc.settings.worker
    if pipe.canario is None:
        pipe.canario = canario_state(hpc.settings)
    canario = pipe.canario
    windows = SystemIoWindows(window_s=w.io_window_s, idle_s=w.idle_s)
    verdicts = out(app, "io_degradation")

    async def on_windows(closed: list[tuple[float, dict]], trigger_time: float | None = None) -> None:
        """Judge closed windows; ``trigger_time``: wall time the samples that closed them reached Kafka."""
        for window_end, features in closed:
            started = time.perf_counter()
            state = canario.on_window(window_end, features)
            metrics.INFERENCE_SECONDS.labels("canario").observe(time.perf_counter() - started)
            door.publish(verdicts, w.system, {
                "system": w.system, "window_start": float(window_end - w.io_window_s),
                "window_end": float(window_end), "features": features, "degraded": bool(state["degraded"]),
                "probability": float(state["probability"]), "model": str(state.get("model", "knn")), "v": 1})
            if not (state["degraded"] or canario.delayed):
                continue  # Fig. 5.1 acts only while degraded or to release what it held
            await wait_for_jobs(app, window_end)
            tl = hpc.cluster.timeline
            for a in canario.decide(window_end, tl.queued_at(window_end), tl.running_at(window_end)):
                emit_action(app, {**a, "source": "canario"}, f"canario@{w.system}@{window_end:.0f}", w.system,
                            window_end, trigger_time)

    @app.agent(hpc.topics.samples_io, name="io-windows")
    async def io_windows(stream: faust.StreamT) -> None:
        async for events in stream.take_events(BATCH, within=WITHIN_S):
            metrics.RECORDS_IN.labels(hpc.names.samples_io).inc(len(events))
            good = []
            for ev in events:
                with door.guard(ev.message.topic, ev.value, ev.message.offset):
                    s = door.decode("NodeSample", ev.value, ev.message.topic, ev.message.offset)
                    if s is not None:
                        good.append((ev, s))
            if not good:
                continue
            values = [s["values"] for _, s in good]
            closed, late = windows.add_many([s["node"] for _, s in good], np.array([s["time"] for _, s in good]),
                                            np.array([v.get("io_read_bytes", 0.0) for v in values]),
                                            np.array([v.get("io_write_bytes", 0.0) for v in values]),
                                            now=pipe.clock())
            for i in late:
                ev = good[i][0]
                door.dead_letter(ev.message.topic, "late", f"IO sample at {good[i][1]['time']} is behind the IO "
                                 "watermark (its window was already published)", ev.value, offset=ev.message.offset)
            # the batch's newest arrival moved the watermark past the windows it closed
            await on_windows(closed, max((s.get("ingest_time") or ev.message.timestamp for ev, s in good),
                                         default=None) if closed else None)
            metrics.WINDOW_STATE.labels("io-seconds").set(windows.size)

    @app.timer(1.0, name="idle-io-nodes")
    async def idle_io_nodes() -> None:
        await on_windows(windows.advance(pipe.clock()))

    @app.agent(hpc.topics.probes, name="probes")
    async def probes(stream: faust.StreamT) -> None:
        async for events in stream.take_events(500, within=WITHIN_S):
            metrics.RECORDS_IN.labels(hpc.names.probes).inc(len(events))
            for ev in events:
                with door.guard(ev.message.topic, ev.value, ev.message.offset):
                    probe = door.decode("ProbeResult", ev.value, ev.message.topic, ev.message.offset)
                    if probe is not None:
                        canario.on_probe(probe["probe_id"], probe["probe_type"], probe["start"], probe["end"])
