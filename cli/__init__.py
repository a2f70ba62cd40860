"""The ``hpcguard`` command line.

Command groups are defined here; each area registers its commands from its own
module (``cli/<area>.py``) so heavy imports (torch, faust) happen only when a command runs.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Optional

import typer

from hpcguard import __version__

app = typer.Typer(
    name="hpcguard",
    help="Online resilience service for HPC clusters: failure prediction, IO-degradation "
    "detection and scheduler actions over Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
simulate_app = typer.Typer(help="Generate synthetic telemetry or simulate a cluster.", no_args_is_help=True)
evaluate_app = typer.Typer(help="Evaluate predictors, detectors and policies.", no_args_is_help=True)
train_app = typer.Typer(help="Train models on recorded telemetry.", no_args_is_help=True)
checkpoint_app = typer.Typer(help="Checkpoint-interval mathematics (Young, Daly, aware, multilevel, Shiraz).",
                             no_args_is_help=True)
failures_app = typer.Typer(help="Failure records: fit distributions.", no_args_is_help=True)
fars_app = typer.Typer(help="FARS fault-aware rescheduling.", no_args_is_help=True)
trace_app = typer.Typer(help="Workload traces (SWF).", no_args_is_help=True)
config_app = typer.Typer(help="Configuration.", no_args_is_help=True)

for sub, name in ((simulate_app, "simulate"), (evaluate_app, "evaluate"), (train_app, "train"),
                  (checkpoint_app, "checkpoint"), (failures_app, "failures"), (fars_app, "fars"),
                  (trace_app, "trace"), (config_app, "config")):
    app.add_typer(sub, name=name)


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"hpcguard {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Optional[bool] = typer.Option(None, "--version", callback=version_callback, is_eager=True,
                                                 help="Print the version and exit.")) -> None:
    """hpcguard command line."""


def emit_json(obj: Any) -> None:
    """Print machine-readable output (NaN → null) on stdout."""
    typer.echo(json.dumps(_jsonable(obj), indent=2, sort_keys=False))


def _jsonable(obj: Any) -> Any:
    import math

    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "tolist"):
        return _jsonable(obj.tolist())
    if hasattr(obj, "item"):
        return _jsonable(obj.item())
    return obj


def fail(message: str, code: int = 2) -> "typer.Exit":
    """Print a clear error on stderr and exit with ``code``."""
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code)


# Areas register their commands on the groups above.
from hpcguard.cli import (  # noqa: E402,F401
    adapter,
    canario,
    cluster,
    failure,
    online,
    ops,
    pipeline,
    policies,
    replay,
    simulate,
)


def main() -> None:
    app()


if __name__ == "__main__":
    sys.exit(main())
