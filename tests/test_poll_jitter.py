"""Jittered IPMI polls on the 15 s grid (issue 59 item 1).

Pollers jitter (Telegraf's ``collection_jitter``, the run time of in-band ``ipmitool``, a
per-node phase): with ±1 s, two polls often fell into one step and left the next empty.
A poll now takes the next step when its own is taken and the next starts within
``worker.poll_tolerance_s`` (``models.grid.poll_steps``); the streaming grid and the
offline loader place polls by that one rule, whatever the arrival order and batching.
"""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from hpcguard.connectors.coverage import SensorCoverage
from hpcguard.connectors.ipmi import decode_ipmi_envelope, read_ipmi_file
from hpcguard.connectors.recorded import load_sensor_grid
from hpcguard.models.features import CANONICAL_SENSORS
from hpcguard.models.grid import LateSample, NodeGrid, poll_steps
from hpcguard.settings import Settings

GRID = 15.0
T0 = 1_700_000_010.0  # a multiple of 15 s
STEPS = 480  # 2 hours
IPMI = ("cpu_temp", "cpu_fan_rpm", "cpu_voltage", "psu_temp")
# per-node phase of the poller within the step: Telegraf's round_interval puts the ticks on the grid's
# boundaries (n001, n003), an in-band ipmitool finishing just before them (n002), one node in mid-step (n004)
PHASES = {"n001": 0.3, "n002": 14.6, "n003": 0.0, "n004": 7.5}


def write_jittered(root, seed=0, jitter_s=1.0, missing=0.02, outage=("n002", 200, 230)):
    """FreeIPMI CSV polls every 15 s at a per-node phase ± ``jitter_s``, ``missing`` of them lost at random,
    and a BMC outage (no poll) on one node; returns the number of polls written."""
    rng = np.random.default_rng(seed)
    (root / "ipmi").mkdir(parents=True)
    end = T0 + STEPS * GRID
    written = 0
    for node, phase in PHASES.items():
        out = []
        for k in range(STEPS):
            if rng.random() < missing or (node == outage[0] and outage[1] <= k < outage[2]):
                continue
            # the recording holds each poll of its span: the first and last ones stay inside it
            t = min(max(T0 + k * GRID + phase + rng.uniform(-jitter_s, jitter_s), T0), end - 0.001)
            out.append(f"# hpcguard-poll host={node} time={t:.3f}\nID,Name,Type,Reading,Units,Event\n"
                       f"3,CPU1 Temp,Temperature,{40 + k % 20}.00,C,'OK'\n7,Vcore,Voltage,1.10,V,'OK'\n"
                       f"9,FAN1A,Fan,{3000 + k},RPM,'OK'\n5,PS1 Temp,Temperature,30.00,C,'OK'\n")
            written += 1
        (root / "ipmi" / f"{node}.csv").write_text("".join(out))
    (root / "meta.json").write_text(json.dumps({"nodes": list(PHASES), "start": T0, "end": end}))
    return written


def ipmi_coverage(grid) -> dict[str, float]:
    have = np.isfinite(grid.values).sum(axis=(0, 1)) / (grid.values.shape[0] * grid.values.shape[1])
    return {s: float(have[CANONICAL_SENSORS.index(s)]) for s in IPMI}


def test_jittered_polls_reach_the_coverage_the_polls_allow(tmp_path):
    """±1 s jitter, 2 % missing polls and a 30-poll BMC outage: the IPMI sensors' grid coverage is within
    0.5 point of 1 − missing − outage; the floor rule (tolerance 0, the old grid) lost several points."""
    written = write_jittered(tmp_path)
    node_steps = len(PHASES) * STEPS
    expected = written / node_steps  # 1 − missing polls − outage share
    assert 0.95 < expected < 0.975
    grid = load_sensor_grid(tmp_path, settings=Settings())
    for sensor, share in ipmi_coverage(grid).items():
        assert abs(share - expected) <= 0.005, (sensor, share, expected)
    report = grid.coverage.report()
    assert report["sensors"]["cpu_temp"]["share"] == pytest.approx(expected, abs=0.005)
    polls = report["polls"]["ipmi"]  # the moves are reported, never silent
    assert polls["polls"] == written and polls["moved"] > 0.03 * written and polls["merged"] == 0
    assert not [w for w in grid.coverage.warnings() if w.startswith("ipmi:")]

    floor = load_sensor_grid(tmp_path, settings=Settings(), poll_tolerance_s=0.0)
    lost = {s: expected - share for s, share in ipmi_coverage(floor).items()}
    assert min(lost.values()) > 0.02, lost  # two polls in a step, the next one empty
    merged = floor.coverage.report()["polls"]["ipmi"]
    assert merged["moved"] == 0 and merged["merged"] == round(lost["cpu_temp"] * node_steps)
    assert {w["node"] for w in merged["most_merged"]} == {"n001", "n002", "n003"}  # n004 polls in mid-step
    assert any(w.startswith("ipmi: ") and "worker.poll_tolerance_s" in w for w in floor.coverage.warnings())


def _sequential(times, grid_s, tol, last=None):
    """The rule in plain Python, one poll after another (the reference for the vectorised one)."""
    steps = []
    for t in times:
        own, latest = math.floor(t / grid_s), math.floor((t + tol) / grid_s)
        if last is None or own > last:
            last = own
        elif last + 1 <= latest:
            last = last + 1
        steps.append(last)
    return steps


@pytest.mark.parametrize("seed", range(6))
def test_poll_steps_is_the_sequential_rule_and_any_split_gives_the_same_steps(seed):
    rng = np.random.default_rng(seed)
    period = [15.0, 10.0, 14.9, 15.1, 7.0, 15.0][seed]
    series = []
    for _ in range(3):
        t = np.arange(400) * period + rng.uniform(0, 15) + rng.uniform(-2.5, 2.5, 400)
        t = np.sort(t[rng.random(400) > 0.05])
        series.append(t)
    times = np.concatenate(series)
    new = np.zeros(times.size, bool)
    new[np.cumsum([0] + [s.size for s in series[:-1]])] = True
    steps, moved, merged = poll_steps(times, GRID, 3.0, new)
    ref = np.concatenate([_sequential(s, GRID, 3.0) for s in series])
    np.testing.assert_array_equal(steps, ref)
    own = np.floor(times / GRID)
    assert np.array_equal(moved, steps != own) and (steps >= own).all()
    assert (steps * GRID - times <= 3.0).all()  # never more than the tolerance ahead of its time
    # the streaming grid places each closing step's polls with the step the previous ones took: any split
    t = series[0]
    cuts = np.sort(rng.choice(np.arange(1, t.size), 12, replace=False))
    last, pieces = None, []
    for piece in np.split(t, cuts):
        s, _, _ = poll_steps(piece, GRID, 3.0, last=last)
        pieces.append(s)
        last = int(s[-1])
    np.testing.assert_array_equal(np.concatenate(pieces), steps[:t.size])


def test_a_tolerance_of_half_a_step_or_more_is_refused():
    with pytest.raises(ValueError, match="grid_s / 2"):
        poll_steps(np.array([1.0]), 15.0, 7.5)
    with pytest.raises(ValueError, match="grid_s / 2"):
        NodeGrid(grid_s=15.0, poll_tolerance_s=8.0)


def _streamed(root, seed, restart=False):
    """The recording's IPMI samples through one NodeGrid per node, in a shuffled arrival order
    (each sample up to 20 s of event time out of place, within the 30 s lateness), optionally through
    state round-trips (a restarted worker); the closed rows by step, and the poll counts."""
    samples = []
    for f in sorted((root / "ipmi").glob("*.csv")):
        for env in read_ipmi_file(f):
            samples += decode_ipmi_envelope(env)
    rng = random.Random(seed)
    samples.sort(key=lambda s: s["time"] + rng.uniform(0, 20))
    grids = {n: NodeGrid(grid_s=GRID, window_steps=1, lateness_s=30, sources=("ipmi",)) for n in PHASES}
    rows: dict[tuple[str, int], list] = {}

    def take(node, closed):
        for st in closed:
            rows[(node, int(round(st / GRID)))] = grids[node].window(st, steps=1)[0].tolist()

    for i, s in enumerate(samples):
        take(s["node"], grids[s["node"]].add(s["time"], s["values"], last_value=True, source="ipmi"))
        if restart and rng.random() < 0.02:
            for node, g in grids.items():
                grids[node] = NodeGrid(grid_s=GRID, window_steps=1, lateness_s=30,
                                       sources=("ipmi",)).load_state(json.loads(json.dumps(g.to_state())))
    end = T0 + STEPS * GRID + 60.0
    for node in PHASES:  # a sample with no reading moves the clock: every step of the recording closes
        take(node, grids[node].add(end, {}, last_value=True, source="ipmi"))
    return rows, {n: g.poll_counts["ipmi"] for n, g in grids.items()}


@pytest.mark.parametrize("seed, restart", [(0, False), (1, False), (2, True)])
def test_online_grid_places_jittered_polls_as_the_offline_loader(tmp_path, seed, restart):
    """Parity: the same jittered polls (missing ones, an outage) give the streaming grid the offline grid's
    rows, step by step, and the same poll counts, whatever the arrival order and restarts."""
    write_jittered(tmp_path, seed=seed)
    offline = load_sensor_grid(tmp_path, settings=Settings())
    rows, counts = _streamed(tmp_path, seed, restart)
    base = int(T0 // GRID)
    online = np.full_like(offline.values, np.nan)
    for (node, step), row in rows.items():
        if 0 <= step - base < STEPS:
            online[offline.nodes.index(node), step - base] = row
    np.testing.assert_array_equal(online, offline.values)
    report = offline.coverage.report()["polls"]["ipmi"]
    assert [sum(c[k] for c in counts.values()) for k in range(3)] == [report["polls"], report["moved"],
                                                                       report["merged"]]
    assert report["moved"] > 0


def test_a_poll_arriving_later_changes_only_steps_not_closed_yet():
    """Event time: a poll's step depends on the polls before it, decided when its step closes."""
    polls = [(15.2, 1.0), (29.4, 2.0), (44.1, 3.0), (60.3, 4.0)]  # 29.4 and 44.1 came early
    for order in (polls, [polls[2], polls[1], polls[0], polls[3]]):  # arrival order: free while steps are open
        g = NodeGrid(grid_s=15, window_steps=4, lateness_s=30, sources=("ipmi",))
        closed = []
        for t, v in order:
            closed += g.add(t, {"cpu_temp": v}, last_value=True, source="ipmi")
        closed += g.add(200.0, {}, last_value=True, source="ipmi")
        assert closed == [15.0, 30.0, 45.0, 60.0]
        assert g.window(60.0, steps=4)[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0]
        assert g.poll_counts == {"ipmi": [4, 2, 0]}
        with pytest.raises(LateSample):  # once closed, a step takes no poll
            g.add(59.0, {"cpu_temp": 9.0}, last_value=True, source="ipmi")


def test_a_faster_poller_merges_and_coverage_warns():
    cov = SensorCoverage()
    cov.add_polls("n1", "ipmi", 900, 100, 300)  # a 10 s poller on a 15 s grid
    cov.add_polls("n2", "ipmi", 600, 10, 0)
    rep = cov.report()["polls"]["ipmi"]
    assert rep == {"polls": 1500, "moved": 110, "merged": 300, "moved_share": 0.0733, "merged_share": 0.2,
                   "nodes_merging": 1, "most_merged": [{"node": "n1", "merged_share": 0.3333}]}
    [warning] = [w for w in cov.warnings() if w.startswith("ipmi:")]
    assert "20.0% of polls" in warning and "n1 (33%)" in warning
    other = SensorCoverage()
    other.merge(cov)
    assert other.report()["polls"] == cov.report()["polls"]


def _jitter_recording(root, jitter_s=1.0, seed=0):
    """Re-time a simulated recording's IPMI polls: the step each was simulated for + its node's phase (half the
    nodes on the grid's boundary, as Telegraf's round_interval puts them) ± ``jitter_s``."""
    import re

    rng = np.random.default_rng(seed)
    meta = json.loads((root / "meta.json").read_text())
    phases: dict[str, float] = {}

    def retime(m):
        node = m.group(2)
        phase = phases.setdefault(node, rng.uniform(-0.5, 0.5) if len(phases) % 2 == 0 else rng.uniform(0, GRID))
        t = math.floor(float(m.group(3)) / GRID) * GRID + phase + rng.uniform(-jitter_s, jitter_s)
        return m.group(1) + f"{min(max(t, meta['start']), meta['end'] - 0.001):.3f}"

    for f in sorted((root / "ipmi").glob("*")):
        f.write_text(re.sub(r"^(# hpcguard-poll host=(\S+) time=)([0-9.]+)", retime, f.read_text(), flags=re.M))


@pytest.mark.broker
@pytest.mark.slow
@pytest.mark.faults
def test_streaming_worker_equals_offline_on_jittered_polls(kafka_bootstrap, tmp_path):
    """The real worker on the broker (normalize → windows → decide) and the offline side agree on a recording
    whose IPMI polls jitter ±1 s: the same predictions and actions (online = offline, issue 12)."""
    from hpcguard.simulators.demo_run import train_baseline_model
    from hpcguard.simulators.parity import evaluate_online_run
    from hpcguard.simulators.telemetry import simulate_telemetry

    simulate_telemetry(str(tmp_path / "history"), nodes=8, hours=3.0, seed=11)
    train_baseline_model([str(tmp_path / "history")], str(tmp_path / "model"))
    simulate_telemetry(str(tmp_path / "data"), nodes=8, hours=1.0, seed=3)
    _jitter_recording(tmp_path / "data")
    assert load_sensor_grid(tmp_path / "data", settings=Settings()).coverage.report()["polls"]["ipmi"]["moved"] > 100
    (tmp_path / "site.toml").write_text("[policy]\nnode_memory_gb = 750.0\nmigration_gbs = 12.5\n"
                                        "bb_write_gbs = 25.0\npfs_write_gbs = 25.0\n")
    report = evaluate_online_run(str(tmp_path / "data"), str(tmp_path / "model"), workers=1, speed=None,
                                 bootstrap=kafka_bootstrap, config=str(tmp_path / "site.toml"),
                                 workdir=str(tmp_path / "work"), timeout_s=400)
    c = report["counts"]
    assert c["warn_differs"] == 0 and c["actions_only_offline"] == 0 and c["actions_only_online"] == 0, report
    assert c["identical"] and c["offline_predictions"] > 1000, c
