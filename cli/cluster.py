"""CLI commands: cluster simulator, policy evaluation, trace stats (issue 6).

``hpcguard simulate cluster``   one policy on a workload with failures → FARS metrics
``hpcguard evaluate policies``  several policies on the same workload and failures → table, gains, PNG
``hpcguard trace stats``        jobs, nodes, span, offered load; utilization and p_idle_2pct of a recorded schedule
"""
from __future__ import annotations

from typing import List, Optional

import typer

from hpcguard.cli.common import emit_json, evaluate_app, fail, flag, opt, simulate_app, trace_app

# One help line per option; the specs' syntax at length: docs/site-guide.md, "Other commands' options".
WORKLOAD_HELP = "SWF trace or synthetic."
FAILURES_HELP = "Failure source."
PREDICTOR_HELP = "Emulated (FARS §5.1) or eval:EVAL.json."
WORKLOAD = "Workload and IO"
DEFAULT_POLICIES = "fcfs,sul-d,jfr-d,fsd-d,daly,aware,multilevel-bb,multilevel-safeguard,multilevel"


def _scenario(workload: str, nodes: Optional[int], failures: str, predictor: Optional[str], days: Optional[float],
              seed: int, jobs: int, utilization: float, pfs_event: List[str], io_limit: Optional[float],
              io_sensitive: float):
    import numpy as np

    from hpcguard.connectors.swf import load_swf
    from hpcguard.simulators.cluster import IoModel
    from hpcguard.simulators.failures import (emulate_predictor, parse_duration_s, parse_failure_spec,
                                              parse_predictor_spec)
    from hpcguard.simulators.workload import from_swf, synthetic_workload

    rng = np.random.default_rng(seed)
    if workload == "synthetic":
        n_nodes = nodes or 512
        wl = synthetic_workload(rng, n_jobs=jobs, nodes=n_nodes, utilization=utilization,
                                io_sensitive_fraction=io_sensitive, io_demand_mean=0.05 if io_limit else 0.0,
                                estimate_factor=1.5 if pfs_event else 1.0)
    else:
        trace = load_swf(workload)
        n_nodes = nodes or trace.max_nodes or int(trace.size.max())
        wl = from_swf(trace, n_nodes, rng=rng, io_sensitive_fraction=io_sensitive,
                      io_demand_mean=0.05 if io_limit else 0.0)
    if days is not None:
        keep = int(np.searchsorted(wl.submit, days * 86400.0))
        if keep == 0:
            raise ValueError(f"no job is submitted within the first {days} days")
        wl = wl.head(keep)
    horizon = float(wl.submit.max() + 30 * 86400.0)
    fl = parse_failure_spec(failures, n_nodes, horizon, np.random.default_rng(seed + 1))
    pspec = parse_predictor_spec(predictor)
    pred = None
    if pspec is not None and "eval" in pspec:
        # a trained model's measured behaviour (simulators/eval_predictor.py reads the file)
        from hpcguard.simulators.eval_predictor import emulate_eval_predictor, load_eval_predictor

        pred, precision = emulate_eval_predictor(np.random.default_rng(seed + 2), load_eval_predictor(pspec["eval"]),
                                                 fl, n_nodes, horizon)
        pspec = {"precision": precision}
    elif pspec is not None:
        pred = emulate_predictor(np.random.default_rng(seed + 2), fl, n_nodes, horizon, 1800.0,
                                 pspec["precision"], pspec["recall"], pspec["lead_s"])
    io = None
    if pfs_event or io_limit:
        events = []
        for ev in pfs_event:
            start, sep, dur = ev.partition(":")
            if not sep:
                raise ValueError(f"bad --pfs-event {ev!r}: use START:DURATION, e.g. 2h:3h")
            events.append((parse_duration_s(start), parse_duration_s(dur)))
        io = IoModel(io_limit=io_limit or float("inf"), pfs_events=tuple(events))
    if failures.lower().startswith("weibull:"):
        shape = [kv.split("=")[1] for kv in failures.split(":", 1)[1].split(",") if kv.strip().startswith("shape=")]
        wl.meta["weibull_shape"] = float(shape[0]) if shape else None
    # the policies' node MTBF: what the failure source produces over the simulated horizon
    wl.meta["node_mtbf_h"] = (horizon * n_nodes / len(fl) / 3600.0) if len(fl) else float("inf")
    return wl, n_nodes, fl, pred, (pspec or {}).get("precision", 0.7), io


_COST_KEYS = {"ckpt": "ckpt_s", "restart": "restart_s", "fars_overhead": "fars_overhead_s",
              "fars_interval": "fars_interval_s", "bb_ckpt": "bb_ckpt_s", "bb_restart": "bb_restart_s",
              "requeue": "requeue_s"}


def _costs(spec: Optional[str], config: Optional[str] = None):
    """``ckpt=3m,restart=3m,bb_ckpt=30s,...`` → :class:`Costs` (defaults: FARS Tab. 3).

    The migrate/safeguard decisions use the site's cost model from the settings' ``[policy]``
    section (``--config``), the same one the streaming decision agent uses.
    """
    from dataclasses import replace

    from hpcguard.settings import Settings
    from hpcguard.simulators.cluster import Costs
    from hpcguard.simulators.failures import parse_duration_s
    from hpcguard.streams.decisions import site_costs

    costs = Costs(site=site_costs(Settings.load(config)))
    if not spec:
        return costs
    changes = {}
    for item in filter(None, spec.split(",")):
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq or key not in _COST_KEYS:
            raise ValueError(f"bad --costs item {item!r}; keys: {', '.join(_COST_KEYS)}")
        changes[_COST_KEYS[key]] = parse_duration_s(value)
    return replace(costs, **changes)


def _progress_runner(enabled: bool, label: str):
    """A context manager yielding a ``progress(fraction)`` callback (rich bar on stderr) or None."""
    import contextlib

    if not enabled:
        return contextlib.nullcontext(None)

    @contextlib.contextmanager
    def bar():
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn(label), BarColumn(), TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True) as prog:
            task = prog.add_task(label, total=1.0)
            yield lambda f: prog.update(task, completed=f)

    return bar()


def _break_even(value: Optional[bool], config: Optional[str]) -> bool:
    """``--break-even/--no-break-even``, else the site settings' ``[policy] break_even`` (on)."""
    if value is not None:
        return bool(value)
    from hpcguard.settings import Settings

    return bool(Settings.load(config).policy.break_even)


def _run_one(name: str, wl, n_nodes, fl, pred, precision, io, seed, show_progress, costs=None,
             break_even: bool = True):
    from hpcguard.simulators.cluster import simulate
    from hpcguard.simulators.cluster_metrics import cluster_metrics

    with _progress_runner(show_progress, name) as cb:
        res = simulate(wl, n_nodes, fl, name, costs=costs or _costs(None), predictions=pred, precision=precision,
                       io=io, seed=seed, progress=cb, node_mtbf_h=wl.meta.get("node_mtbf_h"),
                       weibull_shape=wl.meta.get("weibull_shape"), break_even=break_even)
    return cluster_metrics(res), res


_COMMON = dict(
    workload=opt("synthetic", "--workload", metavar="SPEC", help=WORKLOAD_HELP),
    nodes=opt(None, "--nodes", metavar="N", show_default="MaxNodes or 512", help="Cluster size."),
    failures=opt("exponential:mtbf=14d", "--failures", metavar="SPEC", help=FAILURES_HELP),
    predictor=opt(None, "--predictor", metavar="SPEC", help=PREDICTOR_HELP),
    days=opt(None, "--days", metavar="D", help="Only jobs submitted in the first D days."),
    seed=opt(0, "--seed", metavar="N", help="Random seed."),
    jobs=opt(5000, "--jobs", panel=WORKLOAD, metavar="N", help="Synthetic: jobs."),
    utilization=opt(0.7, "--utilization", panel=WORKLOAD, metavar="U", help="Synthetic: offered load."),
    pfs_event=opt([], "--pfs-event", panel=WORKLOAD, metavar="START:DUR", help="PFS degradation, e.g. 2h:3h; repeat."),
    io_limit=opt(None, "--io-limit", panel=WORKLOAD, metavar="X", help="System IO limit."),
    io_sensitive=opt(0.0, "--io-sensitive", panel=WORKLOAD, metavar="F", help="Share of IO-sensitive jobs."),
    costs=opt(None, "--costs", metavar="SPEC", show_default="FARS Tab. 3", help="ckpt=3m,restart=3m,..."),
    config=opt(None, "--config", metavar="FILE", help="Site settings (policy section)."),
    break_even=flag(None, "--break-even/--no-break-even", panel="Decision policy", show_default="on",
                    help="Act only when it pays."),
)


@simulate_app.command("cluster")
def simulate_cluster(
    workload: str = _COMMON["workload"], nodes: Optional[int] = _COMMON["nodes"],
    failures: str = _COMMON["failures"],
    policy: str = opt("fcfs", "--policy", metavar="NAME", help="Policy to run."),
    predictor: Optional[str] = _COMMON["predictor"], days: Optional[float] = _COMMON["days"],
    seed: int = _COMMON["seed"], jobs: int = _COMMON["jobs"], utilization: float = _COMMON["utilization"],
    pfs_event: List[str] = _COMMON["pfs_event"], io_limit: Optional[float] = _COMMON["io_limit"],
    io_sensitive: float = _COMMON["io_sensitive"], costs: Optional[str] = _COMMON["costs"],
    config: Optional[str] = _COMMON["config"], break_even: Optional[bool] = _COMMON["break_even"],
    json_out: bool = flag(False, "--json", help="Print JSON (key 'metrics')."),
) -> None:
    """Simulate an FCFS + EASY cluster with failures under one policy.

    --policy: none, fcfs, young, daly, aware, sul-d, jfr-d, fsd-d, multilevel-bb,
    multilevel-safeguard, multilevel, io-aware. Specs: docs/site-guide.md.
    """
    from hpcguard.simulators.cluster import POLICIES

    if policy not in POLICIES:
        fail(f"unknown policy {policy!r}; choose from {', '.join(sorted(POLICIES))}")
    try:
        wl, n_nodes, fl, pred, precision, io = _scenario(workload, nodes, failures, predictor, days, seed, jobs,
                                                         utilization, pfs_event, io_limit, io_sensitive)
        metrics, res = _run_one(policy, wl, n_nodes, fl, pred, precision, io, seed, len(wl) > 20000,
                                _costs(costs, config), _break_even(break_even, config))
    except (ValueError, FileNotFoundError, OSError) as exc:
        fail(str(exc))
    out = {"policy": policy, "workload": workload, "nodes": n_nodes, "jobs": len(wl), "failures_source": fl.source,
           "predictor": predictor, "failure_probability": precision, "metrics": metrics,
           "counts": {k: v for k, v in res.totals.items() if isinstance(v, int)}}
    if json_out:
        emit_json(out)
        return
    typer.echo(f"policy {policy} · {len(wl)} jobs on {n_nodes} nodes · failures: {fl.source}")
    for k, v in metrics.items():
        typer.echo(f"  {k:34s} {v:.6g}" if isinstance(v, float) else f"  {k:34s} {v}")


@evaluate_app.command("policies")
def evaluate_policies(
    workload: str = _COMMON["workload"], nodes: Optional[int] = _COMMON["nodes"],
    failures: str = _COMMON["failures"],
    policies: str = opt(DEFAULT_POLICIES, "--policies", metavar="LIST", show_default="the nine above",
                        help="Comma-separated."),
    baseline: str = opt("fcfs", "--baseline", metavar="NAME", help="Gains are measured against it."),
    predictor: Optional[str] = opt("precision=0.7,recall=0.7,lead=5m", "--predictor", metavar="SPEC",
                                   show_default="0.7, 0.7, 5m", help="Or eval:EVAL.json."),
    days: Optional[float] = _COMMON["days"], seed: int = _COMMON["seed"], jobs: int = _COMMON["jobs"],
    utilization: float = _COMMON["utilization"], pfs_event: List[str] = _COMMON["pfs_event"],
    io_limit: Optional[float] = _COMMON["io_limit"], io_sensitive: float = _COMMON["io_sensitive"],
    costs: Optional[str] = _COMMON["costs"], config: Optional[str] = _COMMON["config"],
    break_even: Optional[bool] = _COMMON["break_even"],
    plot: Optional[str] = opt(None, "--plot", metavar="PNG", help="Bar charts of the metrics."),
    json_out: bool = flag(False, "--json", help="Print JSON."),
) -> None:
    """Run policies on one workload and failures; Kiviat gains.

    The FARS metrics per policy and its gain over --baseline. --policies: fcfs,
    sul-d, jfr-d, fsd-d, daly, aware, multilevel-bb, multilevel-safeguard,
    multilevel. Specs: docs/site-guide.md.
    """
    from hpcguard.simulators.cluster import POLICIES
    from hpcguard.simulators.cluster_metrics import relative_gains

    names = [p.strip() for p in policies.split(",") if p.strip()]
    if baseline not in names:
        names.insert(0, baseline)
    bad = [n for n in names if n not in POLICIES]
    if bad:
        fail(f"unknown policies {bad}; choose from {', '.join(sorted(POLICIES))}")
    try:
        wl, n_nodes, fl, pred, precision, io = _scenario(workload, nodes, failures, predictor, days, seed, jobs,
                                                         utilization, pfs_event, io_limit, io_sensitive)
        cost_model = _costs(costs, config)
        act_if_it_pays = _break_even(break_even, config)
        results = {}
        for name in names:
            results[name], _ = _run_one(name, wl, n_nodes, fl, pred, precision, io, seed, len(wl) > 20000,
                                        cost_model, act_if_it_pays)
    except (ValueError, FileNotFoundError, OSError) as exc:
        fail(str(exc))
    gains = relative_gains(results, baseline)
    if plot:
        _plot(results, gains, baseline, plot)
    if json_out:
        emit_json({"workload": workload, "nodes": n_nodes, "jobs": len(wl), "failures_source": fl.source,
                   "failures": len(fl), "predictor": predictor, "failure_probability": precision,
                   "break_even": act_if_it_pays, "baseline": baseline,
                   "results": {n: {"metrics": results[n], **gains[n]} for n in names}})
        return
    typer.echo(f"{len(wl)} jobs on {n_nodes} nodes · failures: {fl.source} ({len(fl)}) · predictor: {predictor}")
    typer.echo(format_table(results, gains, baseline))


def format_table(results: dict, gains: dict, baseline: str) -> str:
    """Markdown table of the six FARS metrics, node-hours and Kiviat gain per policy."""
    cols = [("resp_s", "avg_response_time_s", "{:.0f}"), ("util", "utilization", "{:.3f}"),
            ("thru/h", "throughput_jobs_per_h", "{:.2f}"), ("SUL_nh", "service_unit_loss_node_h", "{:.1f}"),
            ("JFR", "job_failure_rate", "{:.4f}"), ("FSD", "failure_slowdown", "{:.4f}"),
            ("makespan_h", "makespan_h", "{:.1f}"), ("ckpt_nh", "checkpoint_node_h", "{:.1f}"),
            ("lost_nh", "lost_node_h", "{:.1f}"), ("FT_nh", "fault_tolerance_overhead_node_h", "{:.1f}")]
    head = ["policy"] + [c[0] for c in cols] + ["saved_nh", "K", f"gain_vs_{baseline}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, m in results.items():
        g = gains[name]
        row = [name] + [fmt.format(m[key]) for _, key, fmt in cols]
        row += [f"{g['node_hours_saved']:.1f}", f"{g['k_value']:.3f}", f"{100 * g[f'gain_vs_{baseline}']:.1f}%"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _plot(results: dict, gains: dict, baseline: str, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from hpcguard.simulators.cluster_metrics import KIVIAT_AXES, kiviat_axes

    names = list(results)
    labels = ["Resp (s)", "1 − Util", "MTBC (h)", "SUL (node-h)", "JFR", "FSD"]
    fig, axes = plt.subplots(2, 4, figsize=(16, 7))
    vals = [kiviat_axes(results[n]) for n in names]
    for i in range(len(KIVIAT_AXES)):
        ax = axes.flat[i]
        ax.bar(names, [v[i] for v in vals], color="tab:blue")
        ax.set_title(labels[i])
        ax.tick_params(axis="x", rotation=60, labelsize=7)
    ax = axes.flat[6]
    ax.bar(names, [results[n]["fault_tolerance_overhead_node_h"] for n in names], color="tab:orange")
    ax.set_title("fault-tolerance overhead (node-h)")
    ax.tick_params(axis="x", rotation=60, labelsize=7)
    ax = axes.flat[7]
    ax.bar(names, [100 * gains[n][f"gain_vs_{baseline}"] for n in names], color="tab:green")
    ax.set_title(f"Kiviat gain vs {baseline} (%)")
    ax.tick_params(axis="x", rotation=60, labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@trace_app.command("stats")
def trace_stats_cmd(
    file: str = typer.Argument(..., metavar="FILE", show_default=False, help="SWF trace (plain or .gz)."),
    nodes: Optional[int] = opt(None, "--nodes", metavar="N", show_default="MaxNodes", help="System size."),
    json_out: bool = flag(False, "--json", help="Print JSON ('note' says why a value is null)."),
) -> None:
    """Jobs, nodes, span and offered load of an SWF trace.

    Utilization and P(≥ 2 % of nodes idle) (FARS Tab. 2) only when the trace
    records a schedule that fits the machine; wait time -1 means unknown, not 0.
    """
    from hpcguard.connectors.swf import load_swf, trace_stats

    try:
        stats = trace_stats(load_swf(file), nodes)
    except (ValueError, FileNotFoundError, OSError) as exc:
        fail(str(exc))
    if json_out:
        emit_json(stats)
        return
    typer.echo(f"{'jobs':22s} {stats['jobs']} ({stats['simulated_jobs']} with runtime and size, "
               f"{stats['skipped']} skipped)")
    typer.echo(f"{'nodes':22s} {stats['nodes']}")
    typer.echo(f"{'span_days':22s} {stats['span_days']:.4g}")
    typer.echo(f"{'offered load':22s} {stats['offered_load']:.4g} (demanded node-time / machine node-time; "
               "not a utilization)")
    typer.echo(f"{'mean_runtime_s':22s} {stats['mean_runtime_s']:.4g}")
    typer.echo(f"{'mean_size':22s} {stats['mean_size']:.4g}")
    if stats["schedule"] != "recorded":
        typer.echo(f"{'schedule':22s} {stats['schedule']}: {stats['note']}")
        return
    for key in ("utilization", "p_idle_2pct", "max_concurrent_busy"):
        typer.echo(f"{key:22s} {stats[key]:.4g}")
