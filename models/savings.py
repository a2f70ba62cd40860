"""Node-hours saved and spent: a history's actions against its jobs and failures, job by job.

The counterfactual accounting of issue 55 (every rule in ``docs/savings.md``):

* **without hpcguard** a job that a failure kills loses the node-hours since its last
  periodic checkpoint (``start + k × checkpoint_interval_s`` when the job has a plan), or
  since its start: ``n × (t_failure − t_ref)``;
* **checkpoint** at ``t_a`` taking ``c`` seconds, done before the failure: the job loses
  only the work since it, ``n × (t_failure − t_a − c)``, so it saved
  ``n × (t_a + c − t_ref)`` and spent ``n × c`` (its own time); one not done by the
  failure saves nothing and costs nothing (the pause fell in time the failure destroyed);
* **migrate** off the node that fails, done (``t_a + m``) before the failure: the job
  survives, saved ``n × (t_failure − t_ref)``, spent ``n × m``; a migration off another
  node saves nothing and still costs ``n × m``;
* **drain** of an idle node: the jobs that started on that node between the drain and its
  failure, and that the failure killed, would not have started there: their losses are
  saved; the drain spends the node's hours held (from the drain to the failure, or to its
  deadline + ``horizon_s`` when no failure followed);
* an action no failure followed (within ``horizon_s`` after its deadline) spends its cost
  and saves nothing; a job's several actions all spend, the latest that completed saves;
* ``delay``/``release``/``reschedule`` (CanarIO) and the canary probes come in as
  ``io_saved``/``io_spent`` figures of seed 004's accounting
  (:mod:`hpcguard.models.canario.accounting`).

95 % intervals resample the accounted units (a failure with its job and actions, or an
action no failure followed) with replacement (a seeded bootstrap).

Example
-------
>>> jobs = [{"job_id": "7", "nodes": ["n1", "n2"], "start": 0.0, "end": 7200.0}]
>>> failures = [{"node": "n1", "time": 7200.0, "family": "thermal"}]
>>> actions = [{"action_id": "a1", "kind": "checkpoint", "job_id": "7", "nodes": ["n1", "n2"],
...             "time": 6600.0, "deadline": 7260.0, "reason": {"inputs": {"safeguard_ckpt_s": 60.0}}}]
>>> s = account_savings(jobs, failures, actions)
>>> round(s["without_node_hours_lost"], 2), round(s["saved"], 2), round(s["spent"], 3), round(s["net"], 2)
(4.0, 3.7, 0.033, 3.67)
>>> s["protected"][0]["job_id"], s["protected"][0]["action_id"]
('7', 'a1')
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Iterable, Mapping

import numpy as np

__all__ = ["account_savings", "loss_reference", "KINDS"]

KINDS = ("checkpoint", "migrate", "drain", "delay", "release", "reschedule", "probes")


def loss_reference(start: float, t: float, interval_s: float | None) -> float:
    """The last durable state of a job at ``t``: its last periodic checkpoint, else its start.

    >>> loss_reference(0.0, 5000.0, 1800.0), loss_reference(0.0, 5000.0, None)
    (3600.0, 0.0)
    """
    if not interval_s or interval_s <= 0 or t <= start:
        return float(start)
    return float(start + math.floor((t - start) / interval_s) * interval_s)


def _duration(action: Mapping[str, Any]) -> float:
    inputs = (action.get("reason") or {}).get("inputs") or {}
    key = "migration_s" if action["kind"] == "migrate" else "safeguard_ckpt_s"
    return float(inputs.get(key) or 0.0)


def _killed(jobs: list[dict], node: str, t: float, slack_s: float = 1.0) -> dict | None:
    """The job running on ``node`` when it failed at ``t`` (latest start wins); sacct's whole
    seconds may put the end of the job the failure killed up to ``slack_s`` before it."""
    best = None
    for j in jobs:
        if node in j["nodes"] and j["start"] < t and (j["end"] is None or t <= j["end"] + slack_s):
            if best is None or (j["start"], j["job_id"]) > (best["start"], best["job_id"]):
                best = j
    return best


def _job(raw: Mapping[str, Any]) -> dict:
    nodes = raw.get("nodes") or []
    if isinstance(nodes, str):
        nodes = [n for n in nodes.split(",") if n]
    end = raw.get("end")
    return {"job_id": str(raw["job_id"]), "nodes": [str(n) for n in nodes], "start": float(raw["start"]),
            "end": None if end is None or (isinstance(end, float) and math.isnan(end)) else float(end),
            "interval_s": raw.get("checkpoint_interval_s")}


def _action(raw: Mapping[str, Any]) -> dict:
    """An action with its decision time: ``time`` as published, else its trigger's sample time
    (the offline side of parity leaves ``time`` out)."""
    a = dict(raw)
    t = a.get("time")
    a["time"] = float((a.get("reason") or {}).get("sample_time") if t is None else t)
    return a


def account_savings(jobs: Iterable[Mapping[str, Any]], failures: Iterable[Mapping[str, Any]],
                    actions: Iterable[Mapping[str, Any]], horizon_s: float = 600.0,
                    io_saved: Mapping[str, float] | None = None, io_spent: Mapping[str, float] | None = None,
                    node_days: float | None = None, bootstrap: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Node-hours saved and spent by ``actions`` on a history of ``jobs`` and ``failures``.

    Parameters
    ----------
    jobs
        ``job_id``, ``nodes`` (list or comma string), ``start``, ``end`` (epoch s), optional
        ``checkpoint_interval_s`` (the site's periodic plan at job start).
    failures
        ``node``, ``time``, optional ``family``.
    actions
        As the worker publishes them: ``action_id``, ``kind``, ``job_id``, ``nodes``,
        ``time`` (else ``reason.sample_time``), ``deadline``, ``reason``
        (``inputs.safeguard_ckpt_s`` / ``migration_s``, ``predicted_nodes``).
    horizon_s
        A failure answers an action when it comes between the action and its deadline +
        ``horizon_s``.
    io_saved, io_spent
        CanarIO figures by kind (``delay``, ``reschedule``, ``probes``, ...), node-hours.
    node_days
        The history's size, for ``net_per_1000_node_days``.

    Returns
    -------
    dict
        ``net``, ``saved``, ``spent``, ``without_node_hours_lost``, ``with_node_hours_lost``,
        ``by_kind`` and ``by_family`` (saved/spent/count), ``failures`` (one row per failure:
        the job it killed, its loss without and with hpcguard, the action that answered it),
        ``protected`` (the jobs an action saved work of), ``false_alarm_actions``,
        ``ci95`` (bootstrap intervals of net/saved/spent), ``timeline`` (time, cumulative
        saved, cumulative spent, for the plot).
    """
    jobs = [_job(j) for j in jobs]
    by_id = {j["job_id"]: j for j in jobs}
    fails = sorted(({"node": str(f["node"]), "time": float(f["time"]), "family": str(f.get("family") or "unknown")}
                    for f in failures), key=lambda f: (f["time"], f["node"]))
    acts = sorted((_action(a) for a in actions), key=lambda a: (a["time"], str(a.get("action_id"))))
    answered: set[str] = set()
    units: list[dict] = []       # accounted units: (saved, spent, time) for the bootstrap and the timeline
    rows, protected = [], []
    kind_saved: dict[str, float] = defaultdict(float)
    kind_spent: dict[str, float] = defaultdict(float)
    kind_count: dict[str, int] = defaultdict(int)
    fam: dict[str, dict[str, float]] = defaultdict(lambda: {"saved": 0.0, "spent": 0.0, "failures": 0,
                                                            "lost_without": 0.0})

    def window(a: dict, t: float) -> bool:
        return float(a["time"]) <= t <= float(a.get("deadline") or a["time"]) + horizon_s

    for f in fails:
        node, tf = f["node"], f["time"]
        fam[f["family"]]["failures"] += 1
        job = _killed(jobs, node, tf)
        row = {"node": node, "time": tf, "family": f["family"], "job_id": job["job_id"] if job else None,
               "lost_without": 0.0, "lost_with": 0.0, "action_id": None, "action_kind": None}
        saved = spent = 0.0
        if job is not None:
            n = len(job["nodes"]) or 1
            t_ref = loss_reference(job["start"], tf, job["interval_s"])
            lost = n * max(tf - t_ref, 0.0) / 3600.0
            row["lost_without"] = row["lost_with"] = lost
            mine = [a for a in acts if str(a.get("job_id")) == job["job_id"] and a["kind"] in ("checkpoint", "migrate")
                    and window(a, tf) and a["action_id"] not in answered]
            best = None
            for a in mine:
                answered.add(a["action_id"])
                d = _duration(a)
                cost = n * d / 3600.0
                ta = float(a["time"])
                done = ta + d <= tf
                if a["kind"] == "checkpoint":
                    gain = n * max(ta + d - t_ref, 0.0) / 3600.0 if done else 0.0
                    cost = cost if done else 0.0
                else:  # migrate: the job leaves the failing node in time, or it does not
                    off = node in [str(x) for x in (a.get("reason") or {}).get("predicted_nodes", a.get("nodes") or [])]
                    gain = lost if done and off else 0.0
                    cost = cost if (done or not off) else 0.0
                kind_spent[a["kind"]] += cost
                kind_count[a["kind"]] += 1
                spent += cost
                if gain > 0 and (best is None or gain > best[1]):
                    best = (a, gain)
            if best is not None:
                a, gain = best
                saved = min(gain, lost)
                kind_saved[a["kind"]] += saved
                row.update(lost_with=lost - saved, action_id=a["action_id"], action_kind=a["kind"])
                protected.append({"job_id": job["job_id"], "nodes": len(job["nodes"]), "action_id": a["action_id"],
                                  "kind": a["kind"], "failure_node": node, "failure_time": tf,
                                  "node_hours_saved": saved})
        # a drain of this node before the failure: the jobs that started on it since would not have
        for a in acts:
            if a["kind"] != "drain" or a["action_id"] in answered or node not in [str(x) for x in a.get("nodes") or []]:
                continue
            if not window(a, tf):
                continue
            answered.add(a["action_id"])
            ta = float(a["time"])
            hold = max(tf - ta, 0.0) / 3600.0
            kind_spent["drain"] += hold
            kind_count["drain"] += 1
            spent += hold
            if job is not None and job["start"] >= ta and row["action_id"] is None:
                kind_saved["drain"] += row["lost_without"]
                saved += row["lost_without"]
                row.update(lost_with=0.0, action_id=a["action_id"], action_kind="drain")
                protected.append({"job_id": job["job_id"], "nodes": len(job["nodes"]), "action_id": a["action_id"],
                                  "kind": "drain", "failure_node": node, "failure_time": tf,
                                  "node_hours_saved": row["lost_without"]})
        fam[f["family"]]["saved"] += saved
        fam[f["family"]]["spent"] += spent
        fam[f["family"]]["lost_without"] += row["lost_without"]
        rows.append(row)
        units.append({"time": tf, "saved": saved, "spent": spent})
    false_alarms = []
    for a in acts:  # no failure answered: only the cost
        if a["action_id"] in answered or a["kind"] not in ("checkpoint", "migrate", "drain"):
            continue
        if a["kind"] == "drain":
            cost = max(float(a.get("deadline") or a["time"]) + horizon_s - float(a["time"]), 0.0) / 3600.0
        else:
            job = by_id.get(str(a.get("job_id")))
            n = len(job["nodes"]) if job else int(((a.get("reason") or {}).get("inputs") or {}).get("num_nodes") or 1)
            cost = n * _duration(a) / 3600.0
        kind_spent[a["kind"]] += cost
        kind_count[a["kind"]] += 1
        false_alarms.append({"action_id": a["action_id"], "kind": a["kind"], "job_id": a.get("job_id"),
                             "time": float(a["time"]), "node_hours_spent": cost})
        units.append({"time": float(a["time"]), "saved": 0.0, "spent": cost})
    for kind, v in (io_saved or {}).items():
        kind_saved[kind] += float(v)
    for kind, v in (io_spent or {}).items():
        kind_spent[kind] += float(v)
    io_net = sum((io_saved or {}).values()) - sum((io_spent or {}).values())
    saved_total = float(sum(kind_saved.values()))
    spent_total = float(sum(kind_spent.values()))
    without = float(sum(r["lost_without"] for r in rows))
    net = saved_total - spent_total
    units.sort(key=lambda u: u["time"])
    cum_saved = np.cumsum([u["saved"] for u in units]) if units else np.zeros(0)
    cum_spent = np.cumsum([u["spent"] for u in units]) if units else np.zeros(0)
    kinds = sorted(set(kind_saved) | set(kind_spent) | set(kind_count))
    return {
        "net": net, "saved": saved_total, "spent": spent_total,
        "without_node_hours_lost": without, "with_node_hours_lost": without - sum(r["lost_without"] - r["lost_with"]
                                                                                   for r in rows),
        "net_per_1000_node_days": 1000.0 * net / node_days if node_days else None,
        "node_days": node_days,
        "by_kind": {k: {"saved": kind_saved.get(k, 0.0), "spent": kind_spent.get(k, 0.0),
                        "count": kind_count.get(k, 0)} for k in kinds},
        "by_family": {k: dict(v) for k, v in sorted(fam.items())},
        "failures": rows, "protected": protected, "false_alarm_actions": false_alarms,
        "ci95": _bootstrap(units, io_net, bootstrap, seed),
        "timeline": [{"time": u["time"], "saved": float(s), "spent": float(p)}
                     for u, s, p in zip(units, cum_saved, cum_spent)],
    }


def _bootstrap(units: list[dict], io_net: float, draws: int, seed: int) -> dict[str, list[float] | None]:
    """Percentile intervals of net, saved and spent, resampling the accounted units."""
    if not units or draws <= 0:
        return {"net": None, "saved": None, "spent": None}
    saved = np.array([u["saved"] for u in units])
    spent = np.array([u["spent"] for u in units])
    idx = np.random.default_rng(seed).integers(0, len(units), size=(draws, len(units)))
    s, p = saved[idx].sum(axis=1), spent[idx].sum(axis=1)

    def ci(x: np.ndarray) -> list[float]:
        return [float(np.percentile(x, 2.5)), float(np.percentile(x, 97.5))]

    return {"net": ci(s - p + io_net), "saved": ci(s), "spent": ci(p)}
