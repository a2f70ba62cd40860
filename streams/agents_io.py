"""io: CanarIO (seed 004) — system IO windows, probes, degradation verdicts, IO-aware actions.

A file system's state has one owner: ``samples.io`` is keyed by the file system
(``worker.system``), and probe results are re-keyed by it (``internal.probes``), so one
partition, hence one worker, holds its windows, probe labels and detector.  Batches of
1 s node IO rates (``NodeSamples`` records from normalize, or single ``NodeSample``
records) are summed into the system's 1-minute windows
(:class:`~hpcguard.models.canario.online.SystemIoWindows`: event time, watermark over the
nodes' clocks — the node is in each record —, idle nodes quiet while the stream moves); samples
behind the watermark are dead-lettered as ``late``.  Each closed window is judged by the
online detector and, once the job stream's watermark has passed the window's end
(bounded wait), the Fig. 5.1 actions are decided on the queue and running jobs *at* that
time (their scripts scored by PRIONN from the job records).  Probes label windows late: a
window joins the detector's bank once the window stream and the probe stream have both
passed it by the label timeout, and each window waits (bounded) for the probe stream to
reach its end, so the bank at every retraining is the same whichever stream runs ahead.
"""
from __future__ import annotations

import time

import faust
import numpy as np

from hpcguard.streams import metrics
from hpcguard.streams.agents_decide import make_action
from hpcguard.streams.delta_log import DeltaLog
from hpcguard.streams.liveness import StreamWait, backlogged
from hpcguard.streams.topics import out

BATCH, WITHIN_S = 2000, 0.05
# input bytes applied per saved state record: a batch's delta holds the IO seconds it added, and a changelog
# record must stay well under the producer's 1 MB request size (a worker catching up on NodeSamples batches
# once crashed on a 1.0 MB delta)
SAVE_EVERY_BYTES = 256 * 1024


def bounded(events: list, limit: int = SAVE_EVERY_BYTES) -> list[list]:
    """``events`` cut into runs of at most ``limit`` raw bytes (one event alone may exceed it), in order.

    >>> from types import SimpleNamespace as E
    >>> [len(part) for part in bounded([E(value=b"x" * 100)] * 5, limit=250)]
    [2, 2, 1]
    """
    parts, part, size = [], [], 0
    for ev in events:
        n = len(ev.value) if isinstance(ev.value, (bytes, bytearray, str)) else 0
        if part and size + n > limit:
            parts.append(part)
            part, size = [], 0
        part.append(ev)
        size += n
    return parts + [part] if part else parts


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
    max_bank = int(3600.0 * w.io_max_bank_h / w.io_window_s) if w.io_max_bank_h > 0 else None
    return CanarioState(detector=IoDegradationDetector(initial_bank_s=3600.0 * w.io_initial_bank_h,
                                                       retrain_every_s=60.0 * w.io_retrain_minutes,
                                                       max_bank=max_bank),
                        classifier=classifier, tracker=ProbeTracker(n_baseline=w.probe_baseline_runs))


class SystemState:
    """One file system's CanarIO state in this worker, mirrored to a changelogged table.

    Two kinds of table entries per file system: ``<system>`` (the open IO seconds, the nodes'
    clocks and the IO offsets applied) after every batch, as a delta of what the batch changed
    (:class:`~hpcguard.streams.delta_log.DeltaLog`), ``<system>#canario`` (detector bank,
    labels, probe baselines, verdict, held jobs and the probe offsets applied) whenever it
    changes.  A worker that gets the partition (restart, rebalance) loads both before its
    first record and skips records at or below the offsets already applied.
    """

    def __init__(self, app: faust.App, canario) -> None:
        from hpcguard.models.canario.online import SystemIoWindows

        w = app.hpc.settings.worker
        if not w.system or "@" in w.system or "#" in w.system:
            raise ValueError(f"worker.system {w.system!r}: a file-system name, not empty, without '@' or '#' "
                             "(they separate the parts of its state's table keys)")
        self.key, self.canario_key = w.system, f"{w.system}#canario"
        self.table = app.Table("canario-state", default=None, partitions=app.hpc.settings.topics.partitions)
        self.settings = app.hpc.settings
        inventory = app.hpc.plumbing.inventory  # a configured hostlist: every node is waited for from the start
        nodes = sorted(inventory.known) if inventory is not None and inventory.fixed else ()
        self.new_windows = lambda: SystemIoWindows(window_s=w.io_window_s, idle_s=w.idle_s, nodes=nodes)
        self.windows, self.canario = self.new_windows(), canario
        self.offsets: dict[str, dict[int, int]] = {"io": {}, "probes": {}}
        self.partition: int | None = None  # the changelog partition (that of the file system's records)
        self.loaded = False
        self.changelog = DeltaLog(self.table)

    def restore(self) -> None:
        """Load the table's state once after (re)assignment; a later call is free."""
        if self.loaded:
            return
        io, deltas = self.changelog.load(self.key)
        if io is not None:
            self.windows.load_state(io["windows"])
        for delta in deltas:
            self.windows.apply_delta(delta["windows"])
        if io is not None or deltas:
            last = [io, *deltas][-1]
            self.offsets["io"] = {int(p): int(o) for p, o in last["offsets"].items()}
            self.partition = last["partition"]
        can = self.table.get(self.canario_key)
        if can is not None:
            self.canario.load_state(can["canario"])
            self.offsets["probes"] = {int(p): int(o) for p, o in can["offsets"].items()}
        self.loaded = True

    def revoked(self) -> None:
        """Partitions moved: forget the in-memory copy; the table is the state."""
        if not self.loaded:
            return  # nothing applied here yet (keeps a state the pipeline was given)
        self.windows, self.canario = self.new_windows(), canario_state(self.settings)
        self.offsets, self.loaded = {"io": {}, "probes": {}}, False
        self.changelog.forget()

    def new(self, stream: str, partition: int, offset: int) -> bool:
        """Whether a record was not applied yet (records up to the saved offset were)."""
        self.partition = partition
        return offset > self.offsets[stream].get(partition, -1)

    def applied(self, stream: str, partition: int, offset: int) -> None:
        self.offsets[stream][partition] = max(offset, self.offsets[stream].get(partition, -1))

    def save(self, canario_changed: bool) -> None:
        if self.partition is None:
            return
        self.changelog.write(self.partition, self.key, self._io_record)
        if canario_changed:
            self.changelog.store(self.partition, self.canario_key,
                                 {"canario": self.canario.to_state(), "offsets": self.offsets["probes"]})

    def _io_record(self, whole: bool) -> dict:
        delta = self.windows.take_delta()  # a snapshot holds the changes too: they start again from it
        return {"windows": self.windows.to_state() if whole else delta, "offsets": dict(self.offsets["io"]),
                "partition": self.partition}



def window_actions(canario, system: str, window_end: float, timeline, trigger_time: float | None = None) -> list[dict]:
    """Fig. 5.1's actions on one judged window (``canario.on_window`` first), as published: none unless the
    window is degraded or a job is held; the ids name the file system and the window.  The worker and the
    offline side (``simulators.demo_scenario.offline_io_actions``) both decide here."""
    if not (canario.state.get("degraded") or canario.delayed):
        return []
    trigger = f"canario@{system}@{window_end:.0f}"
    return [make_action({**a, "source": "canario"}, trigger, window_end, trigger_time)
            for a in canario.decide(window_end, timeline.queued_at(window_end), timeline.running_at(window_end))]


def register(app: faust.App) -> None:
    hpc = app.hpc
    pipe, door, w = hpc.pipeline, hpc.plumbing, hpc.settings.worker
    clock = hpc.stream_clock  # idleness stands still while nothing arrives (broker down)
    if pipe.canario is None:
        pipe.canario = canario_state(hpc.settings)
    fs = SystemState(app, pipe.canario)
    verdicts = out(app, "io_degradation")
    # probes arrive keyed by probe; the file system's owner (the partition of w.system) applies them
    fs_probes = hpc.raw(hpc.names.probes_fs, internal=True)
    fs_probes_out = hpc.names.probes_fs if pipe.outbox is not None else fs_probes

    def backlog() -> bool:
        """Whether ``samples.io`` still has unread records here (a consumer backlog, not silent nodes): then
        no node is judged idle."""
        return bool(backlogged(app, (hpc.names.samples_io,)))

    @app.on_partitions_revoked.connect
    async def forget(sender, revoked, **kwargs) -> None:
        fs.revoked()

    # labels join the bank at window time whichever stream ran ahead: each window first waits (bounded) for the
    # probe stream's clock to pass its end; probes this worker has yet to read (a consumer backlog on ``probes``
    # or ``internal.probes``, e.g. a loaded machine) count as moving, so a slow worker waits for them instead of
    # judging the window with other labels than a fast one (only a known backlog: a partition whose end is not
    # known yet must not hold the window forever)
    probe_topics = (hpc.names.probes, hpc.names.probes_fs)
    probe_wait = StreamWait("probe stream", lambda: fs.canario.probe_time, w.job_wait_s, metrics.PROBE_WAIT_TIMEOUTS,
                            moving=lambda: bool(backlogged(app, probe_topics, unknown_end=False)))

    async def on_windows(closed: list[tuple[float, dict]], trigger_time: float | None = None) -> None:
        """Judge closed windows; ``trigger_time``: wall time the samples that closed them reached Kafka."""
        for window_end, features in closed:
            await probe_wait.until(window_end)
            canario = fs.canario
            started = time.perf_counter()
            state = canario.on_window(window_end, features)
            metrics.INFERENCE_SECONDS.labels("canario").observe(time.perf_counter() - started)
            door.publish(verdicts, w.system, {
                "system": w.system, "window_start": float(window_end - w.io_window_s),
                "window_end": float(window_end), "features": features, "degraded": bool(state["degraded"]),
                "probability": float(state["probability"]), "model": str(state.get("model", "knn")), "v": 1})
            if not (state["degraded"] or canario.delayed):
                continue  # Fig. 5.1 acts only while degraded or to release what it held: no job to wait for
            await hpc.job_wait.until(window_end)
            for action in window_actions(canario, w.system, window_end, hpc.cluster.timeline, trigger_time):
                metrics.count_action(action)
                door.publish(out(app, "actions"), action["job_id"] or w.system, action)

    async def io_batch(events: list) -> None:
        metrics.RECORDS_IN.labels(hpc.names.samples_io).inc(len(events))
        clock.heard()
        fs.restore()
        good = []
        for ev in events:
            if not fs.new("io", ev.message.partition, ev.message.offset):
                continue  # applied before a restart: its effect is in the restored state
            with door.guard(ev.message.topic, ev.value, ev.message.offset):
                good += [(ev, s) for s in door.samples(ev.value, ev.message.topic, ev.message.offset)]
            fs.applied("io", ev.message.partition, ev.message.offset)
        if not good:
            fs.save(False)
            return
        values = [s["values"] for _, s in good]
        closed, late = fs.windows.add_many([s["node"] for _, s in good], np.array([s["time"] for _, s in good]),
                                           np.array([v.get("io_read_bytes", 0.0) for v in values]),
                                           np.array([v.get("io_write_bytes", 0.0) for v in values]),
                                           now=clock(), hold=backlog())
        for i in late:
            ev = good[i][0]
            door.dead_letter(ev.message.topic, "late", f"IO sample at {good[i][1]['time']} is behind the IO "
                             "watermark (its window was already published)", good[i][1], offset=ev.message.offset)
        # the batch's newest arrival moved the watermark past the windows it closed
        await on_windows(closed, max((s.get("ingest_time") or ev.message.timestamp for ev, s in good),
                                     default=None) if closed else None)
        fs.save(bool(closed))
        metrics.WINDOW_STATE.labels("io-seconds").set(fs.windows.size)

    @app.agent(hpc.topics.samples_io, name="io-windows")
    async def io_windows(stream: faust.StreamT) -> None:
        async for events in stream.take_events(BATCH, within=WITHIN_S):
            for part in bounded(events):  # one state record per part, each with the offsets it holds
                await io_batch(part)

    @app.timer(1.0, name="idle-io-nodes")
    async def idle_io_nodes() -> None:
        if not fs.loaded:
            metrics.LIVE_SOURCES.labels("io-seconds").set(0)
            return  # nothing of this file system here (yet)
        now, hold = clock(), backlog()
        closed = fs.windows.advance(now, hold)
        if closed:
            await on_windows(closed)
            fs.save(True)
        # after the verdicts: 0 here means every window the nodes' clocks allow is judged
        metrics.LIVE_SOURCES.labels("io-seconds").set(len(fs.windows.live_nodes(now, hold)))

    @app.agent(hpc.topics.probes, name="probes")
    async def probes(stream: faust.StreamT) -> None:
        """Checked probe results, re-keyed by file system: they label the owner's windows."""
        async for events in stream.take_events(500, within=WITHIN_S):
            metrics.RECORDS_IN.labels(hpc.names.probes).inc(len(events))
            for ev in events:
                with door.guard(ev.message.topic, ev.value, ev.message.offset):
                    probe = door.decode("ProbeResult", ev.value, ev.message.topic, ev.message.offset)
                    if probe is not None:
                        door.publish(fs_probes_out, w.system, probe)

    @app.agent(fs_probes, name="fs-probes")
    async def system_probes(stream: faust.StreamT) -> None:
        async for events in stream.take_events(500, within=WITHIN_S):
            metrics.RECORDS_IN.labels(hpc.names.probes_fs).inc(len(events))
            fs.restore()
            for ev in events:
                if not fs.new("probes", ev.message.partition, ev.message.offset):
                    continue
                with door.guard(ev.message.topic, ev.value, ev.message.offset):
                    probe = door.decode("ProbeResult", ev.value, ev.message.topic, ev.message.offset)
                    if probe is not None:
                        fs.canario.on_probe(probe["probe_id"], probe["probe_type"], probe["start"], probe["end"])
                fs.applied("probes", ev.message.partition, ev.message.offset)
            fs.save(True)
