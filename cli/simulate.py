"""CLI: hpcguard simulate telemetry."""
from __future__ import annotations

import typer

from hpcguard.cli import emit_json, fail, simulate_app


@simulate_app.command("telemetry")
def telemetry(
    nodes: int = typer.Option(32, "--nodes", min=1, help="Number of nodes n001..nNNN."),
    hours: float = typer.Option(2.0, "--hours", help="Recorded duration in hours (rounded up to 15 s)."),
    seed: int = typer.Option(0, "--seed", help="Random seed; the same seed writes identical files."),
    out: str = typer.Option(..., "--out", help="Output directory (created; existing files are overwritten)."),
    mtbf_hours: float = typer.Option(10.0, "--mtbf-hours", help="Mean up-time between failures of one node."),
    weibull_shape: float = typer.Option(0.7, "--weibull-shape", help="Weibull shape of node up-times (<1: "
                                        "decreasing hazard)."),
    start: float = typer.Option(1679682800.0, "--start", help="Epoch of the first sample (fixed default "
                                "for reproducible files)."),
    precursor_fraction: float = typer.Option(0.85, "--precursor-fraction",
                                             help="Fraction of failures preceded by a hardware precursor."),
    precursor_lead: tuple[float, float] = typer.Option((6.0, 10.0), "--precursor-lead",
                                                       help="LOW HIGH: minutes before the failure at which a "
                                                       "precursor starts (uniform; the issue's range is 2-10)."),
    precursor_strength: tuple[float, float] = typer.Option((0.9, 1.3), "--precursor-strength",
                                                           help="LOW HIGH: full precursor strength (1 = fans -55 %, "
                                                           "CPU +20 C, Vcore -0.14 V, PSU +14 C; a stall cuts "
                                                           "cpu_user by 85 % and adds two hung tasks per core)."),
    precursor_step: tuple[float, float] = typer.Option((0.6, 0.9), "--precursor-step",
                                                       help="LOW HIGH: fraction of the full strength a precursor "
                                                       "jumps to at onset (0 0 = pure ramp from zero)."),
    precursor_power: tuple[float, float] = typer.Option((0.5, 1.0), "--precursor-power",
                                                        help="LOW HIGH: power p of the ramp after the step (<1 "
                                                        "front-loaded, >1 late)."),
    anomaly_rate: float = typer.Option(0.5, "--anomaly-rate",
                                       help="Benign anomalies (no failure follows) per node-day."),
    anomaly_strength: tuple[float, float] = typer.Option((0.2, 0.7), "--anomaly-strength",
                                                         help="LOW HIGH: peak strength of a benign anomaly."),
    anomaly_minutes: tuple[float, float] = typer.Option((1.0, 6.0), "--anomaly-minutes",
                                                        help="LOW HIGH: duration of a benign anomaly in minutes."),
    altheader: bool = typer.Option(False, "--altheader", help="Write LDMS headers to <schema>.HEADER files."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Write a cluster's telemetry (LDMS store_csv, FreeIPMI, sacct) with ground-truth failures.

    Files follow docs/formats.md: ldms/<schema>.csv, ipmi/<node>.csv, slurm/sacct.txt, failures.csv, anomalies.csv and meta.json.  Example: hpcguard simulate telemetry --nodes 32 --hours 2 --seed 0 --out /tmp/sim
    """
    from hpcguard.simulators.telemetry import simulate_telemetry

    try:
        summary = simulate_telemetry(out, nodes=nodes, hours=hours, seed=seed, altheader=altheader,
                                     start=start, mtbf_hours=mtbf_hours,
                                     weibull_shape=weibull_shape, precursor_fraction=precursor_fraction,
                                     anomaly_rate=anomaly_rate, precursor_lead_minutes=tuple(precursor_lead),
                                     precursor_strength=tuple(precursor_strength),
                                     precursor_step=tuple(precursor_step), precursor_power=tuple(precursor_power),
                                     anomaly_strength=tuple(anomaly_strength),
                                     anomaly_minutes=tuple(anomaly_minutes))
    except ValueError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {out}: {exc}")
    if as_json:
        emit_json(summary)
        return
    c = summary["counts"]
    typer.echo(f"wrote {out}: {len(summary['nodes'])} nodes, {summary['end'] - summary['start']:.0f} s, "
               f"{c['failures']} failures ({c['precursors']} with precursors), {c['benign_anomalies']} benign "
               f"anomalies, {c['jobs']} jobs; {c['values']} values generated at "
               f"{summary['values_per_s'] / 1e6:.1f} M values/s, written in {summary['write_s']:.2f} s")
