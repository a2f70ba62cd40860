"""CLI commands: CanarIO simulation and evaluation (issue 4, seed 004 ch. 4)."""
from __future__ import annotations

import os
from typing import Optional

import typer

from hpcguard.cli.common import emit_json, evaluate_app, fail, flag, opt, simulate_app


@simulate_app.command("pfs")
def simulate_pfs_cmd(
    out: str = opt(..., "--out", metavar="DIR", help="Directory to write."),
    hours: float = opt(96.0, "--hours", metavar="H", help="Span, over 24 h."),
    seed: int = opt(0, "--seed", metavar="N", help="Random seed."),
    start: float = opt(1_700_000_000.0, "--start", metavar="EPOCH", help="First second."),
    episodes_per_day: float = opt(3.0, "--episodes-per-day", metavar="N", help="Degradation episodes."),
    jobs_per_hour: float = opt(30.0, "--jobs-per-hour", metavar="N", help="Job submissions."),
    json_out: bool = flag(False, "--json", help="Print a JSON summary."),
) -> None:
    """Simulate PFS degradations, canary probes and jobs (CanarIO).

    The five canary probes (Tab. 4.1), job scripts with ground-truth IO
    sensitivity and the 1 s system IO, written under --out (docs/formats.md).
    """
    import numpy as np

    from hpcguard.simulators.pfs import simulate_pfs, write_pfs

    if hours <= 0:
        fail("--hours must be positive")
    trace = simulate_pfs(np.random.default_rng(seed), start, start + hours * 3600.0,
                         episodes_per_day=episodes_per_day, jobs_per_hour=jobs_per_hour)
    paths = write_pfs(trace, out, seed=seed)
    summary = {"out": out, "episodes": len(trace.episodes), "probes": int(trace.probes["start"].size),
               "jobs": int(trace.jobs["job_id"].size), "files": paths}
    if json_out:
        emit_json(summary)
    else:
        typer.echo(f"wrote {summary['episodes']} episodes, {summary['probes']} probe runs, "
                   f"{summary['jobs']} jobs to {out}")


def _plots(result: dict, report: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    os.makedirs(report, exist_ok=True)
    rows = [r for r in result["detector"] if r["model"] == "knn"]
    paths = []
    if rows:
        th = [r["threshold"] for r in rows]
        fig, ax = plt.subplots(figsize=(6, 4))
        for key in ("f1", "precision", "recall"):
            ax.plot(th, [r[key] for r in rows], marker="o", label=key)
        ax.set(xlabel="degradation threshold (%)", ylabel="score", title="k-NN detection (cf. Fig. 4.12)")
        ax.legend()
        paths.append(os.path.join(report, "fig4_12_knn_scores.png"))
        fig.savefig(paths[-1], dpi=100)
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(6, 4))
        for key in ("tpr", "fpr", "tnr", "fnr"):
            ax.plot(th, [100 * r[key] if r[key] is not None else np.nan for r in rows], marker="o", label=key)
        ax.set(xlabel="degradation threshold (%)", ylabel="%", title="k-NN prediction rates (cf. Fig. 4.13)")
        ax.legend()
        paths.append(os.path.join(report, "fig4_13_knn_rates.png"))
        fig.savefig(paths[-1], dpi=100)
        plt.close(fig)
    p = result["_plot"]
    hours = (p["window_end"] - p["window_end"][0]) / 3600.0
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot(hours, 100 * p["ratio"], color="black", lw=0.7, label="probe runtime (% of expected)")
    ax.plot(hours, 100 * p["slowdown_minute"], color="grey", lw=0.5, alpha=0.6, label="PFS slowdown (truth)")
    ax.fill_between(hours, 0, 100 * np.nanmax(p["ratio"]), where=p["degraded"], color="red", alpha=0.15,
                    label="detected degraded")
    ax.set(xlabel="hours", ylabel="%")
    s = p["series"]
    if s is not None:
        ax2 = ax.twinx()
        sh = (s["time"] - p["window_end"][0]) / 3600.0
        ax2.plot(sh, s["recovered"], color="tab:blue", label="node-hours recovered")
        ax2.plot(sh, s["probe_cost"], color="tab:orange", label="probe node-hours")
        ax2.set_ylabel("node-hours")
        ax2.legend(loc="upper right")
    ax.legend(loc="upper left")
    ax.set_title("CanarIO in action (cf. Fig. 4.15)")
    paths.append(os.path.join(report, "fig4_15_canario_in_action.png"))
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    return paths


@evaluate_app.command("canario")
def evaluate_canario_cmd(
    data: str = opt(..., "--data", metavar="DIR", help="Written by 'simulate pfs'."),
    report: Optional[str] = opt(None, "--report", metavar="DIR", help="PNG plots (Figs. 4.12, 4.13, 4.15)."),
    models: str = opt("knn,rf,dt", "--models", metavar="LIST", help="Detector models."),
    initial_bank_h: float = opt(24.0, "--initial-bank-hours", metavar="H", help="Training bank."),
    retrain_min: float = opt(10.0, "--retrain-minutes", metavar="M", help="Retraining cadence."),
    seed: int = opt(0, "--seed", metavar="N", help="Job classifier's seed."),
    json_out: bool = flag(False, "--json", help="Print the evaluation as JSON."),
) -> None:
    """Replay a recorded run through CanarIO and score it.

    k-NN/RF/DT degradation detection at thresholds 0–100 % (Figs. 4.12–4.13),
    the PRIONN job classifier's TPR/TNR (§4.4) and the node-hours an IO-aware
    replacement recovers versus the probes' cost (§4.6).
    """
    from rich.progress import Progress

    from hpcguard.connectors.canario_io import read_pfs
    from hpcguard.models.canario.evaluation import evaluate_canario

    chosen = tuple(m.strip() for m in models.split(",") if m.strip())
    bad = [m for m in chosen if m not in ("knn", "rf", "dt")]
    if bad or not chosen:
        fail(f"unknown detector model(s) {bad or models!r}; choose from knn, rf, dt")
    try:
        trace = read_pfs(data)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    span_h = trace.slowdown.size / 3600.0
    if span_h <= initial_bank_h:
        fail(f"the recording spans {span_h:.1f} h, not more than the {initial_bank_h:g} h initial bank")
    with Progress(transient=True, disable=json_out) as bar:
        task = bar.add_task("detector models", total=len(chosen))
        result = evaluate_canario(trace, chosen, initial_bank_s=initial_bank_h * 3600.0,
                                  retrain_every_s=retrain_min * 60.0, seed=seed,
                                  progress=lambda _m: bar.advance(task))
    plots = _plots(result, report) if report else []
    result.pop("_plot")
    result["plots"] = plots
    if json_out:
        emit_json(result)
        return
    typer.echo(f"{'model':5} {'thr%':>5} {'f1':>6} {'prec':>6} {'recall':>6} {'tpr':>6} {'fpr':>6} {'tnr':>6} {'fnr':>6}")
    for r in result["detector"]:
        typer.echo(f"{r['model']:5} {r['threshold']:5.0f} " + " ".join(
            f"{r[k]:6.3f}" if r[k] == r[k] else "   nan" for k in ("f1", "precision", "recall", "tpr", "fpr", "tnr", "fnr")))
    ep = result["episodes"]
    typer.echo(f"episodes detected: {ep['detected']}/{ep['evaluated']} (severe {ep['severe_detected']}/"
               f"{ep['severe_evaluated']})")
    j = result["jobs"]
    typer.echo(f"job classifier: tpr {j['tpr']:.3f} tnr {j['tnr']:.3f} accuracy {j['accuracy']:.3f} "
               f"({j['predicted_jobs']} jobs, {j['trainings']} trainings)")
    nh = result["node_hours"]
    typer.echo(f"node-hours recovered {nh['recovered']:.1f} (gain {nh['gain']:.1f}, FP {nh['false_positive_cost']:.1f}, "
               f"FN {nh['false_negative_cost']:.1f}, {nh['replacements']} replacements); probe cost {nh['probe_cost']:.1f}")
    for p in plots:
        typer.echo(f"plot: {p}")
