"""Jittered IPMI polls on the 15 s grid (issue 59 item 1; a measurement, not a test).

    .venv/bin/python benchmarks/grid_jitter.py [--nodes 16] [--hours 6] [--jitter 1.0] [--boundary 0.25]
        [--profile intermittent] [--tolerances 0,1,2,3] [--online] [--out benchmarks/results/grid_jitter.json]

Simulates a site recording (the ``intermittent`` profile: 2 % missing polls, BMC
outages), then re-times its IPMI polls as real pollers jitter: each node polls at its
own phase within the step (uniform; ``--boundary`` of the nodes on the grid's
boundary, as Telegraf's ``round_interval`` puts them) ± ``--jitter`` seconds.  It
loads the directory with each poll tolerance (0 = the floor rule the grid had before)
and reports the IPMI sensors' grid coverage against what the polls allow (node-steps
with a poll that has the sensor: 1 − missing − outage − N/A), with the polls moved and
merged; ``--online`` also streams the polls through ``NodeGrid`` (shuffled arrival
within the lateness) and reports whether its rows equal the loader's.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
from pathlib import Path

import numpy as np

from hpcguard.connectors.recorded import load_sensor_grid
from hpcguard.models.features import CANONICAL_SENSORS
from hpcguard.settings import Settings
from hpcguard.simulators.telemetry import simulate_telemetry

IPMI = ("cpu_temp", "cpu_fan_rpm", "cpu_voltage", "psu_temp")
POLL = re.compile(r"^(# hpcguard-poll host=(\S+) time=)([0-9.]+)", re.M)


def jitter_polls(root: Path, grid_s: float, jitter_s: float, boundary: float, seed: int) -> dict:
    """Re-time every poll line of ``root/ipmi``: the step it was simulated for + the node's phase ± jitter."""
    rng = np.random.default_rng(seed)
    meta = json.loads((root / "meta.json").read_text())
    start, end = float(meta["start"]), float(meta["end"])
    phases = {}

    def retime(m: re.Match) -> str:
        node = m.group(2)
        if node not in phases:
            phases[node] = rng.uniform(-0.5, 0.5) if rng.random() < boundary else rng.uniform(0, grid_s)
        step = np.floor(float(m.group(3)) / grid_s) * grid_s
        t = step + phases[node] + rng.uniform(-jitter_s, jitter_s)
        return m.group(1) + f"{min(max(t, start), end - 0.001):.3f}"  # the first and last polls stay inside

    for f in sorted((root / "ipmi").glob("*")):
        f.write_text(POLL.sub(retime, f.read_text()))
    return phases


def shares(values: np.ndarray) -> dict[str, float]:
    have = np.isfinite(values).mean(axis=(0, 1))
    return {s: round(float(have[CANONICAL_SENSORS.index(s)]), 4) for s in CANONICAL_SENSORS}


def allowed(root: Path, grid) -> dict[str, float]:
    """Share of node-steps the polls could fill: distinct polls with the sensor's value, per node-step."""
    from hpcguard.connectors.ipmi import decode_ipmi_envelope, read_ipmi_file

    polls = {s: set() for s in IPMI}
    for f in sorted((root / "ipmi").glob("*")):
        for env in read_ipmi_file(f):
            for sample in decode_ipmi_envelope(env):
                for k in sample["values"]:
                    if k in polls:
                        polls[k].add((sample["node"], sample["time"]))
    n = grid.values.shape[0] * grid.values.shape[1]
    return {s: round(len(p) / n, 4) for s, p in polls.items()}


def online_rows(root: Path, grid, tolerance: float, seed: int) -> np.ndarray:
    """The IPMI samples through one NodeGrid per node, shuffled within 20 s (lateness 30 s); rows by step."""
    from hpcguard.connectors.ipmi import decode_ipmi_envelope, read_ipmi_file
    from hpcguard.models.grid import NodeGrid

    samples = []
    for f in sorted((root / "ipmi").glob("*")):
        for env in read_ipmi_file(f):
            samples += decode_ipmi_envelope(env)
    rng = random.Random(seed)
    samples.sort(key=lambda s: s["time"] + rng.uniform(0, 20))
    grids = {n: NodeGrid(grid_s=grid.grid_s, window_steps=1, lateness_s=30, sources=("ipmi",),
                         poll_tolerance_s=tolerance) for n in grid.nodes}
    out = np.full_like(grid.values, np.nan)
    base = int(round(grid.t0 / grid.grid_s))

    def take(node, closed):
        for st in closed:
            k = int(round(st / grid.grid_s)) - base
            if 0 <= k < out.shape[1]:
                out[grid.nodes.index(node), k] = grids[node].window(st, steps=1)[0]

    for s in samples:
        take(s["node"], grids[s["node"]].add(s["time"], s["values"], last_value=True, source="ipmi"))
    end = grid.t0 + grid.grid_s * out.shape[1] + 60.0
    for node in grid.nodes:
        take(node, grids[node].add(end, {}, last_value=True, source="ipmi"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--hours", type=float, default=6.0)
    ap.add_argument("--profile", default="intermittent")
    ap.add_argument("--jitter", type=float, default=1.0, help="± seconds of poll jitter (uniform)")
    ap.add_argument("--boundary", type=float, default=0.25, help="share of nodes polling on the grid's boundary")
    ap.add_argument("--tolerances", default="0,1,2,3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--online", action="store_true")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    settings = Settings()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        summary = simulate_telemetry(str(root), nodes=args.nodes, hours=args.hours, seed=args.seed,
                                     profile=args.profile, io=False)
        jitter_polls(root, settings.worker.grid_s, args.jitter, args.boundary, args.seed)
        for tol in [float(x) for x in args.tolerances.split(",")]:
            grid = load_sensor_grid(root, settings=settings, poll_tolerance_s=tol)
            report = grid.coverage.report()
            row = {"tolerance_s": tol, "coverage": shares(grid.values), "polls": report["polls"]["ipmi"],
                   "warnings": [w for w in grid.coverage.warnings() if w.startswith("ipmi:")]}
            if args.online:
                cols = [CANONICAL_SENSORS.index(s) for s in IPMI]
                online = online_rows(root, grid, tol, args.seed)[..., cols]
                row["online_equals_offline"] = bool(np.array_equal(online, grid.values[..., cols], equal_nan=True))
            results.append(row)
        limit = allowed(root, grid)
    counts = summary["counts"]
    report = {"profile": args.profile, "nodes": args.nodes, "hours": args.hours, "jitter_s": args.jitter,
              "boundary_nodes": args.boundary, "ipmi_polls": counts["samples"]["ipmi_polls"],
              "missing_polls": counts.get("missing_polls"), "bmc_outages": len(summary.get("bmc_outages", [])),
              "allowed": limit, "runs": results}
    print(json.dumps(report, indent=1))
    for r in results:
        print(f"tolerance {r['tolerance_s']:>3} s: " + ", ".join(
            f"{s} {r['coverage'][s]:.4f} (allowed {limit[s]:.4f})" for s in IPMI)
              + f"; moved {r['polls']['moved']}, merged {r['polls']['merged']} of {r['polls']['polls']} polls"
              + (f"; online == offline: {r['online_equals_offline']}" if "online_equals_offline" in r else ""))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
