"""CLI: ``hpcguard replay`` — recorded telemetry files → Kafka raw topics (or a dry run)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from hpcguard.cli.common import app, emit_json, fail


@app.command("replay")
def replay_command(
    paths: List[Path] = typer.Argument(..., help="Recorded files or directories (ldms/, ipmi/, slurm/ are walked "
                                       "recursively; failures.csv, anomalies.csv and meta.json are skipped)."),
    bootstrap: Optional[str] = typer.Option(None, "--bootstrap", help="Kafka bootstrap HOST:PORT[,HOST:PORT]."),
    fmt: Optional[str] = typer.Option(None, "--format", help="Force one input format for every file: store_csv, "
                                      "freeipmi, ipmitool, telegraf, sacct, probes or sdr-archive (default: detect "
                                      "per file)."),
    speed: Optional[float] = typer.Option(None, "--speed", help="Pace messages at X times real time by record time."),
    max_speed: bool = typer.Option(False, "--max-speed", help="Publish as fast as possible (the default)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Parse and decode everything, publish nothing; "
                                 "needs no broker."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON (no progress bar)."),
    prefix: Optional[str] = typer.Option(None, "--prefix", help="Topic prefix (default from settings: hpcguard)."),
    config: Optional[Path] = typer.Option(None, "--config", help="hpcguard TOML settings file."),
    sensor_map: Optional[Path] = typer.Option(None, "--sensor-map", help="Site sensor-mapping TOML for the "
                                              "--dry-run decoders (default: the packaged sensors.toml)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Read only the first N per-node logs of each "
                                        ".tar.xz archive (a prefix in archive order, whole day per node)."),
    time_pattern: Optional[str] = typer.Option(None, "--time-pattern", help="Regex of a line that starts an IPMI "
                                               "poll and holds its time in one group (default: FASRC's "
                                               "'Timestamp: YYYY-MM-DD HH:MM:SS UTC'; settings: ipmi.time_pattern)."),
    time_format: Optional[str] = typer.Option(None, "--time-format", help="strptime format of that time (UTC), "
                                              "or 'epoch'."),
    untimed: Optional[str] = typer.Option(None, "--untimed", help="IPMI rows before any poll/timestamp line: "
                                          "'reject' (dead letter, default) or 'mtime' (one poll at the file's "
                                          "modification time)."),
    ipmi_host: Optional[str] = typer.Option(None, "--ipmi-host", help="Node of Telegraf ipmi_sensor lines with "
                                            "neither server= nor host= (default: dead-letter them)."),
    security_protocol: Optional[str] = typer.Option(None, "--security-protocol",
                                                    help="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
    sasl_mechanism: Optional[str] = typer.Option(None, "--sasl-mechanism", help="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."),
    sasl_username: Optional[str] = typer.Option(None, "--sasl-username"),
    sasl_password: Optional[str] = typer.Option(None, "--sasl-password",
                                                help="Prefer HPCGUARD_KAFKA__SASL_PASSWORD in the environment."),
    ssl_cafile: Optional[str] = typer.Option(None, "--ssl-cafile", help="CA bundle to verify the brokers."),
    ssl_certfile: Optional[str] = typer.Option(None, "--ssl-certfile", help="Client certificate (mutual TLS)."),
    ssl_keyfile: Optional[str] = typer.Option(None, "--ssl-keyfile", help="Client key (mutual TLS)."),
) -> None:
    """Replay recorded telemetry (LDMS store_csv, FreeIPMI/ipmitool/Telegraf IPMI, sacct) into Kafka.

    A .tar.xz of per-node `ipmitool sdr` logs with `Timestamp: ... UTC` lines (the FASRC layout) is streamed, never extracted; --dry-run reports per-sensor IPMI coverage by BMC family and sensor lines/s. A replay buffers the archive's polls compactly (about 4.2 bytes per sensor line; 250 MiB for the 1,724-node FASRC day) and publishes all nodes' polls in time order, so --speed paces the whole cluster.

    --dry-run groups nodes by BMC family (sensors.toml [families] markers, in FreeIPMI or Telegraf spelling; else by their raw-name signature) and names the network interfaces that feed bytes_in/bytes_out, warning when one left out of [ldms] netdev_interfaces (of --config) is a node's busiest during jobs. Telegraf line-protocol files may hold many hosts and other measurements (passed over).

    sacct dumps are read with the sacct section of --config (delimiter, time zone, --noheader columns); LDMS files with as_is schema names (meminfo_8d2b8bd) go to their base schema's topic unless topics.ldms_schemas lists the digest name.

    LDMS rows go to ldms.<schema> as store_avro_kafka JSON rows, IPMI polls to <prefix>.raw.ipmi and Slurm job events to <prefix>.raw.slurm, merged in record-time order; unparsable records go to <prefix>.dlq. With sacct inputs, a job-progress marker goes to <prefix>.raw.slurm every 15 s of record time and at the end (every job event up to its time is out), so the workers' wait for the jobs at a sample's time ends as soon as they are known.

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
