"""The streaming pipeline run end to end on a broker, as ``hpcguard demo`` and ``hpcguard
evaluate online`` run it: topics created, worker processes started (one consumer group),
recorded files replayed, the workers' own counters followed until every hop consumed what
the previous one produced, the workers stopped; :func:`read_topic` reads what came out.

The workers are ``python -m hpcguard worker`` processes, so a run exercises what a site
deploys; their ``/metrics`` are the ground truth of progress (a broker's reported end
offsets may lag its log: tansu's do).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

from hpcguard.settings import KafkaSettings, Settings
from hpcguard.streams.topics import TopicNames


def first_timestamp(k: KafkaSettings, topics: list[str]) -> float | None:
    """Broker time (s) of the earliest record on ``topics``."""
    from kafka import KafkaConsumer, TopicPartition

    from hpcguard.connectors.kafka import kafka_python_config

    c = KafkaConsumer(**kafka_python_config(k), enable_auto_commit=False)
    try:
        tps = [TopicPartition(t, p) for t in topics for p in (c.partitions_for_topic(t) or ())]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        first: list[int] = []
        for recs in c.poll(timeout_ms=3000, max_records=100).values():
            first += [r.timestamp for r in recs]
        return min(first) / 1000.0 if first else None
    finally:
        c.close()


def read_topic(k: KafkaSettings, topic: str, timeout_ms: int = 2000) -> list[tuple[dict, int]]:
    """All records of ``topic`` as (value dict, broker timestamp ms)."""
    from kafka import KafkaConsumer

    from hpcguard.connectors.kafka import kafka_python_config

    c = KafkaConsumer(topic, **kafka_python_config(k), auto_offset_reset="earliest", group_id=None,
                      enable_auto_commit=False, consumer_timeout_ms=timeout_ms)
    try:
        return [(json.loads(m.value), m.timestamp) for m in c]
    finally:
        c.close()


def start_workers(n: int, settings: Settings, model_dir: str, workdir: Path, env: dict[str, str],
                  first_port: int | None = None, worker_args: Sequence[str] = ()) -> list[tuple]:
    """``n`` worker processes in one consumer group (``worker_args``: more ``hpcguard worker`` options,
    e.g. ``--shadow``); returns (process, metrics port) pairs."""
    from hpcguard.connectors.broker import free_port

    return [start_worker(i, settings, model_dir, workdir, env,
                         first_port if (i == 0 and first_port) else free_port(),  # followed through its counters
                         worker_args) for i in range(n)]


def start_worker(i: int, settings: Settings, model_dir: str, workdir: Path, env: dict[str, str], port: int,
                 worker_args: Sequence[str] = ()) -> tuple:
    """Worker ``i`` (its own data directory and log; the same again when it is restarted)."""
    argv = [sys.executable, "-m", "hpcguard", "worker", "--bootstrap", settings.kafka.bootstrap,
            "--model", model_dir, "--app-id", settings.worker.app_id,
            "--data-dir", f"{settings.worker.data_dir}-{i}", "--audit-log", settings.adapter.audit_log,
            "--adapter", "dry-run", "--metrics-port", str(port), *worker_args]
    log = open(workdir / f"worker-{i}.log", "ab")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True), port


def stop_workers(workers: list[tuple]) -> None:
    """SIGTERM each worker's process group; SIGKILL one still running 30 s later."""
    for proc, _ in workers:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc, _ in workers:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_pipeline(settings: Settings, data_dir: Path, model_dir: str, workdir: Path, workers: int = 1,
                 speed: float | None = None, env: dict[str, str] | None = None, quiet: bool = False,
                 timeout_s: float = 600.0, metrics_port: int | None = None,
                 groups: list[list[str]] | None = None, settle: bool = False,
                 preload: bool = False, worker_args: Sequence[str] = (), restart_workers: bool = False) -> dict[str, Any]:
    """Replay ``data_dir`` through ``workers`` worker processes on ``settings.kafka`` and wait
    until they drained it. Returns the worker counters, replayed count and elapsed seconds.

    ``groups`` (paths inside ``data_dir``) are replayed one group after another, each in
    time order — e.g. ``[["slurm"], ["ipmi"], ["ldms"]]`` publishes whole topics out of
    order; by default the directory is replayed as one time-ordered stream.  ``settle``:
    after draining, wait ``worker.idle_s`` for the sources that went quiet (failed nodes)
    to go idle, so their last steps and IO windows close too.  ``preload``: replay everything
    first and start the workers after, so they drain a backlog (what a bare consumer is timed on).
    ``restart_workers``: a worker that exits (a benchmark's kill -9) is started again with the same options
    and data directory, as a supervisor would, instead of failing the run.
    """
    from hpcguard.connectors.kafka import ensure_topics
    from hpcguard.connectors.replay import replay

    k = settings.kafka
    topics = TopicNames.from_settings(settings.topics)
    ensure_topics(k, topics.all(), settings.topics.partitions, settings.topics.replication)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {}),
           "HPCGUARD_TOPICS__PARTITIONS": str(settings.topics.partitions),
           # the demo's own ledger: deterministic action ids would otherwise meet earlier runs' rows
           "HPCGUARD_ADAPTER__LEDGER": settings.adapter.ledger}
    pace = "at maximum speed" if speed is None else f"at {speed:g}× real time"
    published: Counter = Counter()

    def replay_all() -> None:
        for group in groups or [["."]]:
            report = replay([str(data_dir / g) for g in group], k, settings.topics, speed=speed, progress=not quiet)
            published.update(report["published"])

    if preload:
        replay_all()
    procs = start_workers(workers, settings, model_dir, workdir, env, metrics_port, worker_args)
    supervisor = Supervisor(procs, lambda i: start_worker(i, settings, model_dir, workdir, env, procs[i][1],
                                                          worker_args)) if restart_workers else None
    try:
        if supervisor:
            supervisor.start()
        if not quiet:
            from rich.console import Console

            Console(stderr=True).print(f"[bold cyan]pipeline[/] {workers} worker(s) started; "
                                       + ("draining the replayed backlog" if preload else f"replaying {pace}"))
        if not preload and not wait_ready(procs, min(timeout_s, 120.0)) and not quiet:
            from rich.console import Console

            Console(stderr=True).print("[yellow]pipeline[/] workers not ready after 120 s; replaying anyway")
        started = time.time()
        if not preload:
            replay_all()
        replayed = int(sum(published.values()))
        drained_at, counters = wait_for_drain(procs, topics, dict(published), timeout_s, supervisor=supervisor)
        if settle:
            # the last steps and IO windows close by processing-time idleness once the replay stopped: wait until
            # every worker reports no live source (then every window the data allows is out), bounded
            idle_s = float(env.get("HPCGUARD_WORKER__IDLE_S") or settings.worker.idle_s)
            counters = wait_for_drain(procs, topics, dict(published), timeout_s, idle_within=2 * idle_s + 30.0,
                                      supervisor=supervisor)[1]
        # throughput counts from the workers' first output, so their start-up is not charged to the pipeline
        first_out = first_timestamp(k, [topics.samples_io, topics.samples_os, topics.samples_ipmi])
        elapsed = drained_at - max(started, first_out or started)
        return {"counters": counters, "replayed": replayed, "elapsed": elapsed, "topics": topics,
                "restarts": list(supervisor.restarts) if supervisor else []}
    finally:
        if supervisor:
            supervisor.stop()
        stop_workers(procs)


class Supervisor(threading.Thread):
    """Restarts a worker that exits (``restart(i)`` replaces ``workers[i]``), as systemd's ``Restart=always``
    would, and keeps the counters each worker reported last before it died, so a drain check still sees
    what it consumed (a restart reads some records again: consumed counts may exceed produced ones, never
    fall short).  ``restarts``: (wall time, worker, exit status) of each restart."""

    def __init__(self, workers: list[tuple], restart: Callable[[int], tuple], every_s: float = 0.5):
        super().__init__(daemon=True, name="worker-supervisor")
        self.workers, self.restart, self.every_s = workers, restart, every_s
        self.restarts: list[tuple[float, int, int]] = []
        self.seen: dict[int, dict[str, dict[str, float]]] = {}  # worker → its counters when last scraped
        self.carried: dict[str, dict[str, float]] = {}
        self.lock = threading.Lock()
        self.stop_evt = threading.Event()

    def run(self) -> None:
        import requests

        while not self.stop_evt.wait(self.every_s):
            for i, (proc, port) in enumerate(list(self.workers)):
                if proc.poll() is None:
                    try:
                        self.seen[i] = scrape_counters(port)
                    except requests.RequestException:
                        pass
                    continue
                with self.lock:
                    for side, per_topic in self.seen.pop(i, {}).items():
                        if side != "live":
                            mine = self.carried.setdefault(side, {})
                            for t, v in per_topic.items():
                                mine[t] = mine.get(t, 0.0) + v
                self.restarts.append((time.time(), i, proc.returncode))
                self.workers[i] = self.restart(i)

    def carried_counters(self) -> dict[str, dict[str, float]]:
        with self.lock:
            return {side: dict(v) for side, v in self.carried.items()}

    def stop(self) -> None:
        self.stop_evt.set()
        self.join(10)


def scrape_counters(port: int) -> dict[str, dict[str, float]]:
    """``records_in``/``records_out`` and samples out (``samples``) per topic and the live sources per table
    (``live``) from a worker's ``/metrics``."""
    import requests
    from prometheus_client.parser import text_string_to_metric_families

    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    out: dict[str, dict[str, float]] = {"in": {}, "out": {}, "samples": {}, "live": {}}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in ("hpcguard_records_in_total", "hpcguard_records_out_total"):
                out["in" if "_in_" in sample.name else "out"][sample.labels["topic"]] = sample.value
            elif sample.name == "hpcguard_samples_out_total":
                out["samples"][sample.labels["topic"]] = sample.value
            elif sample.name == "hpcguard_live_sources":
                out["live"][sample.labels["table"]] = sample.value
    return out


def scrape_ready(port: int) -> bool:
    """Whether every consumer of a worker joined its group and got partitions (``hpcguard_consumer_ready``)."""
    import requests
    from prometheus_client.parser import text_string_to_metric_families

    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    ready = [s.value for f in text_string_to_metric_families(text) for s in f.samples
             if s.name == "hpcguard_consumer_ready"]
    return bool(ready) and all(v == 1.0 for v in ready)


def wait_ready(workers: list[tuple], timeout_s: float) -> bool:
    """Wait until every worker's consumers read their partitions, so the replay's first records meet
    running workers rather than a start-up backlog; ``False`` after ``timeout_s`` (the replay goes on)."""
    import requests

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for proc, _ in workers:
            if proc.poll() is not None:
                raise RuntimeError(f"a worker exited with status {proc.returncode}; see its log in the workdir")
        try:
            if all(scrape_ready(port) for _, port in workers):
                return True
        except requests.RequestException:
            pass  # a worker is still starting
        time.sleep(0.5)
    return False


def drained(counters: dict[str, dict[str, float]], topics: TopicNames, published: dict[str, int]) -> bool:
    """Every replayed record was consumed and every hop consumed what the previous one produced.

    The worker's own counters are the ground truth here: a broker's reported end offsets
    may lag its log (tansu's do), so offsets are not used to decide.
    """
    rin, rout = counters["in"], counters["out"]
    raw_done = all(rin.get(t, 0) >= n for t, n in published.items() if t != topics.dlq)
    hops = [(rin.get("samples", 0), rout.get(topics.samples_ipmi, 0) + rout.get(topics.samples_os, 0)),
            *((rin.get(t, 0), rout.get(t, 0)) for t in (topics.samples_io, topics.jobs, topics.predictions,
                                                        topics.actions))]
    return raw_done and all(consumed >= produced for consumed, produced in hops)


def wait_for_drain(workers: list[tuple], topics: TopicNames, published: dict[str, int],
                    timeout_s: float, idle_within: float | None = None,
                    supervisor: "Supervisor | None" = None) -> tuple[float, dict[str, dict[str, float]]]:
    """Wait until the workers (summed counters) consumed everything and their outputs stopped changing.

    ``idle_within``: also wait, at most that many seconds, until no worker reports a live source
    (``hpcguard_live_sources``), i.e. every source went idle and the windows it held back closed.
    ``supervisor``: it restarts a worker that exits, and its counters so far count on; else an exit is an error."""
    import requests

    deadline = time.monotonic() + timeout_s
    idle_by = None if idle_within is None else time.monotonic() + idle_within
    last: dict[str, dict[str, float]] | None = None
    last_change = time.time()
    while time.monotonic() < deadline:
        for proc, _ in workers:
            if proc.poll() is not None and supervisor is None:
                raise RuntimeError(f"a worker exited with status {proc.returncode}; see its log in the workdir")
        time.sleep(1.0)
        counters: dict[str, dict[str, float]] = {"in": {}, "out": {}, "samples": {}, "live": {}}
        for side, per_topic in (supervisor.carried_counters() if supervisor else {}).items():
            counters[side].update(per_topic)
        try:
            for _, port in list(workers):
                for side, per_topic in scrape_counters(port).items():
                    for t, v in per_topic.items():
                        counters[side][t] = counters[side].get(t, 0.0) + v
        except requests.RequestException:
            continue  # a worker is still starting
        if {k: counters[k] for k in ("in", "out")} != {k: (last or {}).get(k) for k in ("in", "out")}:
            last, last_change = counters, time.time()
            continue
        live = sum(counters.get("live", {}).values())
        if drained(counters, topics, published) and (idle_by is None or live == 0 or time.monotonic() > idle_by):
            return last_change, counters
    raise RuntimeError(f"the pipeline did not drain within {timeout_s:.0f} s")

