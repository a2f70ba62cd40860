"""Pipeline benchmark (not a test): feature extraction values/s, end-to-end messages/s
and sample→action latency through broker + worker, and — in the same run, on the same
broker — the throughput of a bare consumer reading the same topics.

    .venv/bin/python benchmarks/bench_pipeline.py [--nodes 32] [--hours 1] [--speed 60] [--out benchmarks/results/pipeline.json]

Without ``--speed`` the replay runs as fast as it can (throughput, ratio to the bare
consumer); with ``--speed 60`` it is paced at 60× real time, so the sample→action
latency measures the pipeline, not a backlog.  Latencies are wall time from the raw
record's arrival in Kafka (``ingest_time``/``trigger_time``, carried by the records) to the
broker timestamp of the node prediction or action it triggered.  The machine's load averages
before and after the run go into the JSON too: on a shared machine they say how far the
absolute numbers can be trusted (the ratio to the bare consumer, measured in the same run, depends
on it less).  Latencies are also given without the first 15 s of triggers (``*_after_15s``), which
arrive while the workers still join their consumer groups.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from hpcguard.connectors.broker import EmbeddedBroker
from hpcguard.models.features import window_features
from hpcguard.settings import KafkaSettings, Settings
from hpcguard.simulators.demo_run import DemoConfig, percentiles, read_topic, run_demo
from hpcguard.streams.topics import TopicNames


def feature_values_per_s(nodes: int = 1024, repeats: int = 20) -> dict:
    rng = np.random.default_rng(0)
    windows = rng.normal(size=(nodes, 16, 10))
    windows[rng.random(windows.shape) < 0.02] = np.nan
    window_features(windows)
    start = time.perf_counter()
    for _ in range(repeats):
        window_features(windows)
    elapsed = time.perf_counter() - start
    return {"windows_per_s": nodes * repeats / elapsed, "input_values_per_s": windows.size * repeats / elapsed}


def bare_consumer_msgs_per_s(k: KafkaSettings, topics: list[str]) -> dict:
    from kafka import KafkaConsumer

    from hpcguard.connectors.kafka import kafka_python_config

    c = KafkaConsumer(*topics, **kafka_python_config(k), auto_offset_reset="earliest", group_id=None,
                      consumer_timeout_ms=3000, max_poll_records=5000)
    start = time.perf_counter()
    n = 0
    last = start
    for _ in c:
        n += 1
        last = time.perf_counter()
    c.close()
    return {"messages": n, "msgs_per_s": n / (last - start) if n else 0.0}


WARMUP_S = 15.0


def _latencies_ms(records: list[tuple[dict, int]], field: str, warmup_s: float = 0.0,
                  first: float | None = None) -> list[float]:
    """Broker time of each output minus the wall time its trigger reached Kafka (``field``, s), for
    triggers at least ``warmup_s`` after ``first`` (the replay's first record; default: the first trigger)."""
    sent = [(r[field], ts) for r, ts in records if r.get(field)]
    if first is None:
        first = min((t for t, _ in sent), default=0.0)
    return [ts - 1000.0 * t for t, ts in sent if t >= first + warmup_s]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--speed", type=float, default=None, help="replay pace (× real time); default: max speed")
    ap.add_argument("--detector", default="baseline", help="baseline (fast to train) or ensemble")
    ap.add_argument("--workers", type=int, default=1, help="worker processes sharing the topics' partitions")
    ap.add_argument("--preload", action="store_true",
                    help="replay everything before the workers start, so they drain a backlog as the bare consumer does")
    ap.add_argument("--cache-dir", default=None, help="keep the trained demo model here between runs")
    ap.add_argument("--workdir", default=None, help="keep the run's telemetry, worker logs and audit log here")
    ap.add_argument("--out", default="benchmarks/results/pipeline.json")
    ap.add_argument("--series", default=None,
                    help="also write (trigger wall time s, latency ms) per prediction and per IPMI and OS sample to this JSON")
    args = ap.parse_args()

    result: dict = {"load_avg_before": os.getloadavg(), "cpus": os.cpu_count(), "features": feature_values_per_s()}
    with EmbeddedBroker() as broker:
        summary = run_demo(DemoConfig(nodes=args.nodes, hours=args.hours, seed=args.seed, speed=args.speed,
                                      detector=args.detector, bootstrap=broker.bootstrap, quiet=True,
                                      preload=args.preload, workers=args.workers, cache_dir=args.cache_dir,
                                      workdir=args.workdir))
        k = KafkaSettings(bootstrap=broker.bootstrap)
        topics = TopicNames.from_settings(Settings().topics)
        raw = list(topics.ldms) + [topics.raw_ipmi, topics.raw_slurm]
        bare = bare_consumer_msgs_per_s(k, raw)
        predictions = read_topic(k, topics.predictions)
        actions = read_topic(k, topics.actions)
        # the first hop alone: raw record in Kafka → its canonical sample in Kafka (normalize)
        # a NodeSamples batch counts once per sample it carries (each with its own raw record's ingest time)
        samples = {name: [(s, ts) for r, ts in read_topic(k, t) for s in r.get("samples", [r])]
                   for name, t in (("ipmi", topics.samples_ipmi), ("os", topics.samples_os))}
        # the replay's first record reached Kafka then: warm-up is counted from it, for every kind of output
        start = min((s["ingest_time"] for recs in samples.values() for s, _ in recs if s.get("ingest_time")), default=None)
        hop = {name: percentiles(_latencies_ms(recs, "ingest_time", WARMUP_S, start)) for name, recs in samples.items()}
        if args.series:
            Path(args.series).write_text(json.dumps({
                name: sorted((r["ingest_time"], ts - 1000.0 * r["ingest_time"]) for r, ts in recs if r.get("ingest_time"))
                for name, recs in (("predictions", predictions), ("ipmi", samples["ipmi"]), ("os", samples["os"]))}))
    result["pipeline"] = {"msgs_per_s": summary["throughput_msgs_per_s"], "latency_ms": summary["latency_ms"],
                          "prediction_latency_ms": percentiles(_latencies_ms(predictions, "ingest_time")),
                          # without the records that arrived while the workers were still joining their groups
                          f"latency_ms_after_{WARMUP_S:.0f}s": percentiles(
                              _latencies_ms(actions, "trigger_time", WARMUP_S, start)),
                          f"prediction_latency_ms_after_{WARMUP_S:.0f}s": percentiles(
                              _latencies_ms(predictions, "ingest_time", WARMUP_S, start)),
                          f"normalize_latency_ms_after_{WARMUP_S:.0f}s": hop,
                          "replayed_records": summary["replayed_records"], "nodes": args.nodes, "hours": args.hours,
                          "speed": args.speed, "preload": args.preload, "workers": args.workers, "actions": summary.get("actions"), "dead_letters": summary.get("dead_letters")}
    result["bare_consumer"] = bare
    result["load_avg_after"] = os.getloadavg()
    result["pipeline_over_bare"] = (summary["throughput_msgs_per_s"] or 0) / bare["msgs_per_s"] if bare[
        "msgs_per_s"] else None
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
