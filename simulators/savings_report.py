"""``hpcguard evaluate savings``: a recorded history's decisions, replayed through the worker's
own decide path, accounted in node-hours (:func:`hpcguard.models.savings.account_savings`).

The actions are those :func:`hpcguard.simulators.parity.offline_decisions` computes (the
worker's policy, episodes and action ids on the same files), or the actions a run
published (``hpcguard demo``).  The jobs come from ``slurm/*`` sacct dumps, the failures
from ``failures.csv``; CanarIO's part from ``probes.csv`` (the probes' node-hours, a cost)
and, for its replacements (``reschedule``), seed 004's accounting against the recorded
degradation episodes (``degradation.csv``) and the jobs' IO sensitivity
(``jobscripts/sensitivity.csv``).  Rules: ``docs/savings.md``.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np

from hpcguard.models.savings import account_savings

__all__ = ["evaluate_savings", "recorded_jobs", "io_figures", "write_savings_plot", "savings_table"]

#: IO fraction a replaced or replacing job is accounted with (seed 004's IO-sensitive apps: 0.4–0.7)
SENSITIVE_IO_FRACTION, RESISTANT_IO_FRACTION = 0.5, 0.005


def recorded_jobs(data_dir: str | Path, checkpoint_every_h: float | None = None) -> list[dict]:
    """The jobs of the sacct dumps under ``DIR/slurm`` that ran: id, nodes, start, end."""
    from hpcguard.connectors.file_formats import slurm_dumps
    from hpcguard.connectors.sacct import read_sacct

    jobs: dict[str, dict] = {}
    for f in slurm_dumps(data_dir):
        for rec in read_sacct(f):
            if not isinstance(rec, dict) or rec.get("start_time") is None or not rec.get("nodes"):
                continue
            jobs[rec["job_id"]] = {"job_id": rec["job_id"], "nodes": list(rec["nodes"]),
                                   "start": float(rec["start_time"]),
                                   "end": None if rec.get("end_time") is None else float(rec["end_time"]),
                                   "checkpoint_interval_s": 3600.0 * checkpoint_every_h if checkpoint_every_h
                                   else None}
    return list(jobs.values())


def _episodes_slowdown(path: Path, t0: float, t1: float) -> np.ndarray:
    """Per-second slowdown from the recorded episodes' trapezoids (no jitter: the record has none)."""
    n = max(int(t1 - t0), 1)
    s = np.ones(n)
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            a, b = int(float(r["start"]) - t0), int(float(r["end"]) - t0)
            a, b = max(a, 0), min(b, n)
            if b <= a:
                continue
            tt = np.arange(a, b, dtype=float)
            ramp = max(1.0, 0.1 * (b - a))
            shape = np.minimum(1.0, np.minimum(tt - a + 1, b - tt) / ramp)
            s[a:b] = np.maximum(s[a:b], 1.0 + (float(r.get("peak_slowdown") or 1.0) - 1.0) * shape)
    return s


def io_figures(data_dir: str | Path, actions: list[dict], jobs: list[dict]) -> dict[str, Any]:
    """CanarIO's node-hours: probes spent, replacements saved/spent (seed 004 §4.6), delays counted."""
    from hpcguard.models.canario.accounting import SlowdownWaste, replacement_node_hours

    d = Path(data_dir)
    saved: dict[str, float] = {}
    spent: dict[str, float] = {}
    notes = []
    probes = d / "probes.csv"
    if probes.is_file():
        with open(probes, newline="") as fh:
            rows = list(csv.DictReader(fh))
        spent["probes"] = sum(float(r["end"]) - float(r["start"]) for r in rows) / 3600.0  # one node each
    # a job is replaced once: a dry run (shadow, demo) leaves it running, so the worker asks again at every
    # degraded window; what a real reschedule would have done is its first ask
    first: dict[str, dict] = {}
    for a in sorted((a for a in actions if a.get("kind") == "reschedule"), key=lambda a: float(a["time"])):
        first.setdefault(str(a.get("job_id")), a)
    resched = list(first.values())
    truth_file, episodes = d / "jobscripts" / "sensitivity.csv", d / "degradation.csv"
    if resched and truth_file.is_file() and episodes.is_file():
        with open(truth_file, newline="") as fh:
            truth = {r["job_id"]: bool(int(r["io_sensitive"])) for r in csv.DictReader(fh)}
        by_id = {j["job_id"]: j for j in jobs}
        t0 = min(j["start"] for j in jobs)
        t1 = max((j["end"] or j["start"]) for j in jobs) + 86400.0
        waste = SlowdownWaste(_episodes_slowdown(episodes, t0, t1))
        rows = [(a, by_id.get(str(a["job_id"])), by_id.get(str((a.get("reason") or {}).get("replacement_job_id"))))
                for a in resched]
        rows = [(a, j, r) for a, j, r in rows if j is not None and r is not None]
        if rows:
            f = lambda s: SENSITIVE_IO_FRACTION if s else RESISTANT_IO_FRACTION  # noqa: E731
            js = np.array([truth.get(j["job_id"], False) for _, j, _ in rows])
            rs = np.array([truth.get(r["job_id"], False) for _, _, r in rows])
            acc = replacement_node_hours(
                waste, np.array([float(a["time"]) - t0 for a, _, _ in rows]),
                np.array([j["start"] - t0 for _, j, _ in rows]),
                np.array([(j["end"] or t1) - t0 for _, j, _ in rows]), np.array([f(s) for s in js]),
                np.array([len(j["nodes"]) for _, j, _ in rows]), js,
                np.array([(r["end"] or r["start"]) - r["start"] for _, _, r in rows]), np.array([f(s) for s in rs]),
                np.array([len(r["nodes"]) for _, _, r in rows]), rs)
            saved["reschedule"] = float(acc["gain"].sum())
            spent["reschedule"] = float((acc["false_positive"] + acc["false_negative"]).sum())
    elif resched:
        notes.append("reschedule: no degradation.csv or jobscripts/sensitivity.csv to account it against")
    delays = sum(1 for a in actions if a.get("kind") == "delay")
    return {"saved": saved, "spent": spent, "delays": delays, "notes": notes}


def evaluate_savings(data_dir: str | Path, model_dir: str | None = None, settings=None,
                     actions: list[dict] | None = None, horizon_s: float = 600.0,
                     checkpoint_every_h: float | None = None, bootstrap: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Node-hours saved and spent on a recorded history (see the module docstring).

    ``actions`` given (a run's published actions) or computed offline from ``model_dir``
    with ``settings`` (the worker's decide path).  Returns the accounting of
    :func:`~hpcguard.models.savings.account_savings` plus ``io`` notes and the inputs' sizes.
    """
    from hpcguard.connectors.recorded import load_failures
    from hpcguard.settings import Settings

    d = Path(data_dir)
    if not (d / "failures.csv").is_file():
        raise FileNotFoundError(f"no failures.csv in {d}: label the history first (hpcguard label)")
    settings = settings or Settings.load()
    if actions is None:
        if model_dir is None:
            raise ValueError("give a model directory (--model) or the actions to account")
        from hpcguard.simulators.parity import offline_decisions

        actions = offline_decisions(str(d), model_dir, settings)["actions"]
    jobs = recorded_jobs(d, checkpoint_every_h)
    if not jobs:
        raise ValueError(f"no job that ran in {d / 'slurm'}: savings are counted against jobs")
    fl = load_failures(str(d))
    failures = [{"node": str(n), "time": float(t), "family": str(fam)}
                for n, t, fam in zip(fl["node"], fl["time"], fl["family"])]
    meta = d / "meta.json"
    node_days = None
    if meta.is_file():
        m = json.loads(meta.read_text())
        if m.get("nodes") and m.get("start") is not None and m.get("end") is not None:
            node_days = len(m["nodes"]) * (float(m["end"]) - float(m["start"])) / 86400.0
    if node_days is None:
        nodes = {n for j in jobs for n in j["nodes"]}
        span = max((j["end"] or j["start"]) for j in jobs) - min(j["start"] for j in jobs)
        node_days = len(nodes) * span / 86400.0
    io = io_figures(d, actions, jobs)
    result = account_savings(jobs, failures, actions, horizon_s=horizon_s, io_saved=io["saved"], io_spent=io["spent"],
                             node_days=node_days, bootstrap=bootstrap, seed=seed)
    result["io"] = {"delays": io["delays"], "notes": io["notes"]}
    result["inputs"] = {"data": str(d), "model": model_dir, "jobs": len(jobs), "failures": len(failures),
                        "actions": len(actions), "horizon_s": horizon_s, "checkpoint_every_h": checkpoint_every_h}
    return result


def savings_table(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(kind, count, saved, spent) rows for a terminal table, the total last."""
    rows = [(k, str(v["count"]), f"{v['saved']:.2f}", f"{v['spent']:.2f}") for k, v in result["by_kind"].items()]
    return rows + [("total", str(sum(v["count"] for v in result["by_kind"].values())), f"{result['saved']:.2f}",
                    f"{result['spent']:.2f}")]


def write_savings_plot(result: dict[str, Any], path: str | Path) -> str:
    """Cumulative node-hours saved and spent over the history (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tl = result["timeline"]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    if tl:
        t0 = tl[0]["time"]
        hours = [(p["time"] - t0) / 3600.0 for p in tl]
        ax.step(hours, [p["saved"] for p in tl], where="post", label="saved", color="tab:green")
        ax.step(hours, [p["spent"] for p in tl], where="post", label="spent", color="tab:red")
    ax.set_xlabel("hours into the history")
    ax.set_ylabel("node-hours (cumulative)")
    ax.set_title(f"net {result['net']:.1f} node-hours saved")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)
