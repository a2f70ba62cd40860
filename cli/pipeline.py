"""CLI commands of the streaming pipeline: broker, worker, train baseline."""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import List, Optional

import typer

from hpcguard.cli import common as o
from hpcguard.cli.common import app, emit_json, fail, train_app


@app.command()
def broker(port: int = typer.Option(9092, help="Port to listen on (loopback only); 0 = a free port."),
           host: str = typer.Option("127.0.0.1", help="Loopback address to bind.")) -> None:
    """Run an embedded Kafka-compatible broker (tansu, memory storage) in the foreground."""
    from hpcguard.connectors.broker import BrokerError, EmbeddedBroker

    if not host.startswith("127.") and host not in ("localhost", "::1"):
        fail("the embedded broker binds loopback only; run Apache Kafka for anything else (compose/)")
    try:
        b = EmbeddedBroker(port=port or None, host=host).start()
    except BrokerError as exc:
        fail(str(exc))
    typer.echo(f"tansu broker listening on {b.bootstrap} (memory storage); Ctrl-C stops it")
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        while not stop["now"] and b.process and b.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        b.stop()


@app.command()
def worker(
    bootstrap: Optional[str] = o.BOOTSTRAP, config: Optional[str] = o.CONFIG, prefix: Optional[str] = o.PREFIX,
    security_protocol: Optional[str] = o.SECURITY_PROTOCOL, sasl_mechanism: Optional[str] = o.SASL_MECHANISM,
    sasl_username: Optional[str] = o.SASL_USERNAME, sasl_password: Optional[str] = o.SASL_PASSWORD,
    ssl_cafile: Optional[str] = o.SSL_CAFILE, ssl_certfile: Optional[str] = o.SSL_CERTFILE,
    ssl_keyfile: Optional[str] = o.SSL_KEYFILE,
    model: Optional[str] = typer.Option(None, "--model", help="Model directory (failure ensemble or baseline)."),
    adapter: Optional[str] = typer.Option(None, "--adapter", help="dry-run (default), slurm, command."),
    audit_log: Optional[str] = typer.Option(None, "--audit-log", help="Dry-run audit log (JSONL)."),
    app_id: Optional[str] = typer.Option(None, "--app-id", help="Consumer group / Faust app id."),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", help="Worker state directory."),
    metrics_port: Optional[int] = typer.Option(None, "--metrics-port", help="Serve Prometheus /metrics here."),
    roles: List[str] = typer.Option([], "--role", help="Run only these agent roles (repeat): normalize, windows, "
                                    "io, jobs, decide, adapter, sink. Default: all."),
    lateness: Optional[float] = o.LATENESS,
    idle: Optional[float] = o.IDLE,
    job_wait: Optional[float] = typer.Option(None, "--job-wait", help="Longest wall wait of a decision for the "
                                             "job stream's watermark to pass its sample time (worker.job_wait_s)."),
    sensor_map: Optional[str] = typer.Option(None, "--sensor-map", help="Site sensor mapping (TOML, sensors.toml "
                                             "format; worker.sensor_map). Its digest is compared with the model's "
                                             "at start (log and /metrics)."),
    loglevel: str = typer.Option("warning", "--loglevel", help="debug, info, warning, error."),
) -> None:
    """Run the streaming worker: normalize → windows → predict → decide → adapter."""
    from hpcguard.streams.worker import ROLES, run_worker

    settings = o.load_settings(config, bootstrap, prefix, security_protocol, sasl_mechanism, sasl_username,
                               sasl_password, ssl_cafile, ssl_certfile, ssl_keyfile,
                               worker=dict(model_dir=model, app_id=app_id, data_dir=data_dir,
                                           metrics_port=metrics_port, lateness_s=lateness, idle_s=idle,
                                           job_wait_s=job_wait, sensor_map=sensor_map),
                               adapter=dict(kind=adapter, audit_log=audit_log))
    bad = [r for r in roles if r not in ROLES]
    if bad:
        fail(f"unknown role(s) {', '.join(bad)}; choose from {', '.join(ROLES)}")
    try:
        run_worker(settings, roles or ROLES, loglevel=loglevel)
    except (FileNotFoundError, ValueError, ConnectionError) as exc:
        fail(str(exc))


@train_app.command("baseline")
def train_baseline(
    data: List[Path] = typer.Option(..., "--data", help="Recorded-data directory (repeatable)."),
    out: Path = typer.Option(..., "--out", help="Model directory to write (baseline.json)."),
    persistence: int = typer.Option(2, help="Consecutive out-of-bound windows for a warning."),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Learn the baseline detector's per-sensor bounds from healthy windows."""
    from hpcguard.simulators.demo_run import train_baseline_model

    for d in data:
        if not d.is_dir():
            fail(f"not a recorded-data directory: {d}")
    summary = train_baseline_model([str(d) for d in data], str(out), persistence=persistence)
    if json_out:
        emit_json(summary)
    else:
        typer.echo(f"baseline learned on {summary['windows']} healthy windows → {out}/baseline.json")
