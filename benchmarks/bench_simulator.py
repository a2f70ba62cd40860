"""Telemetry simulator benchmark (not a test): generated values/s and written rows/s.

    .venv/bin/python benchmarks/bench_simulator.py [--nodes 32] [--hours 2] [--out benchmarks/results/simulator.json]

Generation throughput counts every sensor/metric value of an up sample (1 s
lustre_client counters, 15 s OS samplers and BMC readings); writing counts the LDMS
rows and IPMI poll blocks of the recorded-data directory.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from hpcguard.simulators.telemetry import generate_telemetry
from hpcguard.simulators.writers import write_recording


def run(nodes: int, hours: float, seed: int = 0) -> dict:
    t0 = time.perf_counter()
    tel = generate_telemetry(nodes, hours, seed)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        summary = write_recording(tel, out)
        t2 = time.perf_counter()
        size = sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())
    samples = summary["counts"]["samples"]
    rows = sum(v for k, v in samples.items() if k != "ipmi_polls")
    return {
        "nodes": nodes, "hours": hours, "values": tel.n_values(),
        "generate_s": t1 - t0, "values_per_s": tel.n_values() / (t1 - t0),
        "write_s": t2 - t1, "ldms_rows": rows, "lustre_client_rows": samples["lustre_client"],
        "ipmi_polls": samples["ipmi_polls"], "ldms_rows_per_s_written": rows / (t2 - t1),
        "bytes_written": size, "failures": summary["counts"]["failures"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--hours", type=float, default=2.0)
    ap.add_argument("--out", default="benchmarks/results/simulator.json")
    args = ap.parse_args()
    result = run(args.nodes, args.hours)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
