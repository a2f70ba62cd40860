"""Replay-connector benchmark (not a test): parse/decode throughput and Kafka publish ratio.

    .venv/bin/python benchmarks/bench_replay.py [--dir RECORDING | --nodes 64 --hours 1.5] [--broker]
        [--out benchmarks/results/replay.json]

Measured in one run on the same files: reading every line (the floor), parsing into
raw messages (``iter_recorded``), parsing + decoding (``dry_run``) and the offline
grid (``load_sensor_grid``); with ``--broker``, ``replay`` into the embedded broker
against a bare kafka-python producer sending the same number of pre-serialised
messages.  Ratios (e.g. ``dry_run_vs_read``) are what to compare across machines.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def run(data_dir: str, broker: bool = False) -> dict:
    from hpcguard.connectors.recorded import load_sensor_grid
    from hpcguard.connectors.replay import dry_run, iter_recorded

    files = [p for p in Path(data_dir).rglob("*") if p.is_file()]
    lines, read_wall, read_cpu = _timed(lambda: sum(sum(1 for _ in open(p, "rb")) for p in files))
    msgs, parse_wall, parse_cpu = _timed(lambda: sum(1 for _ in iter_recorded([data_dir])))
    report, dry_wall, dry_cpu = _timed(lambda: dry_run([data_dir]))
    grid, grid_wall, grid_cpu = _timed(lambda: load_sensor_grid(data_dir))
    out = {
        "data_dir": data_dir, "lines": lines, "messages": msgs, "samples": sum(report["samples"].values()),
        "read_cpu_s": read_cpu, "parse_cpu_s": parse_cpu, "dry_run_cpu_s": dry_cpu, "grid_cpu_s": grid_cpu,
        "read_wall_s": read_wall, "parse_wall_s": parse_wall, "dry_run_wall_s": dry_wall, "grid_wall_s": grid_wall,
        "messages_per_cpu_s_parse": msgs / parse_cpu, "messages_per_cpu_s_dry_run": msgs / dry_cpu,
        "parse_vs_read": parse_cpu / read_cpu, "dry_run_vs_read": dry_cpu / read_cpu,
        "grid_shape": list(grid.values.shape),
    }
    if broker:
        out.update(_broker(data_dir, msgs))
    return out


def _broker(data_dir: str, n: int) -> dict:
    from kafka import KafkaProducer

    from hpcguard.connectors.broker import EmbeddedBroker
    from hpcguard.connectors.replay import replay
    from hpcguard.settings import KafkaSettings, TopicSettings

    value = json.dumps({"timestamp": 1679682808.001751, "component_id": 1, "ProducerName": "n001", "job_id": 4242,
                        "read_bytes": 123456789, "write_bytes": 98765432}).encode()
    with EmbeddedBroker() as b:
        k = KafkaSettings(bootstrap=b.bootstrap)

        def bare():
            p = KafkaProducer(bootstrap_servers=[b.bootstrap], linger_ms=20, batch_size=256 * 1024, acks=1)
            for _ in range(n):
                p.send("bench.bare", key=b"n001", value=value)
            p.flush()
            p.close()

        _, bare_wall, bare_cpu = _timed(bare)
        rep, rep_wall, rep_cpu = _timed(lambda: replay([data_dir], k, TopicSettings(prefix="bench"), progress=False))
    return {"bare_producer_cpu_s": bare_cpu, "bare_producer_wall_s": bare_wall, "replay_cpu_s": rep_cpu,
            "replay_wall_s": rep_wall, "replay_messages": rep["messages"],
            "replay_vs_bare_producer_cpu": rep_cpu / bare_cpu, "replay_vs_bare_producer_wall": rep_wall / bare_wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="recorded directory (default: simulate one)")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--hours", type=float, default=1.5)
    ap.add_argument("--broker", action="store_true", help="also replay into the embedded broker")
    ap.add_argument("--out", default="benchmarks/results/replay.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = args.dir
        if data_dir is None:
            from hpcguard.simulators.telemetry import simulate_telemetry

            data_dir = str(Path(tmp, "rec"))
            simulate_telemetry(data_dir, nodes=args.nodes, hours=args.hours, seed=0)
        result = run(data_dir, broker=args.broker)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
