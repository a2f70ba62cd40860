"""``hpcguard label``: failure labels (``failures.csv``) from a site's sacct dump, its
``sacctmgr show event`` dump and its recorded telemetry
(:func:`hpcguard.connectors.failure_labels.label_to_csv`; this module parses and prints)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from hpcguard.cli.common import app, emit_json, fail, load_settings


@app.command("label")
def label_cmd(
    sacct: Path = typer.Option(..., "--sacct", help="sacct -P dump of the jobs."),
    events: Optional[Path] = typer.Option(None, "--events", help="sacctmgr -P show event dump."),
    data: Optional[Path] = typer.Option(None, "--data", help="Recorded telemetry: silent nodes."),
    out: Path = typer.Option(..., "--out", help="failures.csv to write."),
    window: float = typer.Option(300.0, "--window", help="Merge window, s."),
    min_confidence: float = typer.Option(0.5, "--min-confidence", help="Keep labels from."),
    silence_factor: float = typer.Option(4.0, "--silence-factor", help="Silent: gap > k × normal."),
    config: Optional[str] = typer.Option(None, "--config", help="Settings file (sacct time zone)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Label node failures from Slurm and silence: write failures.csv.

    From NODE_FAIL jobs, DOWN/FAIL/not-responding node events and nodes gone
    silent in the telemetry; the labels 'hpcguard train failure' reads.
    """
    from hpcguard.connectors.errors import ParseError
    from hpcguard.connectors.failure_labels import label_to_csv
    from hpcguard.models.labels import LabelParams

    for path, what in ((sacct, "--sacct"), (events, "--events")):
        if path is not None and not path.is_file():
            fail(f"{what}: no such file: {path}")
    if data is not None and not data.is_dir():
        fail(f"--data: not a recorded-data directory: {data}")
    settings = load_settings(config)
    try:
        params = LabelParams(window_s=window, min_confidence=min_confidence, silence_factor=silence_factor)
        summary = label_to_csv(out, sacct, events, data, params, settings)
    except (ParseError, ValueError, OSError) as exc:
        fail(str(exc))
        raise
    if json_out:
        emit_json(summary)
        return
    c = summary["counts"]
    typer.echo(f"{c['labels']} failures → {out} · with node_fail {c['with']['node_fail']}, "
               f"event {c['with']['event']}, silence {c['with']['silence']}")
    typer.echo(f"read {c['jobs']} jobs ({c['node_fail_jobs']} NODE_FAIL) · {c['events']} node events · "
               f"{c['nodes']} nodes of telemetry")
    if c.get("labels_without_telemetry"):
        typer.echo(f"left out {c['labels_without_telemetry']} labels on nodes without telemetry: "
                   f"{', '.join(c['nodes_without_telemetry'])}")
    if c["rejected"]:
        typer.echo("rejected lines: " + ", ".join(f"{k} {n}" for k, n in sorted(c["rejected"].items())))
        for r in summary["rejected"]:
            typer.echo(f"  {r['source']}:{r['line']}: {r['reason']}")
