"""Scale benchmark (not a test): a simulated cluster of N nodes replayed into the embedded broker
paced at 1× real time, through W worker processes, with the processes' resources sampled.

    .venv/bin/python benchmarks/bench_scale.py [--nodes 1000,4000] [--minutes 20] [--workers 1,2]
        [--detector ensemble|baseline] [--speed 1] [--kill-at-min M] [--out benchmarks/results/bench_scale.json]

A thin wrapper around what ``benchmarks/bench_pipeline.py`` runs (:func:`run_demo` on an
:class:`EmbeddedBroker`: the demo's simulated cluster, PFS scenario and worker processes, replayed
by :func:`~hpcguard.connectors.replay.replay`), with the offline parity scan off and with a
detector trained on a 64-node history (the demo's cached one: per-sensor models apply to any node
count, and training one on the benchmark's own size would take longer than the run).  Around it:

- the simulator's own time (``simulate_telemetry``'s ``generate_s``/``write_s``) per node-hour;
- the replay's own report (messages, elapsed, msgs/s: whether it could keep the pace);
- every ``--sample-s`` seconds, from ``/proc`` (psutil is not in the venv): each worker's and the
  broker's CPU seconds and RSS (peak: ``VmHWM``), this process's CPU (replay + sampler), and the
  consumer lag: the raw records the replay has sent so far minus the records the workers report
  consumed on their ``/metrics`` (``lag_by_end_offsets`` uses the broker's end offsets instead:
  tansu's trail its log by a few hundred records, so that one reads low, even negative);
- after the run: the state the changelog topics keep once compacted (bytes per node), and
  sample→prediction and sample→action latency p50/p99 over the whole run and after
  ``--warmup-s`` (counted from the replay's start), and the prediction latency per minute of the run
  (the lag in time: it grows when the workers fall behind).

``--kill-at-min M``: M minutes into the replay the first worker is killed (-9, its process group) and the
pipeline's supervisor starts it again on the same data directory, as systemd would; the run then reports
``worker_restart``: the p99 latency before the kill, when the first sample sent after the kill was predicted,
and when the latency came back (``restart_recovery``).

One JSON per (nodes, workers) and a PNG of lag and latency over time go to ``--out``'s folder.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import threading
import time
from pathlib import Path

import numpy as np

import hpcguard.connectors.replay as replay_mod
import hpcguard.simulators.telemetry as telemetry_mod
from hpcguard.connectors.broker import EmbeddedBroker
from hpcguard.settings import KafkaSettings, Settings
from hpcguard.simulators.demo_run import DemoConfig, demo_model, percentiles, read_topic, run_demo
from hpcguard.simulators.pipeline_run import scrape_counters
from hpcguard.streams.topics import TopicNames

TICK = os.sysconf("SC_CLK_TCK")


def _latencies(records: list[tuple[dict, int]], field: str, first: float, warmup_s: float = 0.0) -> list[tuple]:
    """(trigger wall time s, latency ms) per output whose trigger (``field``) came ``warmup_s`` after ``first``."""
    return [(r[field], ts - 1000.0 * r[field]) for r, ts in records
            if r.get(field) and r[field] >= first + warmup_s]


# --- /proc sampling -------------------------------------------------------------------------------------------

def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d))
    return kids


def _descendants(pid: int) -> list[int]:
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def _proc(pid: int) -> dict | None:
    """CPU seconds (user+system), RSS and peak RSS (MiB) and the command line of ``pid``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{pid}/status").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    mem = {k: int(v) / 1024.0 for k, v in re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.M)}
    return {"cpu_s": (int(stat[11]) + int(stat[12])) / TICK, "rss_mib": mem.get("VmRSS", 0.0),
            "hwm_mib": mem.get("VmHWM", 0.0), "cmd": cmd}


class Sampler(threading.Thread):
    """Every ``every`` s: CPU and memory of the workers, the broker and this process; the consumer lag."""

    def __init__(self, broker_pid: int, k: KafkaSettings, topics: TopicNames, every: float):
        super().__init__(daemon=True)
        self.broker_pid, self.k, self.topics, self.every = broker_pid, k, topics, every
        self.raw = [*topics.ldms, topics.raw_ipmi, topics.raw_probes]  # raw.slurm: see Hooks
        self.rows: list[dict] = []
        self.stop_evt = threading.Event()
        self._consumer = None
        self.hooks: "Hooks | None" = None
        # per metrics port: records consumed by the worker's earlier lives (a kill restarts it on the same port;
        # records between its last commit and the kill are counted twice, so the lag reads a little low after it)
        self._base: dict[int, float] = {}
        self._last: dict[int, float] = {}

    def snapshot(self, lag: bool = True) -> dict:
        row: dict = {"t": time.time(), "load_avg": os.getloadavg(), "workers": {}, "broker": None,
                     "self": _proc(os.getpid())}
        ports = []
        for pid in _descendants(os.getpid()):
            info = _proc(pid)
            if info is None:
                continue
            if pid == self.broker_pid:
                row["broker"] = info
            elif "hpcguard worker" in info["cmd"]:
                row["workers"][pid] = info
                m = re.search(r"--metrics-port (\d+)", info["cmd"])
                if m:
                    ports.append(int(m.group(1)))
        for info in [row["self"], row["broker"], *row["workers"].values()]:
            if info:
                info.pop("cmd", None)
        if lag and ports:
            row.update(self._lag(ports))
        return row

    def _lag(self, ports: list[int]) -> dict:
        try:
            consumed = 0.0
            for port in ports:
                now = sum(v for t, v in scrape_counters(port)["in"].items() if t in self.raw)
                if now < self._last.get(port, 0.0):  # a restarted worker (same port) counts from 0 again
                    self._base[port] = self._base.get(port, 0.0) + self._last[port]
                self._last[port] = now
                consumed += self._base.get(port, 0.0) + now
            if self._consumer is None:
                from kafka import KafkaConsumer

                from hpcguard.connectors.kafka import kafka_python_config

                self._consumer = KafkaConsumer(**kafka_python_config(self.k), enable_auto_commit=False)
            from kafka import TopicPartition

            tps = [TopicPartition(t, p) for t in self.raw for p in (self._consumer.partitions_for_topic(t) or ())]
            end = sum(self._consumer.end_offsets(tps).values()) if tps else 0
            sent = self.hooks.sent if self.hooks else 0
            return {"sent": int(sent), "end_offsets": int(end), "consumed": int(consumed),
                    "lag": int(sent - consumed), "lag_by_end_offsets": int(end - consumed)}
        except Exception as exc:  # noqa: BLE001 — a worker starting or stopping: no lag sample this tick
            return {"lag_error": f"{type(exc).__name__}: {exc}"[:200]}

    def run(self) -> None:
        while not self.stop_evt.wait(self.every):
            self.rows.append(self.snapshot())

    def stop(self) -> None:
        self.stop_evt.set()
        self.join(30)
        if self._consumer is not None:
            self._consumer.close()


# --- hooks into the project's own functions ------------------------------------------------------------------

class Hooks:
    """Wraps ``simulate_telemetry`` and ``replay`` (looked up at call time by run_demo/run_pipeline) to
    keep the simulator's timings and the replay's report, and snapshots the resources at the replay's ends."""

    def __init__(self):
        self.simulations: list[dict] = []
        self.replays: list[dict] = []
        self.sampler: Sampler | None = None
        self.slurm_topic = TopicNames.from_settings(Settings().topics).raw_slurm
        self.sent = 0  # raw records the replay handed to its producer so far
        self.replay_started: float | None = None
        self._sim, self._replay, self._iter = telemetry_mod.simulate_telemetry, replay_mod.replay, replay_mod.iter_recorded

    def __enter__(self):
        def simulate(out_dir, nodes=32, hours=2.0, seed=0, **kw):
            s = self._sim(out_dir, nodes=nodes, hours=hours, seed=seed, **kw)
            node_h = nodes * hours
            self.simulations.append({"nodes": nodes, "hours": hours, "generate_s": round(s["generate_s"], 2),
                                     "write_s": round(s["write_s"], 2),
                                     "generate_ms_per_node_hour": round(1000 * s["generate_s"] / node_h, 2),
                                     "write_ms_per_node_hour": round(1000 * s["write_s"] / node_h, 2),
                                     "values_per_s": round(s["values_per_s"])})
            return s

        def replay(*a, **kw):
            self.replay_started = time.time()
            before = self.sampler.snapshot(lag=False) if self.sampler else None
            report = self._replay(*a, **kw)
            after = self.sampler.snapshot(lag=False) if self.sampler else None
            self.replays.append({"report": report, "before": before, "after": after})
            return report

        def iter_recorded(*a, **kw):
            for item in self._iter(*a, **kw):
                yield item  # the replay sends it (after its pacing sleep) before asking for the next
                # raw.slurm left out on both sides: the replay adds job-progress markers after this iterator
                self.sent += isinstance(item, replay_mod.RawMessage) and item.topic != self.slurm_topic

        telemetry_mod.simulate_telemetry, replay_mod.replay = simulate, replay
        replay_mod.iter_recorded = iter_recorded
        return self

    def __exit__(self, *exc):
        telemetry_mod.simulate_telemetry, replay_mod.replay = self._sim, self._replay
        replay_mod.iter_recorded = self._iter


# --- a worker's kill -9 and restart at size ---------------------------------------------------------------------

class Killer(threading.Thread):
    """``after_s`` into the replay, kill -9 the first worker's process group (the pipeline's supervisor starts it
    again on the same data directory and port); ``killed_at`` is when."""

    def __init__(self, hooks: "Hooks", sampler: "Sampler", after_s: float):
        super().__init__(daemon=True, name="worker-killer")
        self.hooks, self.sampler, self.after_s = hooks, sampler, after_s
        self.killed_at: float | None = None
        self.stop_evt = threading.Event()

    def run(self) -> None:
        while self.hooks.replay_started is None:
            if self.stop_evt.wait(0.5):
                return
        if self.stop_evt.wait(max(0.0, self.hooks.replay_started + self.after_s - time.time())):
            return
        pids = sorted(self.sampler.snapshot(lag=False)["workers"])
        if pids:
            os.killpg(os.getpgid(pids[0]), signal.SIGKILL)
            self.killed_at = time.time()


def restart_recovery(predictions: list[tuple[dict, int]], killed_at: float | None, restarts: list,
                     bucket_s: float = 10.0) -> dict:
    """How long a kill -9 and restart held the predictions back: the p99 sample→prediction latency of what was
    published in the 3 min before the kill; when the first sample that arrived after the kill was predicted; and
    when the latency came back
    for good (the end of the last ``bucket_s`` bucket of publish time after the kill whose p99 was over
    max(2 × that p99, that p99 + 1 s))."""
    if killed_at is None:
        return {"killed": False}
    before = [ts / 1000.0 - r["ingest_time"] for r, ts in predictions  # published before the kill
              if r.get("ingest_time") and killed_at - 180.0 <= r["ingest_time"] and ts / 1000.0 < killed_at]
    p99 = float(np.percentile(before, 99)) if before else None
    bound = max(2 * p99, p99 + 1.0) if p99 is not None else None
    after = sorted((ts / 1000.0, ts / 1000.0 - r["ingest_time"], r["ingest_time"]) for r, ts in predictions
                   if r.get("ingest_time") and ts / 1000.0 > killed_at)
    fresh = [t for t, _, ingested in after if ingested >= killed_at]
    buckets: dict[int, list[float]] = {}
    for t, latency, _ in after:
        buckets.setdefault(int((t - killed_at) // bucket_s), []).append(latency)
    slow = [b for b, v in buckets.items() if bound is not None and np.percentile(v, 99) > bound]
    return {"killed": True, "killed_at": killed_at, "restarts": [{"at_s": round(t - killed_at, 1), "worker": i,
                                                                   "status": rc} for t, i, rc in restarts],
            "p99_before_s": round(p99, 2) if p99 is not None else None,
            "first_fresh_prediction_s": round(fresh[0] - killed_at, 1) if fresh else None,
            "latency_back_s": round((max(slow) + 1) * bucket_s, 1) if slow else 0.0,
            "p99_per_bucket_after": [{"t_s": b * bucket_s, "p99_s": round(float(np.percentile(v, 99)), 2),
                                      "n": len(v)} for b, v in sorted(buckets.items())][:60]}


# --- one run ---------------------------------------------------------------------------------------------------

def _cpu_between(a: dict, b: dict) -> dict:
    """CPU seconds each kind of process used between two snapshots."""
    w = sum(b["workers"][p]["cpu_s"] - a["workers"].get(p, {"cpu_s": 0.0})["cpu_s"] for p in b["workers"])
    br = (b["broker"]["cpu_s"] - a["broker"]["cpu_s"]) if a["broker"] and b["broker"] else None
    me = b["self"]["cpu_s"] - a["self"]["cpu_s"]
    return {"workers_cpu_s": round(w, 1), "broker_cpu_s": round(br, 1) if br is not None else None,
            "replay_cpu_s": round(me, 1)}


def changelog_state(bootstrap: str, nodes: int) -> dict:
    """What the workers' changelog topics would keep after compaction (the newest value per key, deletions
    dropped; the embedded broker itself compacts nothing): bytes and keys per topic, and per node."""
    from kafka import KafkaConsumer

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=5000,
                      check_crcs=False)  # the broker checked them; a changelog of GBs takes a while even in C
    try:
        names = sorted(t for t in c.topics() if t.endswith("-changelog"))
        out: dict = {"topics": {}}
        for name in names:
            c.subscribe([name])
            newest: dict[bytes, int] = {}
            records = largest = written = 0
            for m in c:
                records += 1
                largest = max(largest, len(m.value or b""))
                written += len(m.key or b"") + len(m.value or b"")
                if m.value is None:
                    newest.pop(m.key, None)
                else:
                    newest[m.key] = len(m.key or b"") + len(m.value)
            c.unsubscribe()
            out["topics"][name] = {"records_written": records, "keys_kept": len(newest),
                                   "bytes_kept": sum(newest.values()), "bytes_written": written,
                                   "largest_record_bytes": largest}
    finally:
        c.close()
    total = sum(t["bytes_kept"] for t in out["topics"].values())
    out["bytes_kept"] = total
    out["kib_per_node"] = round(total / nodes / 1024, 2)
    out["records_written_per_node"] = round(sum(t["records_written"] for t in out["topics"].values()) / nodes, 1)
    return out


def run_one(nodes: int, minutes: float, workers: int, args, model_dir: str, out_dir: Path) -> dict:
    tag = f"bench_scale_n{nodes}_w{workers}"
    topics = TopicNames.from_settings(Settings().topics)
    workdir = Path(args.workdir or "/tmp") / f"hpcguard-{tag}-{int(time.time())}"
    result: dict = {"nodes": nodes, "minutes": minutes, "workers": workers, "speed": args.speed,
                    "detector": args.detector, "model_dir": model_dir, "seed": args.seed,
                    "partitions": args.partitions, "cpus": os.cpu_count(), "load_avg_before": os.getloadavg(),
                    "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "workdir": str(workdir)}
    if args.partitions:
        os.environ["HPCGUARD_TOPICS__PARTITIONS"] = str(args.partitions)
    with EmbeddedBroker(log_path=None) as broker, Hooks() as hooks:
        k = KafkaSettings(bootstrap=broker.bootstrap)
        sampler = Sampler(broker.process.pid, k, topics, args.sample_s)
        hooks.sampler, sampler.hooks = sampler, hooks
        sampler.start()
        killer = Killer(hooks, sampler, args.kill_at_min * 60.0) if args.kill_at_min else None
        if killer:
            killer.start()
        t0 = time.time()
        try:
            summary = run_demo(DemoConfig(nodes=nodes, hours=minutes / 60.0, seed=args.seed, speed=args.speed,
                                          detector=args.detector, model=model_dir, bootstrap=broker.bootstrap,
                                          quiet=not args.verbose, workers=workers, offline=False,
                                          workdir=str(workdir), timeout_s=args.drain_timeout_s,
                                          restart_workers=bool(killer)))
        finally:
            sampler.stop()
            if killer:
                killer.stop_evt.set()
        result["wall_s"] = round(time.time() - t0, 1)
        predictions = read_topic(k, topics.predictions)
        actions = read_topic(k, topics.actions)
        result["changelog_state"] = changelog_state(broker.bootstrap, nodes)
        broker_alive = broker.process.poll() is None
    rep = hooks.replays[-1]
    start = rep["before"]["t"]
    end = rep["after"]["t"]
    report = rep["report"]
    result["simulator"] = hooks.simulations
    result["replay"] = {k2: report.get(k2) for k2 in ("messages", "elapsed_s", "messages_per_s", "undelivered",
                                                        "errors", "published")}
    result["replay"]["event_time_s"] = minutes * 60.0
    result["replay"]["kept_pace"] = report["elapsed_s"] <= minutes * 60.0 / args.speed * 1.02 + 5
    result["pipeline"] = {"msgs_per_s_to_drained": summary["throughput_msgs_per_s"],
                          "elapsed_to_drained_s": summary["elapsed_s"],
                          "drained_after_replay_end_s": round(summary["elapsed_s"] - (end - start), 1),
                          "replayed_records": summary["replayed_records"], "published": summary["published"],
                          "predictions": summary["predictions"], "actions": summary["actions"],
                          "dead_letters": summary["dead_letters"], "failures": {
                              k2: summary["failures"].get(k2) for k2 in ("injected", "warned", "missed",
                                                                         "false_alarms")},
                          "model": summary["model"], "broker_alive_at_end": broker_alive}
    pred = _latencies(predictions, "ingest_time", start)
    pred_w = _latencies(predictions, "ingest_time", start, args.warmup_s)
    act = _latencies(actions, "trigger_time", start)
    act_w = _latencies(actions, "trigger_time", start, args.warmup_s)
    result["latency_ms"] = {"sample_to_prediction": percentiles([v for _, v in pred]),
                            f"sample_to_prediction_after_{args.warmup_s:.0f}s": percentiles([v for _, v in pred_w]),
                            "sample_to_action": percentiles([v for _, v in act]),
                            f"sample_to_action_after_{args.warmup_s:.0f}s": percentiles([v for _, v in act_w])}
    if killer:
        result["worker_restart"] = restart_recovery(predictions, killer.killed_at, summary.get("worker_restarts", []))
    per_min: dict[int, list[float]] = {}
    for t, v in pred:
        per_min.setdefault(int((t - start) // 60), []).append(v)
    result["prediction_latency_per_minute"] = [{"minute": m, **percentiles(v)} for m, v in sorted(per_min.items())]
    # resources: over the replay (the paced part) and over the whole run
    during = _cpu_between(rep["before"], rep["after"])
    dur = end - start
    rows = sampler.rows
    peak = {"worker_peak_rss_mib": round(max((w["hwm_mib"] for r in rows for w in r["workers"].values()), default=0), 1),
            "broker_peak_rss_mib": round(max((r["broker"]["hwm_mib"] for r in rows if r["broker"]), default=0), 1),
            "replay_process_peak_rss_mib": round(max((r["self"]["hwm_mib"] for r in rows), default=0), 1)}
    last_w = {}
    for r in rows:
        for p, w in r["workers"].items():
            last_w[p] = w["cpu_s"]
    total_cpu = sum(v for v in during.values() if v)
    result["resources"] = {
        "replay_window_s": round(dur, 1), **{f"{k2}_during_replay": v for k2, v in during.items()},
        "worker_cores_during_replay": round(during["workers_cpu_s"] / dur / workers, 3) if dur else None,
        "broker_cores_during_replay": round((during["broker_cpu_s"] or 0) / dur, 3) if dur else None,
        "replay_cores_during_replay": round(during["replay_cpu_s"] / dur, 3) if dur else None,
        "broker_share_of_pipeline_cpu": round((during["broker_cpu_s"] or 0) / total_cpu, 3) if total_cpu else None,
        "workers_cpu_s_whole_run": round(sum(last_w.values()), 1), **peak,
        "load_avg_max": [round(max(r["load_avg"][i] for r in rows), 2) for i in range(3)] if rows else None}
    per_worker_core = nodes * args.speed / workers / result["resources"]["worker_cores_during_replay"] \
        if result["resources"]["worker_cores_during_replay"] else None
    result["derived"] = {
        "nodes_per_worker_core_at_this_load": round(per_worker_core) if per_worker_core else None,
        "worker_rss_mib_per_1000_nodes": round(peak["worker_peak_rss_mib"] * workers / nodes * 1000, 1),
        "note": "nodes per worker core = nodes × speed / (worker CPU s / replay wall s): valid only when the run kept up "
                "(lag flat, latency per minute flat); RSS per 1000 nodes includes the worker's fixed base"}
    lag = [{"t_s": round(r["t"] - start, 1), "lag": r.get("lag"), "sent": r.get("sent"),
            "lag_by_end_offsets": r.get("lag_by_end_offsets"), "end_offsets": r.get("end_offsets"),
            "consumed": r.get("consumed"), "worker_cpu_s": round(sum(w["cpu_s"] for w in r["workers"].values()), 1),
            "worker_rss_mib": round(sum(w["rss_mib"] for w in r["workers"].values()), 1),
            "broker_cpu_s": r["broker"]["cpu_s"] if r["broker"] else None, "load1": r["load_avg"][0]}
           for r in rows]
    result["lag_samples"] = lag
    in_replay = [x for x in lag if x["lag"] is not None and 0 <= x["t_s"] <= dur]
    if len(in_replay) >= 4:
        q = len(in_replay) // 4
        first_q, last_q = in_replay[:q], in_replay[-q:]
        result["lag_trend"] = {"mean_lag_first_quarter": round(float(np.mean([x["lag"] for x in first_q]))),
                               "mean_lag_last_quarter": round(float(np.mean([x["lag"] for x in last_q]))),
                               "max_lag": max(x["lag"] for x in in_replay),
                               "slope_records_per_min": round(float(np.polyfit(
                                   [x["t_s"] / 60 for x in in_replay], [x["lag"] for x in in_replay], 1)[0]), 1)}
    result["load_avg_after"] = os.getloadavg()
    out_json = out_dir / f"{tag}.json"
    out_json.write_text(json.dumps(result, indent=1))
    _plot(result, pred, start, out_dir / f"{tag}.png")
    return result


def _plot(result: dict, pred: list[tuple], start: float, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    lag = [x for x in result["lag_samples"] if x["lag"] is not None]
    a1.plot([x["t_s"] / 60 for x in lag], [x["lag"] for x in lag], ".-", ms=3)
    a1.set_ylabel("consumer lag (raw records)")
    a1.axvline(result["resources"]["replay_window_s"] / 60, color="grey", ls="--", lw=0.8)
    a1.set_title(f"{result['nodes']} nodes × {result['minutes']:g} min at {result['speed']:g}× real time, "
                 f"{result['workers']} worker(s), {result['detector']}")
    if pred:
        a2.plot([(t - start) / 60 for t, _ in pred], [v / 1000 for _, v in pred], ",", alpha=0.3)
        per = result["prediction_latency_per_minute"]
        a2.plot([p["minute"] + 0.5 for p in per], [p["p99"] / 1000 for p in per], "r-", label="p99 per minute")
        a2.plot([p["minute"] + 0.5 for p in per], [p["p50"] / 1000 for p in per], "k-", label="p50 per minute")
        a2.legend()
    a2.set_ylabel("sample→prediction (s)")
    a2.set_xlabel("minutes since replay start")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="1000", help="comma-separated cluster sizes")
    ap.add_argument("--minutes", type=float, default=20.0, help="event time replayed per run")
    ap.add_argument("--workers", default="1", help="comma-separated worker counts")
    ap.add_argument("--speed", type=float, default=1.0, help="replay pace (× real time)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--detector", default="ensemble",
                    help="ensemble (seed 000's, trained on a 64-node × 24 h history, cached) or baseline")
    ap.add_argument("--model", default=None, help="a trained model directory instead")
    ap.add_argument("--partitions", type=int, default=None, help="topic partitions (default: settings, ≥ workers)")
    ap.add_argument("--warmup-s", type=float, default=300.0,
                    help="latencies 'after warm-up' leave out triggers in the replay's first this many s")
    ap.add_argument("--sample-s", type=float, default=5.0)
    ap.add_argument("--drain-timeout-s", type=float, default=900.0)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--workdir", default=None, help="parent of the runs' work directories (default /tmp)")
    ap.add_argument("--out", default="benchmarks/results/bench_scale.json", help="summary of all runs")
    ap.add_argument("--kill-at-min", type=float, default=None,
                    help="kill -9 the first worker this far into the replay; it is restarted (recovery time reported)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    model_dir = args.model
    if model_dir is None:
        model_dir, _ = demo_model(DemoConfig(nodes=64, hours=2.0, seed=args.seed, detector=args.detector,
                                             cache_dir=args.cache_dir, quiet=not args.verbose),
                                  Path(args.workdir or "/tmp") / f"hpcguard-bench-scale-model-{os.getpid()}")
    runs = []
    for n in (int(x) for x in args.nodes.split(",")):
        for w in (int(x) for x in args.workers.split(",")):
            r = run_one(n, args.minutes, w, args, model_dir, out.parent)
            brief = {k: r[k] for k in ("nodes", "minutes", "workers", "detector", "replay", "latency_ms", "resources",
                                       "derived", "simulator", "changelog_state", "load_avg_before",
                                       "load_avg_after")}
            brief["lag_trend"] = r.get("lag_trend")
            brief["pipeline"] = r["pipeline"]
            runs.append(brief)
            print(json.dumps(brief, indent=1), flush=True)
            out.write_text(json.dumps({"runs": runs}, indent=1))


if __name__ == "__main__":
    main()
