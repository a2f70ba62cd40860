"""InfluxDB sink throughput against a real InfluxDB 1.x, compared with raw HTTP writes.

In one run and on the same records: (a) line-protocol conversion alone (``to_line``),
(b) raw ``POST /write`` of pre-formatted lines in batches (the HTTP + server lower bound),
(c) the sink (``InfluxSink.add`` for every record, then ``flush``) with the same batch size.
Reports points/s and the ratio sink / raw.  Starts its own ``influxd`` (Debian's 1.6, as the
tests do) unless ``--url`` names a running one.  Writes ``benchmarks/results/bench_influx_sink.json``.

    .venv/bin/python benchmarks/bench_influx_sink.py [--records 20000] [--batch 5000]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import requests

from hpcguard.connectors.influx import InfluxSink, V1Writer
from hpcguard.connectors.lineprotocol import to_line
from hpcguard.models.features import CANONICAL_SENSORS


def records(n: int, nodes: int = 256, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    values = rng.normal(50, 5, size=(n, len(CANONICAL_SENSORS)))
    t0 = 1_700_000_000.0
    return [{"node": f"n{i % nodes:04d}", "time": t0 + 15.0 * (i // nodes), "source": "ipmi",
             "values": dict(zip(CANONICAL_SENSORS, row.tolist()))} for i, row in enumerate(values)]


def count(url: str, db: str) -> int:
    r = requests.post(f"{url}/query", data={"db": db, "q": 'SELECT count("cpu_temp") FROM "node_sample"'}, timeout=60)
    return r.json()["results"][0]["series"][0]["values"][0][1]


def run(url: str, n: int, batch: int) -> dict:
    recs = records(n)
    for db in ("bench_raw", "bench_sink"):
        requests.post(f"{url}/query", data={"q": f'DROP DATABASE "{db}"'}, timeout=60)
        requests.post(f"{url}/query", data={"q": f'CREATE DATABASE "{db}"'}, timeout=60)

    t = time.perf_counter()
    lines = [to_line("NodeSample", r) for r in recs]
    convert_s = time.perf_counter() - t

    session = requests.Session()
    t = time.perf_counter()
    for i in range(0, n, batch):
        session.post(f"{url}/write", params={"db": "bench_raw", "precision": "ns"},
                     data="\n".join(lines[i:i + batch]).encode(), timeout=60).raise_for_status()
    raw_s = time.perf_counter() - t

    sink = InfluxSink(V1Writer(url, "bench_sink", timeout_s=60), batch_size=batch, buffer_points=n,
                      background=False)
    t = time.perf_counter()
    for r in recs:
        sink.add("NodeSample", r)
    sink.flush()
    sink_s = time.perf_counter() - t
    sink.close()

    assert count(url, "bench_raw") == count(url, "bench_sink") == n
    return {"records": n, "batch": batch, "convert_points_per_s": n / convert_s, "raw_points_per_s": n / raw_s,
            "sink_points_per_s": n / sink_s, "sink_over_raw": raw_s / sink_s,
            "python": platform.python_version(), "machine": platform.machine()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--url", help="running InfluxDB 1.x (default: start influxd in a temporary directory)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "bench_influx_sink.json"))
    args = ap.parse_args()
    if args.url:
        result = run(args.url, args.records, args.batch)
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from _influx_fixture import InfluxServer

        with tempfile.TemporaryDirectory(prefix="hpcguard-bench-influx-") as tmp:
            server = InfluxServer(Path(tmp)).start()
            try:
                result = run(server.url, args.records, args.batch)
            finally:
                server.stop()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
