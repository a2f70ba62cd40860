"""CLI: ``hpcguard replay`` — recorded telemetry files → Kafka raw topics (or a dry run)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from hpcguard.cli import common as o
from hpcguard.cli.common import app, emit_json, fail

IPMI = "IPMI input"


@app.command("replay")
def replay_command(
    paths: List[Path] = typer.Argument(..., metavar="PATH", show_default=False, help="Files or directories (walked)."),
    bootstrap: Optional[str] = o.opt(None, "--bootstrap", panel=o.KAFKA, metavar="HOST:PORT", help="Brokers."),
    fmt: Optional[str] = o.opt(None, "--format", metavar="NAME", show_default="detected",
                               help="Force one format."),
    speed: Optional[float] = o.opt(None, "--speed", metavar="X", help="X times real time by record time."),
    max_speed: bool = o.flag(False, "--max-speed", help="As fast as possible (the default)."),
    dry_run: bool = o.flag(False, "--dry-run", help="Parse and decode; publish nothing."),
    json_out: bool = o.flag(False, "--json", help="Print the report as JSON."),
    prefix: Optional[str] = o.PREFIX,
    config: Optional[Path] = o.opt(None, "--config", metavar="FILE", help="Settings (also HPCGUARD_CONFIG)."),
    sensor_map: Optional[Path] = o.opt(None, "--sensor-map", metavar="FILE", show_default="built-in",
                                       help="Mapping of --dry-run."),
    limit: Optional[int] = o.opt(None, "--limit", min=1, metavar="N", help="First N logs of an archive."),
    time_pattern: Optional[str] = o.opt(None, "--time-pattern", panel=IPMI, metavar="REGEX", show_default="FASRC",
                                        help="Line that starts a poll."),
    time_format: Optional[str] = o.opt(None, "--time-format", panel=IPMI, metavar="FMT",
                                       help="Its strptime format, or 'epoch'."),
    untimed: Optional[str] = o.opt(None, "--untimed", panel=IPMI, metavar="HOW", show_default="reject",
                                   help="reject, or mtime: one poll."),
    ipmi_host: Optional[str] = o.opt(None, "--ipmi-host", panel=IPMI, metavar="NODE",
                                     help="Node of host-less Telegraf lines."),
    security_protocol: Optional[str] = o.SECURITY_PROTOCOL,
    sasl_mechanism: Optional[str] = o.SASL_MECHANISM,
    sasl_username: Optional[str] = o.SASL_USERNAME,
    sasl_password: Optional[str] = o.SASL_PASSWORD,
    ssl_cafile: Optional[str] = o.SSL_CAFILE,
    ssl_certfile: Optional[str] = o.SSL_CERTFILE,
    ssl_keyfile: Optional[str] = o.SSL_KEYFILE,
) -> None:
    """Replay recorded LDMS, IPMI and sacct files into Kafka.

    All nodes' records go out in time order; --dry-run reports coverage instead.
    Options not given take the settings' values; at length: docs/operations.md.
    Example: hpcguard replay /data/recording --bootstrap 127.0.0.1:9092 --speed 60
    """
    from hpcguard.connectors.errors import ParseError
    from hpcguard.connectors.replay import FILE_FORMATS
    from hpcguard.settings import Settings

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        fail(f"no such file or directory: {', '.join(missing)}")
    if fmt is not None and fmt not in FILE_FORMATS:
        fail(f"unknown --format {fmt!r} (choose from {', '.join(FILE_FORMATS)})")
    if speed is not None and max_speed:
        fail("--speed and --max-speed exclude each other")
    if speed is not None and speed <= 0:
        fail("--speed must be positive")
    try:
        settings = Settings.load(config).with_overrides(
            kafka={"bootstrap": bootstrap, "security_protocol": security_protocol, "sasl_mechanism": sasl_mechanism,
                   "sasl_username": sasl_username, "sasl_password": sasl_password, "ssl_cafile": ssl_cafile,
                   "ssl_certfile": ssl_certfile, "ssl_keyfile": ssl_keyfile},
            topics={"prefix": prefix},
            ipmi={"time_pattern": time_pattern, "time_format": time_format, "untimed": untimed,
                  "default_host": ipmi_host})
        from hpcguard.connectors.ipmi import IpmiInput
        from hpcguard.connectors.sacct import SacctDialect

        ipmi = IpmiInput.from_settings(settings.ipmi)
        sacct = SacctDialect.from_settings(settings)  # [sacct] of --config: delimiter, time zone, columns
    except (ValueError, FileNotFoundError, ParseError) as exc:
        fail(str(exc))
    try:
        if dry_run:
            from hpcguard.connectors.ldms import LdmsColumns
            from hpcguard.connectors.mapping import SensorMapping
            from hpcguard.connectors.replay import dry_run as run_dry

            try:
                mapping = SensorMapping.load(sensor_map)
            except FileNotFoundError as exc:
                fail(str(exc))
            bar = None if json_out else _archive_progress()
            try:
                report = run_dry([str(p) for p in paths], fmt, mapping=mapping, limit=limit, ipmi=ipmi, sacct=sacct,
                                 progress=None if bar is None else bar[1],
                                 columns=LdmsColumns.from_settings(settings),  # [ldms] of --config
                                 grid_s=settings.worker.grid_s, poll_tolerance_s=settings.worker.poll_tolerance_s)
            finally:
                if bar is not None:
                    bar[0].stop()
        else:
            from kafka.errors import KafkaError

            from hpcguard.connectors.replay import replay

            try:
                report = replay([str(p) for p in paths], settings.kafka, settings.topics, speed=speed,
                                progress=not json_out, fmt=fmt, ipmi=ipmi, sacct=sacct, limit=limit)
            except (KafkaError, OSError) as exc:
                fail(f"cannot publish to Kafka at {settings.kafka.bootstrap}: {exc}")
    except ParseError as exc:
        fail(str(exc))
    if json_out:
        emit_json(report)
        _exit_if_undelivered(report)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="dry run" if dry_run else "replay")
    table.add_column("what")
    table.add_column("count", justify="right")
    for section in ("published", "records", "samples", "errors"):
        for name, n in sorted(report.get(section, {}).items()):
            table.add_row(f"{section}: {name}", f"{n:,}")
    if report.get("job_progress_markers"):
        table.add_row("of which job-progress markers", f"{report['job_progress_markers']:,}")
    table.add_row("files", str(report.get("files", 0)))
    for sensor, cov in report.get("coverage", {}).get("sensors", {}).items():
        table.add_row(f"coverage: {sensor}", f"{cov['share']:.1%}")
    Console().print(table)
    for line in report.get("coverage_warnings", []):
        typer.secho(f"warning: coverage {line}", err=True, fg=typer.colors.YELLOW)
    _exit_if_undelivered(report)


def _exit_if_undelivered(report: dict) -> None:
    """Records the broker never acknowledged are a failed replay, not a footnote: exit 1."""
    lost = sum(report.get("undelivered", {}).values())
    if lost:
        typer.secho(f"error: {lost:,} record(s) were not delivered ({report.get('last_delivery_error') or 'no reason'})"
                    "; the topics hold an incomplete replay", err=True, fg=typer.colors.RED)
        raise typer.Exit(1)


def _archive_progress():
    """A stderr progress line counting archive members (per-node logs) as the dry run reads them."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    prog = Progress(SpinnerColumn(), TextColumn("dry run: {task.completed:,} archive logs"), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=True)
    prog.start()
    task = prog.add_task("dry run", total=None)
    return prog, lambda n: prog.advance(task, n)
