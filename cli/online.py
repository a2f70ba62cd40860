"""``hpcguard evaluate online``: the streaming pipeline against the offline computation on the
same recorded files (:func:`hpcguard.simulators.parity.evaluate_online_run` runs both and
compares; this module parses and prints)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hpcguard.cli.common import emit_json, evaluate_app, fail, flag, opt

RUN = "Run"


@evaluate_app.command("online")
def evaluate_online(
    data: Path = opt(..., "--data", metavar="DIR", help="Recorded history."),
    model: Path = opt(..., "--model", metavar="DIR", help="Failure ensemble or baseline."),
    workers: int = opt(1, "--workers", panel=RUN, min=1, metavar="N", help="Worker processes."),
    speed: Optional[float] = opt(None, "--speed", panel=RUN, metavar="X", show_default="max",
                                 help="X times real time."),
    max_speed: bool = flag(False, "--max-speed", panel=RUN, help="As fast as possible (the default)."),
    bootstrap: Optional[str] = opt(None, "--bootstrap", "-b", panel=RUN, metavar="HOST:PORT",
                                   help="Kafka instead of the embedded one."),
    config: Optional[str] = opt(None, "--config", metavar="FILE", help="Settings (worker, policy sections)."),
    workdir: Optional[Path] = opt(None, "--workdir", metavar="DIR", show_default="temp dir",
                                  help="Logs, worker state."),
    timeout: float = opt(600, "--timeout", panel=RUN, metavar="S", help="Pipeline timeout."),
    strict: bool = flag(False, "--strict", help="Exit 1 when the two sides differ."),
    json_out: bool = flag(False, "--json", help="Print the parity report as JSON."),
) -> None:
    """Compare the streaming pipeline with the offline computation.

    Replays a recorded directory through broker and worker(s) and compares each
    node's predictions and actions, step by step, with the offline computation on
    the same files. With --bootstrap, each run uses a fresh topic prefix.
    """
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
