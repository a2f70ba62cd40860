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
    help="Online resilience service for HPC clusters: failure prediction, IO-degradation\n"
    "detection and scheduler actions over Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
simulate_app = typer.Typer(help="Generate synthetic telemetry or simulate a cluster.", no_args_is_help=True)
evaluate_app = typer.Typer(help="Evaluate predictors, detectors and policies.", no_args_is_help=True)
train_app = typer.Typer(help="Train models on recorded telemetry.", no_args_is_help=True)
checkpoint_app = typer.Typer(help="Checkpoint intervals: Young, Daly, aware, multilevel, Shiraz.",
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


_BUILT_IN = Settings()  # the built-in settings, whose values the help shows as defaults


def opt(default: Any, *names: str, panel: Optional[str] = None, **kw: Any) -> Any:
    """A typer option in help panel ``panel`` (None: "Options", beside --help).

    Its help is one line at 80 columns (tests/test_cli_help.py): a METAVAR, a short help and the
    default; what an option means at length lives in docs/.
    """
    return typer.Option(default, *names, rich_help_panel=panel, **kw)


def flag(default: Any, *names: str, panel: Optional[str] = None, **kw: Any) -> Any:
    """A boolean option as :func:`opt`, without the ``<bool>`` type column."""
    return typer.Option(default, *names, rich_help_panel=panel, metavar="", **kw)


# The options of every command that talks to Kafka; they override the settings' [kafka] and [topics].
KAFKA = "Kafka"
BOOTSTRAP = opt(None, "--bootstrap", "-b", panel=KAFKA, metavar="HOST:PORT", envvar="HPCGUARD_BOOTSTRAP",
                show_envvar=False, help="Brokers (also HPCGUARD_BOOTSTRAP).")
CONFIG = opt(None, "--config", metavar="FILE", help="Settings (also HPCGUARD_CONFIG).")
PREFIX = opt(None, "--prefix", panel=KAFKA, metavar="NAME", show_default=_BUILT_IN.topics.prefix,
             help="Topic prefix.")
SECURITY_PROTOCOL = opt(None, "--security-protocol", panel=KAFKA, metavar="PROTO",
                        help="PLAINTEXT, SSL, SASL_PLAINTEXT/_SSL.")
SASL_MECHANISM = opt(None, "--sasl-mechanism", panel=KAFKA, metavar="MECH",
                     help="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.")
SASL_USERNAME = opt(None, "--sasl-username", panel=KAFKA, metavar="NAME", help="SASL user name.")
SASL_PASSWORD = opt(None, "--sasl-password", panel=KAFKA, metavar="PASS",
                    help="Use HPCGUARD_KAFKA__SASL_PASSWORD.")
SSL_CAFILE = opt(None, "--ssl-cafile", panel=KAFKA, metavar="FILE", help="CA bundle for TLS.")
SSL_CERTFILE = opt(None, "--ssl-certfile", panel=KAFKA, metavar="FILE", help="Client certificate for TLS.")
SSL_KEYFILE = opt(None, "--ssl-keyfile", panel=KAFKA, metavar="FILE", help="Client key for TLS.")
# Event-time options of the worker (and of the demo's workers); docs/streaming.md says what they do.
EVENT_TIME = "Event time"
LATENESS = opt(None, "--lateness", panel=EVENT_TIME, metavar="S", show_default=f"{_BUILT_IN.worker.lateness_s:g}",
               help="Seconds a step waits for late data.")
IDLE = opt(None, "--idle", panel=EVENT_TIME, metavar="S", show_default=f"{_BUILT_IN.worker.idle_s:g}",
           help="Wall seconds of silence: source idle.")


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
