"""The ``hpcguard`` command line's groups, its output and error helpers, the options shared by
every command that talks to Kafka, and the cache directory of trained/simulated artefacts.

Each area registers its commands on these groups from its own module (``cli/<area>.py``,
imported by ``hpcguard.cli``), so heavy imports (torch, faust) happen only when a command runs.
"""
from __future__ import annotations

import json
from typing import Any, Optional

import typer

from hpcguard import __version__
from hpcguard.connectors.model_store import cache_root  # noqa: F401  (commands' --cache-dir)
from hpcguard.jsonable import jsonable
from hpcguard.settings import Settings

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
    typer.echo(json.dumps(jsonable(obj), indent=2, sort_keys=False))


def fail(message: str, code: int = 2) -> "typer.Exit":
    """Print a clear error on stderr and exit with ``code``."""
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code)


BOOTSTRAP = typer.Option(None, "--bootstrap", "-b", help="Kafka bootstrap HOST:PORT[,HOST:PORT] "
                         "(default: settings kafka.bootstrap).", envvar="HPCGUARD_BOOTSTRAP")
CONFIG = typer.Option(None, "--config", help="TOML configuration file (also HPCGUARD_CONFIG).")
PREFIX = typer.Option(None, "--prefix", help="Topic prefix (default 'hpcguard').")
SECURITY_PROTOCOL = typer.Option(None, "--security-protocol", help="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.")
SASL_MECHANISM = typer.Option(None, "--sasl-mechanism", help="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.")
SASL_USERNAME = typer.Option(None, "--sasl-username", help="SASL user name.")
SASL_PASSWORD = typer.Option(None, "--sasl-password", help="SASL password (prefer HPCGUARD_KAFKA__SASL_PASSWORD).")
SSL_CAFILE = typer.Option(None, "--ssl-cafile", help="CA bundle for TLS.")
SSL_CERTFILE = typer.Option(None, "--ssl-certfile", help="Client certificate for TLS.")
SSL_KEYFILE = typer.Option(None, "--ssl-keyfile", help="Client key for TLS.")
# Event-time options of the worker (and of the demo's workers).
LATENESS = typer.Option(None, "--lateness", help="Event-time seconds a node's grid step stays open for late samples "
                        "(worker.lateness_s); later ones are dead-lettered with reason 'late'.")
IDLE = typer.Option(None, "--idle", help="Wall seconds without a record after which a source stops holding its "
                    "node's watermark back (worker.idle_s); raise it on a loaded machine, where a lagging consumer "
                    "looks idle.")


def load_settings(config: Optional[str] = None, bootstrap: Optional[str] = None, prefix: Optional[str] = None,
                  security_protocol: Optional[str] = None, sasl_mechanism: Optional[str] = None,
                  sasl_username: Optional[str] = None, sasl_password: Optional[str] = None,
                  ssl_cafile: Optional[str] = None, ssl_certfile: Optional[str] = None,
                  ssl_keyfile: Optional[str] = None, **sections: dict) -> Settings:
    """Settings from file/env with the command line's Kafka options on top."""
    try:
        settings = Settings.load(config)
        return settings.with_overrides(
            kafka=dict(bootstrap=bootstrap, security_protocol=security_protocol, sasl_mechanism=sasl_mechanism,
                       sasl_username=sasl_username, sasl_password=sasl_password, ssl_cafile=ssl_cafile,
                       ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile),
            topics=dict(prefix=prefix), **sections)
    except (ValueError, FileNotFoundError) as exc:
        fail(str(exc))
        raise  # unreachable: fail exits
