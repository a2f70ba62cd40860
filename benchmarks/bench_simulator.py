"""Telemetry simulator benchmark (not a test): generated values/s, written rows/s, load time per profile.

    .venv/bin/python benchmarks/bench_simulator.py [--nodes 64] [--hours 48] [--profiles classic,mixed,...]
        [--load] [--out benchmarks/results/simulator.json]

Generation throughput counts every sensor/metric value of an up sample (1 s
lustre_client counters, 15 s OS samplers and BMC readings); writing counts the LDMS
rows and IPMI poll blocks of the recorded-data directory; ``--load`` also times
``load_sensor_grid`` on the written directory and reports the per-sensor coverage of
reporting node-steps.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from hpcguard.simulators.profiles import PROFILES
from hpcguard.simulators.telemetry import generate_telemetry
from hpcguard.simulators.writers import write_recording


def run(nodes: int, hours: float, profile: str = "classic", seed: int = 0, load: bool = False) -> dict:
    t0 = time.perf_counter()
    tel = generate_telemetry(nodes, hours, seed, profile=profile)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        summary = write_recording(tel, out)
        t2 = time.perf_counter()
        size = sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())
        extra = {}
        if load:
            from hpcguard.connectors.recorded import load_sensor_grid
            from hpcguard.models.features import CANONICAL_SENSORS

            grid = load_sensor_grid(out)
            finite = np.isfinite(grid.values)
            coverage = finite[finite.any(axis=2)].mean(axis=0)
            extra = {"load_s": time.perf_counter() - t2,
                     "coverage": {s: round(float(c), 4) for s, c in zip(CANONICAL_SENSORS, coverage)}}
    c = summary["counts"]
    rows = sum(v for k, v in c["samples"].items() if k != "ipmi_polls")
    return {
        "profile": profile, "nodes": nodes, "hours": hours, "values": tel.n_values(),
        "generate_s": t1 - t0, "values_per_s": tel.n_values() / (t1 - t0),
        "write_s": t2 - t1, "ldms_rows": rows, "lustre_client_rows": c["samples"]["lustre_client"],
        "ipmi_polls": c["samples"]["ipmi_polls"], "ldms_rows_per_s_written": rows / (t2 - t1),
        "bytes_written": size, "failures": c["failures"], "precursors": c["precursors"],
        "benign_anomalies": c["benign_anomalies"], "missing_polls": c["missing_polls"], **extra,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--hours", type=float, default=48.0)
    ap.add_argument("--profiles", default=",".join(PROFILES), help="comma-separated profile names")
    ap.add_argument("--load", action="store_true", help="also time load_sensor_grid and report coverage")
    ap.add_argument("--out", default="benchmarks/results/simulator.json")
    args = ap.parse_args()
    results = []
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    for p in args.profiles.split(","):
        results.append(run(args.nodes, args.hours, p, load=args.load))
        print(json.dumps(results[-1]), flush=True)  # one line per profile as it finishes
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
