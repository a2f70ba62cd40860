"""FASRC IPMI day: sensor lines/s of the streamed ``.tar.xz`` dry run (target ≥ 200 k/s on one core).

Reads ``../shared/data/fasrc-ipmi/ipmi-2025-06-03.tar.xz`` (or ``--archive``) through
``connectors.replay.dry_run`` (xz stream → per-node logs → parse, unit check, reduce,
coverage) and writes ``benchmarks/results/fasrc.json`` with lines/s, nodes, polls and
the per-family coverage.  ``--limit N`` reads only the first N nodes.

    .venv/bin/python benchmarks/bench_fasrc.py [--limit 200]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from hpcguard.connectors.replay import dry_run

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "fasrc-ipmi" / "ipmi-2025-06-03.tar.xz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archive", type=Path, default=ARCHIVE)
    ap.add_argument("--limit", type=int, default=None, help="first N nodes only")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "fasrc.json")
    args = ap.parse_args()
    cpu0 = time.process_time()
    report = dry_run([args.archive], limit=args.limit)
    cpu = time.process_time() - cpu0
    cov = report["coverage"]
    result = {
        "archive": str(args.archive), "limit": args.limit, "nodes": cov["nodes"],
        "polls": report["records"].get("ipmi", 0), "samples": report["samples"].get("ipmi", 0),
        "sensor_lines": report["sensor_lines"], "wall_s": report["elapsed_s"], "cpu_s": round(cpu, 3),
        "sensor_lines_per_s": report["sensor_lines_per_s"],
        "sensor_lines_per_cpu_s": round(report["sensor_lines"] / cpu, 1) if cpu > 0 else None,
        "errors": report["errors"], "readings": report["ipmi"],
        "coverage": {s: v["share"] for s, v in cov["sensors"].items()},
        "families": {g: {"nodes": v["nodes"], "shares": v["shares"]} for g, v in cov["groups"].items()},
        "warnings": report["coverage_warnings"], "mapping_digest": report["mapping_digest"],
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: result[k] for k in ("nodes", "polls", "sensor_lines", "wall_s", "cpu_s",
                                            "sensor_lines_per_s", "sensor_lines_per_cpu_s", "coverage")}))


if __name__ == "__main__":
    main()
