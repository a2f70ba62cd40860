"""``hpcguard demo``: embedded broker, simulated cluster, full pipeline, summary
(:func:`hpcguard.simulators.demo_run.run_demo` does the run; this module parses and prints)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from hpcguard.cli.common import app, emit_json, fail
from hpcguard.cli import common as o


@app.command()
def demo(
    nodes: int = typer.Option(32, help="Simulated compute nodes."),
    hours: float = typer.Option(2.0, help="Simulated hours of telemetry to replay."),
    seed: int = typer.Option(7, help="Random seed of the simulated cluster."),
    bootstrap: Optional[str] = typer.Option(None, "--bootstrap", "-b",
                                            help="Use this Kafka instead of the embedded broker."),
    model: Optional[str] = typer.Option(None, "--model", help="Use this model directory instead of training "
                                        "one on a separately seeded history."),
    detector: str = typer.Option("ensemble", "--detector", help="What to train when no --model is given: "
                                 "'ensemble' (seed 000's six lead-time networks + LSTM vote, trained on a separate "
                                 "64-node × 24 h history of the same simulator; cached) or 'baseline' (per-sensor "
                                 "thresholds)."),
    speed: Optional[float] = typer.Option(None, "--speed", help="Replay at this multiple of real time "
                                          "(default: as fast as possible). The summary does not depend on it."),
    workers: int = typer.Option(1, "--workers", min=1, help="Worker processes sharing the topics' partitions "
                                "(the topics get at least this many partitions)."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Where trained demo models are cached, "
                                             "keyed by their parameters and code (default: $HPCGUARD_CACHE_DIR or "
                                             "~/.cache/hpcguard)."),
    lateness: Optional[float] = o.LATENESS,
    idle: Optional[float] = o.IDLE,
    offline: bool = typer.Option(True, "--offline/--no-offline", help="Also compute the offline decisions on the "
                                 "same files and report the differences (summary key 'offline')."),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="Where to write data, model and logs "
                                           "(default: a new temporary directory)."),
    influx: Optional[str] = typer.Option(None, "--influx", help="InfluxDB URL for the sink (optional)."),
    influx_version: int = typer.Option(2, "--influx-version", help="1 (HTTP /write, database 'hpcguard') or 2 "
                                       "(org/bucket/token from HPCGUARD_INFLUX__*)."),
    metrics_port: Optional[int] = typer.Option(None, "--metrics-port", help="Serve the worker's /metrics."),
    timeout: float = typer.Option(600, help="Give up waiting for the pipeline to drain after this many s."),
    sensor_map: Optional[Path] = typer.Option(None, "--sensor-map", help="Site sensor mapping (TOML, sensors.toml "
                                              "format) used to train the model, by the workers and by the offline "
                                              "scan; default: worker.sensor_map, else the installed mapping."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Run the whole pipeline on a simulated cluster and print what it caught.

    Starts the embedded broker (unless --bootstrap), simulates the cluster, trains the
    failure ensemble on a separately seeded history (or takes it from the cache), starts
    the worker(s), replays, waits for the pipeline to drain, computes the offline
    decisions on the same files, shuts everything down and prints a summary. The same
    seed gives the same failures and action ids at any --speed and --workers.
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
    table = Table(title=f"hpcguard demo — {summary['nodes']} nodes × {summary['hours']} h, seed {summary['seed']}",
                  show_header=False)
    table.add_row("broker", summary["broker"])
    table.add_row("detector", summary["model"])
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
    table.add_row("acks", ", ".join(f"{k} {v}" for k, v in summary["acks"].items()) or "none")
    table.add_row("IO windows", f"{summary['io_windows']['total']} ({summary['io_windows']['degraded']} degraded)")
    table.add_row("throughput", f"{summary['throughput_msgs_per_s']} msgs/s")
    lat = summary["latency_ms"]
    table.add_row("latency sample→action", f"p50 {lat['p50']} ms, p99 {lat['p99']} ms (n {lat['n']}"
                  + (f"; {lat['untimed']} closed by idleness, untimed)" if lat.get("untimed") else ")"))
    console.print(table)

