"""CLI commands: checkpoint intervals, failures fit, fars select, shiraz (issue 5).

``hpcguard checkpoint interval``, ``hpcguard checkpoint shiraz``,
``hpcguard failures fit`` and ``hpcguard fars select``. Durations accept ``s``, ``m``,
``h``, ``d`` suffixes (a bare number is hours).
"""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Optional

import typer

from hpcguard.cli.common import checkpoint_app, emit_json, failures_app, fail, fars_app, flag, opt

METHODS = ("young", "daly", "aware", "multilevel")
JOB, MORE = "Job and failures", "Multilevel and Monte Carlo"


def _hours(name: str, text: str) -> float:
    from hpcguard.models.units import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        fail(f"{name}: {exc}")


def _interval_rows(method: str, jobs: list[dict], mtbf_h: float, shape: Optional[float], system_nodes: int,
                   simulate: int, pfs_cost_h: float, sigma: float, seed: int) -> list[dict]:
    """One answer per job dict (runtime_h may be None, nodes, ckpt_cost_h)."""
    from hpcguard.models import checkpoint as ck

    w = 1.0 if shape is None else shape
    rows: list[dict] = []
    aware = {}
    if method == "aware":
        if any(j["runtime_h"] is None for j in jobs):
            fail("--method aware needs --runtime (or a runtime_h column in --jobs)")
        results = ck.aware_intervals_batch([j["runtime_h"] for j in jobs], [j["ckpt_cost_h"] for j in jobs], mtbf_h,
                                           shape=shape, nodes=[j["nodes"] for j in jobs],
                                           system_nodes=[max(system_nodes, j["nodes"]) for j in jobs])
        aware = dict(enumerate(results))
    for idx, job in enumerate(jobs):
        t, t_c, n = job["runtime_h"], job["ckpt_cost_h"], job["nodes"]
        job_mtbf = ck.scale_mtbf(mtbf_h, n, max(system_nodes, n))
        if method == "aware":
            res = aware[idx]
            tau, cost, no_ckpt = (None if res.no_checkpoint else res.interval_h), res.expected_cost_h, res.no_checkpoint
        else:
            if method == "young":
                tau = ck.young_interval(job_mtbf, t_c)
            elif method == "daly":
                tau = ck.daly_interval(job_mtbf, t_c)
            else:
                tau = ck.multilevel_interval(job_mtbf, t_c, pfs_cost_h, sigma)
            no_ckpt = t is not None and tau + t_c > t
            cost = None if t is None else float(ck.expected_cost([tau + t_c], t, t_c, job_mtbf, w)[0])
        row = {"method": method, "interval_h": tau, "expected_cost_h": cost, "no_checkpoint": bool(no_ckpt),
               "runtime_h": t, "ckpt_cost_h": t_c, "nodes": n, "job_mtbf_h": job_mtbf,
               "shape": w, "failure_probability": None if t is None else float(ck.failure_cdf(t, job_mtbf, w))}
        if simulate:
            if t is None:
                fail("--simulate needs --runtime")
            sim = ck.simulate_cost(float("inf") if tau is None else tau, t, t_c, job_mtbf, shape=w,
                                   n_runs=simulate, seed=seed + idx)
            row.update(simulated_cost_h=sim["cost_h"], simulated_stderr_h=sim["stderr_h"])
        rows.append(row)
    return rows


def _read_jobs_csv(path: str) -> list[dict]:
    from hpcguard.models.units import parse_duration

    p = Path(path)
    if not p.is_file():
        fail(f"jobs file not found: {p}")
    jobs = []
    with p.open(newline="") as fh:
        reader = csv.DictReader(fh)
        need = {"runtime_h", "nodes", "ckpt_cost_h"}
        if reader.fieldnames is None or not need <= set(reader.fieldnames):
            fail(f"{p}: need CSV columns runtime_h,nodes,ckpt_cost_h (got {reader.fieldnames})")
        for line, row in enumerate(reader, start=2):
            try:
                nodes = int(row["nodes"])
                if nodes < 1:
                    raise ValueError("nodes must be >= 1")
                jobs.append({"runtime_h": parse_duration(row["runtime_h"]), "nodes": nodes,
                             "ckpt_cost_h": parse_duration(row["ckpt_cost_h"])})
            except (TypeError, ValueError) as exc:
                fail(f"{p}:{line}: {exc}")
    if not jobs:
        fail(f"{p}: no jobs")
    return jobs


@checkpoint_app.command("interval")
def interval(
    method: str = opt("aware", "--method", metavar="NAME", help="Or young, daly, multilevel."),
    mtbf: str = opt(..., "--mtbf", metavar="DUR", help="System MTBF, e.g. 24h."),
    ckpt_cost: str = opt(..., "--ckpt-cost", metavar="DUR", help="Checkpoint cost t_c, e.g. 30m."),
    runtime: Optional[str] = opt(None, "--runtime", metavar="DUR", help="Job runtime t, e.g. 18.99h."),
    nodes: int = opt(1, "--nodes", panel=JOB, min=1, metavar="N", help="Nodes of the job."),
    system_nodes: int = opt(1, "--system-nodes", panel=JOB, min=1, metavar="N", help="Nodes the MTBF is for."),
    weibull_shape: Optional[float] = opt(None, "--weibull-shape", panel=JOB, metavar="W",
                                         help="Weibull shape; else Poisson."),
    poisson: bool = flag(False, "--poisson", panel=JOB, help="Poisson failures (the default)."),
    simulate: int = opt(0, "--simulate", panel=MORE, min=0, metavar="F", help="Monte-Carlo runs (Eq. 3.1)."),
    jobs: Optional[str] = opt(None, "--jobs", metavar="FILE", help="CSV of jobs: answer each one."),
    pfs_cost: str = opt("0", "--pfs-cost", panel=MORE, metavar="DUR", help="Multilevel: checkpoint to PFS."),
    sigma: float = opt(0.0, "--sigma", panel=MORE, metavar="F", help="Multilevel: failures migrated."),
    seed: int = opt(0, "--seed", panel=MORE, metavar="N", help="Seed of --simulate."),
    as_json: bool = flag(False, "--json", help="Print JSON."),
) -> None:
    """Checkpoint interval tau and its expected cost (Eq. 3.8).

    aware: seed 000 Alg. 1; multilevel: seed 003 Eq. 5.10. The MTBF is scaled to
    the job (Eq. 3.14); --jobs CSV columns: runtime_h,nodes,ckpt_cost_h.
    """
    if method not in METHODS:
        fail(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    if weibull_shape is not None and poisson:
        fail("give either --weibull-shape or --poisson, not both")
    if weibull_shape is not None and not (weibull_shape > 0 and math.isfinite(weibull_shape)):
        fail("--weibull-shape must be > 0")
    mtbf_h = _hours("--mtbf", mtbf)
    if mtbf_h <= 0:
        fail("--mtbf must be > 0")
    if jobs is not None:
        job_list = _read_jobs_csv(jobs)
    else:
        t_c = _hours("--ckpt-cost", ckpt_cost)
        t = None if runtime is None else _hours("--runtime", runtime)
        job_list = [{"runtime_h": t, "nodes": nodes, "ckpt_cost_h": t_c}]
    if system_nodes > 1 and any(j["nodes"] > system_nodes for j in job_list):
        fail(f"a job cannot use more nodes than --system-nodes ({system_nodes})")
    if any(j["ckpt_cost_h"] <= 0 or (j["runtime_h"] is not None and j["runtime_h"] <= 0) for j in job_list):
        fail("checkpoint cost and runtime must be > 0")
    try:
        rows = _interval_rows(method, job_list, mtbf_h, weibull_shape, system_nodes, simulate,
                              _hours("--pfs-cost", pfs_cost), sigma, seed)
    except ValueError as exc:
        fail(str(exc))
    if as_json:
        emit_json(rows if jobs is not None else rows[0])
        return
    for r in rows:
        tau = "no checkpoint" if r["interval_h"] is None else f"tau = {r['interval_h']:.4f} h"
        cost = "" if r["expected_cost_h"] is None else f", expected cost {r['expected_cost_h']:.4f} h"
        sim = f", simulated {r['simulated_cost_h']:.4f} h" if "simulated_cost_h" in r else ""
        typer.echo(f"{r['method']}: {tau}{cost}{sim} (job MTBF {r['job_mtbf_h']:.3g} h)")


@checkpoint_app.command("shiraz")
def shiraz_cmd(
    mtbf: str = opt(..., "--mtbf", metavar="DUR", help="System MTBF, e.g. 5h or 20h."),
    heavy_cost: str = opt(..., "--heavy-cost", metavar="DUR", help="Heavy app's checkpoint cost."),
    light_cost: str = opt(..., "--light-cost", metavar="DUR", help="Light app's checkpoint cost."),
    shape: float = opt(0.6, "--shape", metavar="B", help="Weibull shape beta."),
    total: str = opt("1000h", "--total", metavar="DUR", help="Total time T_total."),
    lost_fraction: float = opt(0.45, "--lost-fraction", metavar="E", help="Mean share of work lost."),
    stretch: str = opt("2,3,4", "--stretch", metavar="LIST", help="Shiraz+ stretch factors."),
    as_json: bool = flag(False, "--json", help="Print JSON."),
) -> None:
    """Shiraz fair switch point k of a light and a heavy app, Shiraz+.

    Seed 002 Eqs. 2–16; Shiraz+ stretches the heavy application's interval.
    """
    from hpcguard.models.shiraz import shiraz

    try:
        factors = tuple(float(x) for x in stretch.split(",") if x.strip())
        res = shiraz(_hours("--mtbf", mtbf), _hours("--heavy-cost", heavy_cost), _hours("--light-cost", light_cost),
                     shape=shape, total_h=_hours("--total", total), lost_fraction=lost_fraction,
                     stretch_factors=factors)
    except ValueError as exc:
        fail(str(exc))
    out = res.to_dict()
    out["region"] = None if res.region is None else list(res.region)
    if as_json:
        emit_json(out)
        return
    if res.k is None:
        typer.echo(f"no switch point lets both applications gain (k = inf); closest balance at k = {res.k_balanced}")
    else:
        typer.echo(f"k = {res.k} (switch after {res.switch_after_h:.2f} h), region {res.region[0]}..{res.region[1]}, "
                   f"gain light {res.gain_light_h:.2f} h, heavy {res.gain_heavy_h:.2f} h")
    for p in res.shiraz_plus:
        typer.echo(f"  Shiraz+ {p['stretch']:g}x: heavy gain {p['gain_heavy_h']:.2f} h, "
                   f"checkpoint I/O -{100 * p['io_reduction']:.0f} %")


@failures_app.command("fit")
def fit(
    path: str = typer.Argument(..., metavar="FILE", show_default=False,
                               help="LANL records (.csv, .csv.xz, .csv.gz)."),
    system: int = opt(..., "--system", metavar="ID", help="System id, e.g. 8 or 18 (Tab. 7.2)."),
    as_json: bool = flag(False, "--json", help="Print JSON (shape, scale_h, mtbf_h...)."),
) -> None:
    """Weibull and exponential MLE fits of failure inter-arrival times."""
    from hpcguard.connectors.lanl import interarrival_hours, load_lanl
    from hpcguard.models.distributions import fit_exponential, fit_weibull

    try:
        failures = load_lanl(path)
        gaps, dropped = interarrival_hours(failures, system)
        wb, ex = fit_weibull(gaps), fit_exponential(gaps)
    except (OSError, ValueError) as exc:
        fail(str(exc))
    out = {"system": system, "system_nodes": failures.system_nodes.get(system), **wb.to_dict(),
           "dropped_zero_gaps": dropped, "exponential": ex.to_dict(),
           "preferred": "weibull" if wb.loglik - ex.loglik > 1.0 else "exponential"}
    if as_json:
        emit_json(out)
        return
    typer.echo(f"system {system} ({out['system_nodes']} nodes): n = {wb.n} gaps ({dropped} zero gaps dropped)")
    typer.echo(f"  Weibull shape {wb.shape:.4f}, scale {wb.scale_h:.4f} h, MTBF {wb.mtbf_h:.3f} h, "
               f"KS {wb.ks_stat:.4f} (p {wb.ks_pvalue:.3g}), loglik {wb.loglik:.1f}")
    typer.echo(f"  exponential MTBF {ex.mtbf_h:.3f} h, KS {ex.ks_stat:.4f} (p {ex.ks_pvalue:.3g}), "
               f"loglik {ex.loglik:.1f}")


@fars_app.command("select")
def select(
    spare: int = opt(..., "--spare", min=0, metavar="S", help="Spare nodes in the pool."),
    jobs: str = opt(..., "--jobs", metavar="FILE", help="JSON list of suspicious jobs."),
    strategy: str = opt("sul-d", "--strategy", metavar="NAME", help="sul-d, jfr-d or fsd-d."),
    precision: float = opt(..., "--precision", metavar="P", help="Predictor precision (0..1)."),
    interval_: str = opt("30m", "--interval", metavar="DUR", help="FARS interval I_F."),
    overhead: str = opt("6m", "--overhead", metavar="DUR", help="Rescheduling overhead O_F."),
    as_json: bool = flag(False, "--json", help="Print JSON (selected, gain, spare_used)."),
) -> None:
    """Choose suspicious jobs to move to spare nodes (FARS knapsack).

    0-1 knapsack (seed 001 Eq. 5; strategies Eqs. 2-4), residual rule (§4.4).
    A job: id, nodes, suspicious_nodes, hours_since_checkpoint, runtime_h
    (and requeue_h, restart_h).
    """
    from hpcguard.models.fars import select_jobs

    p = Path(jobs)
    if not p.is_file():
        fail(f"jobs file not found: {p}")
    try:
        job_list = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        fail(f"{p}: not JSON ({exc})")
    if not isinstance(job_list, list) or not all(isinstance(j, dict) for j in job_list):
        fail(f"{p}: expected a JSON list of job objects")
    try:
        sel = select_jobs(job_list, spare, strategy, precision, _hours("--interval", interval_),
                          _hours("--overhead", overhead))
    except (TypeError, ValueError) as exc:
        fail(str(exc))
    if as_json:
        emit_json(sel.to_dict())
        return
    typer.echo(f"selected {', '.join(sel.selected) or '(none)'}: gain {sel.gain:.4g}, spare used {sel.spare_used}"
               + (f" (residual rule: {sel.residual})" if sel.residual else ""))
