"""CLI commands of the streaming pipeline: broker, worker, train baseline."""
from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import List, Optional

import typer

from hpcguard.cli import common as o
from hpcguard.cli.common import app, emit_json, fail, train_app

ADVANCED = "Advanced"


@app.command()
def broker(port: int = o.opt(9092, "--port", metavar="PORT", help="Loopback port; 0: any free one."),
           host: str = o.opt("127.0.0.1", "--host", metavar="ADDR", help="Loopback address.")) -> None:
    """Run an embedded Kafka-compatible broker (tansu).

    In the foreground, memory storage, loopback only; Ctrl-C stops it.
    For production: compose/.
    """
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
    model: Optional[str] = o.opt(None, "--model", metavar="DIR", help="Failure ensemble or baseline."),
    adapter: Optional[str] = o.opt(None, "--adapter", metavar="NAME", show_default=o._BUILT_IN.adapter.kind,
                                   help="dry-run, slurm, command."),
    shadow: bool = o.flag(False, "--shadow", help="Apply nothing: would-be actions only."),
    audit_log: Optional[str] = o.opt(None, "--audit-log", panel=ADVANCED, metavar="FILE",
                                     help="JSONL log of the dry-run adapter."),
    app_id: Optional[str] = o.opt(None, "--app-id", panel=ADVANCED, metavar="ID",
                                  show_default=o._BUILT_IN.worker.app_id, help="Consumer group, Faust app id."),
    data_dir: Optional[str] = o.opt(None, "--data-dir", panel=ADVANCED, metavar="DIR",
                                    show_default=o._BUILT_IN.worker.data_dir, help="Table state."),
    metrics_port: Optional[int] = o.opt(None, "--metrics-port", metavar="PORT", show_default="off",
                                        help="Serve Prometheus /metrics."),
    roles: List[str] = o.opt([], "--role", metavar="ROLE", show_default="all", help="Only this role; repeat."),
    lateness: Optional[float] = o.LATENESS,
    idle: Optional[float] = o.IDLE,
    job_wait: Optional[float] = o.opt(None, "--job-wait", panel=o.EVENT_TIME, metavar="S",
                                      show_default=f"{o._BUILT_IN.worker.job_wait_s:g}",
                                      help="Wall seconds a decision waits for jobs."),
    sensor_map: Optional[str] = o.opt(None, "--sensor-map", metavar="FILE", show_default="built-in",
                                      help="Site sensor mapping."),
    false_alarms: Optional[float] = o.opt(None, "--false-alarms", metavar="N",
                                          show_default=f"{o._BUILT_IN.worker.false_alarms:g}",
                                          help="False alarms per 100 node-days."),
    loglevel: str = o.opt("warning", "--loglevel", metavar="LEVEL", help="debug/info/warning/error."),
) -> None:
    """Run the streaming worker: normalize → predict → decide → act.

    Roles (--role): normalize, windows, io, jobs, decide, adapter, sink.
    Options not given take the settings' values; at length: docs/operations.md.
    """
    from hpcguard.streams.worker import ROLES, run_worker

    if shadow and adapter not in (None, "dry-run"):
        fail(f"--shadow applies nothing: it runs the dry-run adapter, not --adapter {adapter}")
    settings = o.load_settings(config, bootstrap, prefix, security_protocol, sasl_mechanism, sasl_username,
                               sasl_password, ssl_cafile, ssl_certfile, ssl_keyfile,
                               worker=dict(model_dir=model, app_id=app_id, data_dir=data_dir,
                                           metrics_port=metrics_port, lateness_s=lateness, idle_s=idle,
                                           job_wait_s=job_wait, sensor_map=sensor_map, false_alarms=false_alarms),
                               adapter=dict(kind="dry-run" if shadow else adapter, audit_log=audit_log))
    bad = [r for r in roles if r not in ROLES]
    if bad:
        fail(f"unknown role(s) {', '.join(bad)}; choose from {', '.join(ROLES)}")
    try:
        gov = None
        if shadow:  # the dry-run adapter, acking as the shadow (docs/site-guide.md, Shadow mode)
            from hpcguard.simulators.shadow_report import BANNER, shadow_governor

            typer.secho(BANNER, err=True, fg=typer.colors.YELLOW, bold=True)
            gov = shadow_governor(settings) if "adapter" in (roles or ROLES) else None
        run_worker(settings, roles or ROLES, loglevel=loglevel, adapter=gov)
    except (FileNotFoundError, ValueError, ConnectionError) as exc:
        fail(str(exc))


@train_app.command("baseline")
def train_baseline(
    data: List[Path] = o.opt(..., "--data", metavar="DIR", help="Recorded history; repeatable."),
    out: Path = o.opt(..., "--out", metavar="DIR", help="Model directory (baseline.json)."),
    persistence: int = o.opt(2, "--persistence", metavar="N", help="Out-of-bound windows in a row."),
    json_out: bool = o.flag(False, "--json", help="Print a JSON summary."),
) -> None:
    """Learn the baseline detector's per-sensor bounds.

    From the healthy windows of the histories; the worker warns when a sensor
    leaves its bounds for --persistence windows in a row.
    """
    from hpcguard.simulators.demo_run import train_baseline_model

    for d in data:
        if not d.is_dir():
            fail(f"not a recorded-data directory: {d}")
    summary = train_baseline_model([str(d) for d in data], str(out), persistence=persistence)
    if json_out:
        emit_json(summary)
    else:
        typer.echo(f"baseline learned on {summary['windows']} healthy windows → {out}/baseline.json")
