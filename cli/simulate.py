"""CLI: hpcguard simulate telemetry."""
from __future__ import annotations

from typing import Optional

import typer

from hpcguard.cli.common import emit_json, fail, simulate_app
from hpcguard.simulators.profiles import PROFILES, describe_profiles, profile_overrides

_HELP = (
    "Write a cluster's telemetry (LDMS store_csv, FreeIPMI CSV or ipmitool sdr elist, sacct) with ground-truth "
    "failures.\n\n"
    "Files follow docs/formats.md: ldms/<schema>.csv, ipmi/<node>.csv (FreeIPMI) or ipmi/<node>.txt (ipmitool), "
    "slurm/sacct.txt, failures.csv (time,node,job_id,cause,family,onset_minutes,onset_time), anomalies.csv "
    "(start,end,node,kind,leads_to_failure,family) and meta.json (node -> hardware generation, racks, BMC "
    "outages).\n\n"
    "Profiles (--profile; --list-profiles --json prints their parameters):\n\n"
    + "\n\n".join(f"  {p.name}: {p.summary}" for p in PROFILES.values())
    + "\n\nThe precursor and anomaly options below override the profile's values when given.  "
    "Example: hpcguard simulate telemetry --nodes 64 --hours 48 --seed 1 --profile mixed --out /tmp/site"
)


def _given(**options) -> dict:
    """The options the user set (``None`` = keep the profile's value); tuples stay tuples."""
    return {k: (tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in options.items() if v is not None}


@simulate_app.command("telemetry", help=_HELP)
def telemetry(
    nodes: int = typer.Option(32, "--nodes", min=1, help="Number of nodes n001..nNNN."),
    hours: float = typer.Option(2.0, "--hours", help="Recorded duration in hours (rounded up to 15 s)."),
    seed: int = typer.Option(0, "--seed", help="Random seed; the same seed and profile write identical files."),
    out: Optional[str] = typer.Option(None, "--out", help="Output directory (created; existing files are "
                                      "overwritten). Required unless --list-profiles."),
    profile: str = typer.Option("classic", "--profile", help=f"Site profile: {', '.join(PROFILES)}."),
    list_profiles: bool = typer.Option(False, "--list-profiles", help="List the profiles and their parameters."),
    mtbf_hours: Optional[float] = typer.Option(None, "--mtbf-hours", help="Mean up-time between failures of one "
                                               "node (classic 10, site profiles 48)."),
    weibull_shape: Optional[float] = typer.Option(None, "--weibull-shape", help="Weibull shape of node up-times "
                                                  "(<1: decreasing hazard; default 0.7)."),
    start: float = typer.Option(1679682800.0, "--start", help="Epoch of the first sample (fixed default "
                                "for reproducible files)."),
    precursor_fraction: Optional[float] = typer.Option(None, "--precursor-fraction",
                                                       help="Fraction of failures preceded by a precursor (the "
                                                       "rest die suddenly; classic 0.85)."),
    precursor_lead: Optional[tuple[float, float]] = typer.Option(None, "--precursor-lead",
                                                                 help="LOW HIGH: minutes before the failure at "
                                                                 "which a precursor starts (classic 6 10, site "
                                                                 "profiles 3 20)."),
    precursor_strength: Optional[tuple[float, float]] = typer.Option(None, "--precursor-strength",
                                                                     help="LOW HIGH: full precursor strength (1 = "
                                                                     "fans -50 %, CPU +18 C, Vcore -10 %, PSU "
                                                                     "+14 C; a stall cuts cpu_user by 85 %)."),
    precursor_step: Optional[tuple[float, float]] = typer.Option(None, "--precursor-step",
                                                                 help="LOW HIGH: fraction of the full strength a "
                                                                 "precursor jumps to at onset (0 0 = gradual "
                                                                 "from zero)."),
    precursor_power: Optional[tuple[float, float]] = typer.Option(None, "--precursor-power",
                                                                  help="LOW HIGH: power p of the ramp after the "
                                                                  "step (<1 front-loaded, >1 late)."),
    anomaly_rate: Optional[float] = typer.Option(None, "--anomaly-rate",
                                                 help="Classic benign humps (no failure follows) per node-day "
                                                 "(classic only; site profiles place look-alikes instead)."),
    anomaly_strength: Optional[tuple[float, float]] = typer.Option(None, "--anomaly-strength",
                                                                   help="LOW HIGH: peak strength of a classic "
                                                                   "benign hump."),
    anomaly_minutes: Optional[tuple[float, float]] = typer.Option(None, "--anomaly-minutes",
                                                                  help="LOW HIGH: duration of a classic benign "
                                                                  "hump in minutes."),
    altheader: bool = typer.Option(False, "--altheader", help="Write LDMS headers to <schema>.HEADER files."),
    io: bool = typer.Option(True, "--io/--no-io", help="Write the 1 s lustre_client file (CanarIO reads it; the "
                            "failure model does not: --no-io saves ~75 % of the bytes and write time)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary (or the profile list) as JSON."),
) -> None:
    from hpcguard.simulators.telemetry import TelemetryParams, simulate_telemetry

    if list_profiles:  # what each profile changes, and every parameter it ends up with
        profiles = [{**p, "effective": TelemetryParams(**profile_overrides(p["name"])).as_dict()}
                    for p in describe_profiles()]
        if as_json:
            emit_json(profiles)
        else:
            for p in profiles:
                typer.echo(f"{p['name']:<13} {p['summary']}")
        return
    if out is None:
        fail("--out DIR is required (or --list-profiles)")
    if profile not in PROFILES:
        fail(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    overrides = _given(mtbf_hours=mtbf_hours, weibull_shape=weibull_shape, precursor_fraction=precursor_fraction,
                       anomaly_rate=anomaly_rate, precursor_lead_minutes=precursor_lead,
                       precursor_strength=precursor_strength, precursor_step=precursor_step,
                       precursor_power=precursor_power, anomaly_strength=anomaly_strength,
                       anomaly_minutes=anomaly_minutes)
    try:
        summary = simulate_telemetry(out, nodes=nodes, hours=hours, seed=seed, profile=profile, altheader=altheader,
                                     io=io, start=start, **overrides)
    except ValueError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write {out}: {exc}")
    if as_json:
        emit_json(summary)
        return
    c = summary["counts"]
    gens = ", ".join(f"{g} ({v['format']})" for g, v in summary["generations"].items())
    typer.echo(f"wrote {out} [{profile}]: {len(summary['nodes'])} nodes, {summary['end'] - summary['start']:.0f} s, "
               f"{c['failures']} failures ({c['precursors']} with precursors), {c['benign_anomalies']} benign "
               f"anomalies, {c['jobs']} jobs; hardware {gens}; {c['values']} values generated at "
               f"{summary['values_per_s'] / 1e6:.1f} M values/s, written in {summary['write_s']:.2f} s")
