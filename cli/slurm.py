"""CLI: ``hpcguard poll-slurm`` — a live Slurm controller's jobs and node states → the ``jobs`` topic."""
from __future__ import annotations

import signal
import threading
from typing import Optional

import typer

from hpcguard.cli import common as o
from hpcguard.cli.common import app, emit_json, fail


@app.command("poll-slurm")
def poll_slurm(
    bootstrap: Optional[str] = o.BOOTSTRAP, config: Optional[str] = o.CONFIG, prefix: Optional[str] = o.PREFIX,
    security_protocol: Optional[str] = o.SECURITY_PROTOCOL, sasl_mechanism: Optional[str] = o.SASL_MECHANISM,
    sasl_username: Optional[str] = o.SASL_USERNAME, sasl_password: Optional[str] = o.SASL_PASSWORD,
    ssl_cafile: Optional[str] = o.SSL_CAFILE, ssl_certfile: Optional[str] = o.SSL_CERTFILE,
    ssl_keyfile: Optional[str] = o.SSL_KEYFILE,
    slurm_conf: Optional[str] = o.opt(None, "--slurm-conf", metavar="FILE", show_default="settings",
                                      help="slurm.conf to use."),
    interval: float = o.opt(10.0, "--interval", min=1.0, metavar="S", help="Seconds between polls."),
    polls: Optional[int] = o.opt(None, "--polls", min=1, metavar="N", show_default="no end",
                                 help="Stop after N polls."),
    json_out: bool = o.flag(False, "--json", help="Print the report as JSON at the end."),
) -> None:
    """Publish a live Slurm controller's jobs and node states to Kafka.

    Job events feed the decisions; a node down or not responding becomes a
    failure label (a drain is weak evidence, hpcguard's own none), as
    sacctmgr's events do in a replay. Stop: Ctrl-C or SIGTERM.
    Example: hpcguard poll-slurm --bootstrap kafka1:9092 --interval 10
    """
    from kafka.errors import KafkaError

    from hpcguard.connectors.slurm import SlurmRunner
    from hpcguard.connectors.slurm_poller import SlurmPoller, publish_polls

    settings = o.load_settings(config, bootstrap, prefix, security_protocol, sasl_mechanism, sasl_username,
                               sasl_password, ssl_cafile, ssl_certfile, ssl_keyfile)
    runner = SlurmRunner(slurm_conf=slurm_conf or settings.adapter.slurm_conf or None,
                         timeout_s=settings.adapter.timeout_s)
    try:
        for tool in ("squeue", "sinfo"):
            runner.resolve(tool)
    except FileNotFoundError as exc:
        fail(str(exc))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def on_error(message: str) -> None:
        typer.secho(f"poll failed (retried in {interval:g} s): {message}", err=True, fg=typer.colors.YELLOW)

    seen = {"polls": 0}

    def on_poll(counts: dict[str, int]) -> None:
        seen["polls"] += 1
        if not json_out:
            shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k != "progress") or "nothing yet"
            typer.echo(f"poll {seen['polls']}: published so far: {shown}", err=True)

    try:
        report = publish_polls(SlurmPoller(runner), settings.kafka, settings.topics, interval_s=interval,
                               polls=polls, stop=stop, on_error=on_error, on_poll=on_poll)
    except (KafkaError, ConnectionError, ValueError, OSError) as exc:
        fail(f"cannot publish to Kafka at {settings.kafka.bootstrap}: {exc}")
    if json_out:
        emit_json(report)
    else:
        typer.echo(f"{report['topic']}: " + ", ".join(f"{k} {v}" for k, v in sorted(report["published"].items()))
                   + f"; {report['failed_polls']} failed polls, {report['undelivered']} undelivered")
    if report["undelivered"]:
        raise typer.Exit(1)
