"""``hpcguard demo``: embedded broker, simulated cluster, full pipeline, summary
(:func:`hpcguard.simulators.demo_run.run_demo` does the run; this module parses and prints)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from hpcguard.cli.common import app, emit_json, fail
from hpcguard.cli import common as o

RUN, SERVICES = "Run", "Kafka and sinks"


@app.command()
def demo(
    nodes: int = o.opt(32, "--nodes", metavar="N", help="Simulated nodes."),
    hours: float = o.opt(2.0, "--hours", metavar="H", help="Simulated hours."),
    seed: int = o.opt(53, "--seed", metavar="N", help="Random seed."),
    bootstrap: Optional[str] = o.opt(None, "--bootstrap", "-b", panel=SERVICES, metavar="HOST:PORT",
                                     help="Kafka instead of the embedded one."),
    model: Optional[str] = o.opt(None, "--model", metavar="DIR", help="A model instead of training one."),
    detector: str = o.opt("ensemble", "--detector", metavar="NAME", help="ensemble or baseline."),
    speed: Optional[float] = o.opt(None, "--speed", panel=RUN, metavar="X", show_default="max",
                                   help="X times real time."),
    workers: int = o.opt(1, "--workers", panel=RUN, min=1, metavar="N", help="Worker processes."),
    cache_dir: Optional[Path] = o.opt(None, "--cache-dir", metavar="DIR", show_default="~/.cache/hpcguard",
                                      help="Model cache."),
    lateness: Optional[float] = o.LATENESS,
    idle: Optional[float] = o.IDLE,
    offline: bool = o.flag(True, "--offline/--no-offline", panel=RUN, show_default="on",
                           help="Compare with offline."),
    workdir: Optional[Path] = o.opt(None, "--workdir", metavar="DIR", show_default="temp dir",
                                    help="Data, model, logs."),
    influx: Optional[str] = o.opt(None, "--influx", panel=SERVICES, metavar="URL", help="InfluxDB sink."),
    influx_version: int = o.opt(2, "--influx-version", panel=SERVICES, metavar="N", help="InfluxDB 1 or 2."),
    metrics_port: Optional[int] = o.opt(None, "--metrics-port", panel=SERVICES, metavar="PORT",
                                        help="Serve the worker's /metrics."),
    timeout: float = o.opt(600, "--timeout", panel=RUN, metavar="S", help="Drain timeout."),
    sensor_map: Optional[Path] = o.opt(None, "--sensor-map", metavar="FILE", show_default="built-in",
                                       help="Site sensor mapping."),
    json_out: bool = o.flag(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Run the pipeline on a simulated cluster; print what it caught.

    Broker, simulated cluster, trained (or cached) model, workers, replay, offline
    check, summary. A seed gives the same failures and action ids at any --speed.
    """
    from hpcguard.simulators.demo_run import DemoConfig, run_demo

    if detector not in ("ensemble", "baseline"):
        fail(f"unknown detector {detector!r}: ensemble or baseline")
    if speed is not None and speed <= 0:
        fail("--speed must be positive")
    if sensor_map is not None:
        from hpcguard.connectors.mapping import SensorMapping

        try:
            SensorMapping.load(str(sensor_map))
        except (OSError, ValueError) as exc:
            fail(f"cannot load sensor map {sensor_map}: {exc}")
    worker_env = {f"HPCGUARD_WORKER__{key}": str(value) for key, value in (("LATENESS_S", lateness), ("IDLE_S", idle))
                  if value is not None}
    cfg = DemoConfig(nodes=nodes, hours=hours, seed=seed, bootstrap=bootstrap, model=model, detector=detector,
                     workdir=str(workdir) if workdir else None, influx=influx, influx_version=influx_version,
                     metrics_port=metrics_port, timeout_s=timeout, speed=speed, workers=workers,
                     cache_dir=str(cache_dir) if cache_dir else None, worker_env=worker_env, offline=offline,
                     quiet=json_out, sensor_map=str(sensor_map.resolve()) if sensor_map else None)
    try:
        summary = run_demo(cfg)
    except (RuntimeError, ConnectionError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    if json_out:
        emit_json(summary)
    else:
        print_summary(summary)
    sys.exit(0)


def print_summary(summary: dict[str, Any]) -> None:
    """The demo's summary as a table."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    f = summary["failures"]
    sv = summary.get("savings")
    if sv:  # the headline: what the run's actions saved and cost
        ci = sv["ci95_net"]
        console.print(f"[bold]node-hours saved {sv['saved_node_hours']:.2f} · spent {sv['spent_node_hours']:.2f} · "
                      f"net {sv['net_node_hours']:+.2f}[/]" + (f" (95 % {ci[0]:+.2f} … {ci[1]:+.2f})" if ci else ""))
        for p in sv["protected"]:
            console.print(f"  job {p['job_id']} ({p['nodes']} node{'s' if p['nodes'] != 1 else ''}): {p['kind']} saved "
                          f"{p['node_hours_saved']:.2f} "
                          f"node-hours before {p['failure_node']} failed")
    kinds = summary["actions"]
    console.print("[bold]actions[/] " + (", ".join(f"{k} ×{v}" for k, v in kinds.items()) or "none"))
    io = summary.get("io_actions") or []
    if io:  # CanarIO's: the jobs it held, let go and replaced while the file system was degraded
        by_kind: dict[str, list[str]] = {}
        for a in io:
            name = a["job_id"] + (f"→{a['replacement_job_id']}" if a.get("replacement_job_id") else "")
            if name not in by_kind.setdefault(a["kind"], []):
                by_kind[a["kind"]].append(name)
        console.print("  IO-aware (PFS degraded): " + "; ".join(f"{k} job {', '.join(v)}" for k, v in by_kind.items()))
    table = Table(title=f"hpcguard demo — {summary['nodes']} nodes × {summary['hours']} h, seed {summary['seed']}",
                  show_header=False)
    table.add_row("broker", summary["broker"])
    table.add_row("detector", summary["model"])
    fa = summary.get("false_alarm_budget", 0.0)
    table.add_row("false-alarm budget", f"{fa:g} per 100 node-days" if fa else
                  "off: the model's own threshold (a few node-days cannot measure a rate per 100 node-days)")
    table.add_row("published", ", ".join(f"{k} {v}" for k, v in summary["published"].items()))
    table.add_row("dead letters", str(summary["dead_letters"]["total"]))
    table.add_row("failures injected", str(f["injected"]))
    table.add_row("warned before failure", f"{f['warned']}  (lead minutes: {f['lead_minutes']})")
    table.add_row("missed", str(f["missed"]))
    table.add_row("false alarms", str(f["false_alarms"]))
    table.add_row("actions", ", ".join(f"{k} {v}" for k, v in summary["actions"].items()) or "none")
    jc = summary["actions_on_job_at_sample_time"]
    table.add_row("job at the warning's sample time", f"{jc['right_job']} of {jc['checked']} migrate/checkpoint")
    if "offline" in summary:
        off = summary["offline"]
        same = "identical" if off["differences"]["identical"] else f"differences: {off['differences']}"
        table.add_row("offline computation", f"warned {off['warned']}, {len(off['action_ids'])} actions — {same}")
        if "io_actions" in off:
            io_off = off["io_actions"]
            table.add_row("offline IO-aware actions", f"{io_off['offline']} — " + (
                "identical" if io_off["identical"] else
                f"{len(io_off['only_offline'])} only offline, {len(io_off['only_online'])} only streamed"))
    table.add_row("acks", ", ".join(f"{k} {v}" for k, v in summary["acks"].items()) or "none")
    if sv:
        table.add_row("node-hours by action", ", ".join(f"{k} +{v['saved']:.2f}/−{v['spent']:.2f}"
                                                        for k, v in sv["by_kind"].items()) or "none")
        table.add_row("savings report", f"{sv['report']} · plot {sv['plot']}")
    table.add_row("IO windows", f"{summary['io_windows']['total']} ({summary['io_windows']['degraded']} degraded)")
    table.add_row("throughput", f"{summary['throughput_msgs_per_s']} msgs/s")
    lat = summary["latency_ms"]
    table.add_row("latency sample→action", f"p50 {lat['p50']} ms, p99 {lat['p99']} ms (n {lat['n']}"
                  + (f"; {lat['untimed']} closed by idleness, untimed)" if lat.get("untimed") else ")"))
    console.print(table)

