"""Options shared by every command that talks to Kafka, and the cache directory of trained/simulated artefacts."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from hpcguard.settings import Settings

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
    from hpcguard.cli import fail

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


def cache_root(explicit: Optional[str] = None) -> Path:
    """``explicit`` (a ``--cache-dir``), else ``$HPCGUARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/hpcguard``
    (~/.cache/hpcguard): where the demo's models and the simulated prior histories are kept."""
    if explicit:
        return Path(explicit)
    if os.environ.get("HPCGUARD_CACHE_DIR"):
        return Path(os.environ["HPCGUARD_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hpcguard"
