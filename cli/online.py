"""``hpcguard evaluate online``: the streaming pipeline against the offline computation on the
same recorded files (:func:`hpcguard.simulators.parity.evaluate_online_run` runs both and
compares; this module parses and prints)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hpcguard.cli.common import emit_json, evaluate_app, fail


@evaluate_app.command("online")
def evaluate_online(
    data: Path = typer.Option(..., "--data", help="Recorded-data directory (ldms/, ipmi/, slurm/ as written by "
                              "'hpcguard simulate telemetry' or a site's own dumps)."),
    model: Path = typer.Option(..., "--model", help="Model directory (failure ensemble or baseline)."),
    workers: int = typer.Option(1, "--workers", min=1, help="Worker processes sharing the topics' partitions."),
    speed: Optional[float] = typer.Option(None, "--speed", help="Replay at this multiple of real time."),
    max_speed: bool = typer.Option(False, "--max-speed", help="Replay as fast as possible (the default)."),
    bootstrap: Optional[str] = typer.Option(None, "--bootstrap", "-b", help="Kafka to use instead of the "
                                            "embedded broker (a fresh topic prefix is used per run)."),
    config: Optional[str] = typer.Option(None, "--config", help="Settings file (worker, policy sections)."),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="Logs and worker state (default: a temp dir)."),
    timeout: float = typer.Option(600, "--timeout", help="Give up waiting for the pipeline after this many s."),
    strict: bool = typer.Option(False, "--strict", help="Exit with status 1 when the two sides differ."),
    json_out: bool = typer.Option(False, "--json", help="Print the parity report as JSON."),
) -> None:
    """Replay a recorded directory through the streaming worker(s) and compare, per node and
    step, its predictions and actions with the offline computation on the same files."""
    from hpcguard.simulators.parity import evaluate_online_run

    if speed is not None and max_speed:
        fail("give --speed or --max-speed, not both")
    if speed is not None and speed <= 0:
        fail("--speed must be positive")
    if not data.is_dir():
        fail(f"not a recorded-data directory: {data}")
    if not model.is_dir():
        fail(f"model directory not found: {model}")
    try:
        report = evaluate_online_run(str(data), str(model), workers, speed, bootstrap, config,
                                     str(workdir) if workdir else None, timeout, quiet=json_out)
    except (RuntimeError, ConnectionError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    if json_out:
        emit_json(report)
    else:
        c = report["counts"]
        typer.echo(f"predictions: offline {c['offline_predictions']} · online {c['online_predictions']} · "
                   f"only offline {c['predictions_only_offline']} · only online {c['predictions_only_online']} · "
                   f"warn differs {c['warn_differs']}")
        typer.echo(f"warnings: offline {c['offline_warnings']} · online {c['online_warnings']}")
        typer.echo(f"actions: offline {c['offline_actions']} · online {c['online_actions']} · "
                   f"only offline {c['actions_only_offline']} · only online {c['actions_only_online']}")
        for kind in ("warn_differs", "actions_only_offline", "actions_only_online"):
            for row in report[kind][:10]:
                typer.echo(f"  {kind}: {row}")
        typer.echo("identical" if c["identical"] else "DIFFERENT")
    if strict and not report["counts"]["identical"]:
        raise typer.Exit(1)
