"""Shadow mode: the worker runs on a site's own stream and applies nothing
(``hpcguard worker --shadow``), and ``hpcguard report shadow`` says what it would have done.

:func:`shadow_governor` is the worker's adapter in shadow mode: the configured dry-run adapter (the
plan names the exact Slurm commands, with the site's ``[adapter]`` settings) behind the safety
governor, acknowledging every action ``would_apply`` with ``adapter: shadow`` and a detail that
starts ``shadow: would run:`` (the audit log's records carry that ack).

:func:`shadow_report` reads what the worker published (predictions, actions, acks) from the broker,
scores it against the site's failure labels (:func:`hpcguard.models.shadow.shadow_summary`) and,
given the jobs, accounts the would-be actions in node-hours
(:func:`hpcguard.models.savings.account_savings`, rules in ``docs/savings.md``).
"""
from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hpcguard.connectors.adapters import DryRunAdapter
from hpcguard.models.shadow import shadow_summary
from hpcguard.settings import Settings

__all__ = ["ShadowAdapter", "shadow_governor", "shadow_report", "write_shadow_plot", "load_failure_labels",
           "sacct_jobs", "BANNER"]

log = logging.getLogger("hpcguard.worker")
BANNER = "shadow mode: nothing is applied (actions are acknowledged would_apply, with the commands they would run)"


class ShadowAdapter(DryRunAdapter):
    """The dry-run adapter of a shadow worker: its acks and audit records say ``shadow``.

    >>> import tempfile, os
    >>> ack = ShadowAdapter(os.path.join(tempfile.mkdtemp(), "a.jsonl")).apply(
    ...     {"action_id": "a1", "kind": "drain", "nodes": ["n1"]})
    >>> ack.status, ack.adapter, ack.detail.split(":")[0]
    ('would_apply', 'shadow', 'shadow')
    """

    name = "shadow"

    @classmethod
    def of(cls, dry_run: DryRunAdapter) -> "ShadowAdapter":
        """The same adapter (audit log, plan settings), as the shadow."""
        shadow = cls.__new__(cls)
        shadow.__dict__.update(dry_run.__dict__)
        return shadow

    def describe(self, kind: str, commands: list[list[str]]) -> str:
        return "shadow: " + super().describe(kind, commands).removeprefix("dry-run: ")


def shadow_governor(settings: Settings):
    """The governor over the :class:`ShadowAdapter` (the worker's ``adapter``); logs the banner."""
    from hpcguard.connectors.governor import Governor

    governor = Governor.from_settings(settings, "dry-run")
    governor.adapter = ShadowAdapter.of(governor.adapter)
    log.info(BANNER)
    return governor


def load_failure_labels(path: str | Path) -> list[dict]:
    """The failures of a ``failures.csv`` (any file name) as ``node``, ``time``, ``family`` rows."""
    from hpcguard.connectors.recorded import load_failures

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"--failures: no such file: {p}")
    if p.name == "failures.csv":
        fl = load_failures(p.parent)
    else:  # load_failures reads DIR/failures.csv
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copyfile(p, Path(tmp, "failures.csv"))
            fl = load_failures(tmp)
    return [{"node": str(n), "time": float(t), "family": str(fam)}
            for n, t, fam in zip(fl["node"], fl["time"], fl["family"])]


def sacct_jobs(path: str | Path) -> list[dict]:
    """The jobs of one sacct dump that ran (as :func:`~hpcguard.simulators.savings_report.recorded_jobs`)."""
    from hpcguard.connectors.sacct import read_sacct

    jobs: dict[str, dict] = {}
    for rec in read_sacct(path):
        if isinstance(rec, dict) and rec.get("start_time") is not None and rec.get("nodes"):
            jobs[rec["job_id"]] = {"job_id": rec["job_id"], "nodes": list(rec["nodes"]),
                                   "start": float(rec["start_time"]),
                                   "end": None if rec.get("end_time") is None else float(rec["end_time"])}
    return list(jobs.values())


def shadow_report(settings: Settings, failures: str | Path | None, sacct: str | Path | None = None,
                  data: str | Path | None = None, budget: float = 2.0, timeout_ms: int = 3000,
                  hourly: bool = False) -> dict[str, Any]:
    """What a shadow worker on ``settings.kafka`` / ``settings.topics`` published, scored against
    ``failures`` (a ``failures.csv``), or without one against the failures the workers recognised
    (``hpcguard.labels``: silences, ``NODE_FAIL`` jobs, merged as ``hpcguard label`` merges them;
    ``labels_source`` says which).

    Returns :func:`~hpcguard.models.shadow.shadow_summary`'s figures plus ``savings`` (node-hours
    would-have-saved / spent / net with 95 % intervals and by kind; ``None`` without jobs) and
    ``topics`` (the names read).  ``timeout_ms``: a topic is read until it is quiet that long;
    ``hourly`` adds the per-hour figures (``by_hour``, what :func:`write_shadow_plot` draws).
    """
    from hpcguard.simulators.pipeline_run import read_topic
    from hpcguard.streams.topics import TopicNames

    topics = TopicNames.from_settings(settings.topics)
    k = settings.kafka
    if failures is not None:
        labels, source = load_failure_labels(failures), str(failures)
    else:
        from hpcguard.models.labels import merge_stream_labels

        labels, source = merge_stream_labels([x for x, _ in read_topic(k, topics.labels, timeout_ms)]), topics.labels
    predictions = [p for p, _ in read_topic(k, topics.predictions, timeout_ms)]
    actions = [a for a, _ in read_topic(k, topics.actions, timeout_ms)]
    acks = [a for a, _ in read_topic(k, topics.acks, timeout_ms)]
    horizon_s = 60.0 * settings.policy.quiet_minutes
    summary = shadow_summary(predictions, actions, acks, labels, grid_s=settings.worker.grid_s, budget=budget,
                             hourly=hourly)
    summary["topics"] = {"predictions": topics.predictions, "actions": topics.actions, "acks": topics.acks}
    summary["labels_source"] = source
    summary["savings"] = None
    jobs = sacct_jobs(sacct) if sacct else None
    if jobs is None and data:
        from hpcguard.simulators.savings_report import recorded_jobs

        jobs = recorded_jobs(data)
    if jobs is not None:
        if not jobs:
            raise ValueError(f"no job that ran in {sacct or Path(data, 'slurm')}: savings are counted against jobs")
        from hpcguard.models.savings import account_savings
        inside = [{k2: v for k2, v in f.items() if k2 != "lead_minutes"} for f in summary["failure_rows"]]
        s = account_savings(jobs, inside, actions, horizon_s=horizon_s, node_days=summary["node_days"] or None)
        summary["savings"] = {"saved": s["saved"], "spent": s["spent"], "net": s["net"], "ci95": s["ci95"],
                              "without_node_hours_lost": s["without_node_hours_lost"],
                              "net_per_1000_node_days": s["net_per_1000_node_days"], "by_kind": s["by_kind"],
                              "protected": s["protected"], "false_alarm_actions": len(s["false_alarm_actions"]),
                              "jobs": len(jobs), "horizon_s": horizon_s}
    return summary


def write_shadow_plot(summary: dict[str, Any], path: str | Path) -> str:
    """The running false-alarm rate against the budget, and the vote thresholds applied, per hour (PNG;
    ``summary`` from :func:`shadow_report` with ``hourly``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = summary.get("by_hour") or []
    fig, (rate_ax, thr_ax) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    x = [(h["start"] - hours[0]["start"]) / 3600.0 + 1.0 for h in hours] if hours else []
    rate = [h["cumulative_false_alarms_per_100_node_days"] for h in hours]
    rate_ax.fill_between(x, [h["cumulative_ci95"][0] for h in hours], [h["cumulative_ci95"][1] for h in hours],
                         step="post", alpha=0.2, color="tab:red", label="95 % interval")
    rate_ax.step(x, rate, where="post", color="tab:red", label="running false-alarm rate")
    rate_ax.axhline(summary["budget"], color="black", linestyle="--", label=f"budget {summary['budget']:g}")
    rate_ax.set_ylabel("episodes / 100 node-days")
    rate_ax.set_yscale("symlog", linthresh=1.0)
    rate_ax.set_ylim(bottom=0.0)
    rate_ax.set_title(f"{summary['false_alarm_episodes']} false alarms, {summary['warned_2min']} of "
                      f"{summary['failures']} failures warned >= 2 min ahead")
    rate_ax.legend(loc="upper right", fontsize="small")
    judged = [(xi, h["threshold"]) for xi, h in zip(x, hours) if h["threshold"]]
    if judged:
        thr_ax.fill_between([j[0] for j in judged], [j[1]["min"] for j in judged], [j[1]["max"] for j in judged],
                            step="post", alpha=0.3, color="tab:blue", label="min–max over partitions")
        thr_ax.step([j[0] for j in judged], [j[1]["median"] for j in judged], where="post", color="tab:blue",
                    label="median")
        thr_ax.legend(loc="lower right", fontsize="small")
    else:
        thr_ax.text(0.5, 0.5, "no budget controller (the model's fixed threshold)", ha="center",
                    transform=thr_ax.transAxes)
    thr_ax.set_ylabel("vote threshold")
    thr_ax.set_xlabel("hours of event time")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)
