"""CLI: hpcguard simulate telemetry."""
from __future__ import annotations

from typing import Optional

import typer

from hpcguard.cli.common import emit_json, fail, flag, opt, simulate_app
from hpcguard.simulators.profiles import PROFILES, describe_profiles, profile_overrides

OVERRIDES = "Profile overrides (default: the profile's)"
FILES = "Files"


def _given(**options) -> dict:
    """The options the user set (``None`` = keep the profile's value); tuples stay tuples."""
    return {k: (tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in options.items() if v is not None}


@simulate_app.command("telemetry")
def telemetry(
    nodes: int = opt(32, "--nodes", min=1, metavar="N", help="Nodes n001..nNNN."),
    hours: float = opt(2.0, "--hours", metavar="H", help="Recorded hours."),
    seed: int = opt(0, "--seed", metavar="N", help="Random seed."),
    out: Optional[str] = opt(None, "--out", metavar="DIR", help="Directory to write (overwrites)."),
    profile: str = opt("classic", "--profile", metavar="NAME", help="Site profile."),
    list_profiles: bool = flag(False, "--list-profiles", help="List the profiles and their parameters."),
    mtbf_hours: Optional[float] = opt(None, "--mtbf-hours", panel=OVERRIDES, metavar="H",
                                      help="A node's mean up-time."),
    weibull_shape: Optional[float] = opt(None, "--weibull-shape", panel=OVERRIDES, metavar="W",
                                         help="Weibull shape of node up-times."),
    start: float = opt(1679682800.0, "--start", panel=FILES, metavar="EPOCH", help="First sample."),
    precursor_fraction: Optional[float] = opt(None, "--precursor-fraction", panel=OVERRIDES, metavar="F",
                                              help="Failures with a precursor."),
    precursor_lead: Optional[tuple[float, float]] = opt(None, "--precursor-lead", panel=OVERRIDES,
                                                        metavar="LO HI", help="Its start, minutes before."),
    precursor_strength: Optional[tuple[float, float]] = opt(None, "--precursor-strength", panel=OVERRIDES,
                                                            metavar="LO HI", help="Its full strength."),
    precursor_step: Optional[tuple[float, float]] = opt(None, "--precursor-step", panel=OVERRIDES,
                                                        metavar="LO HI", help="Share of it reached at onset."),
    precursor_power: Optional[tuple[float, float]] = opt(None, "--precursor-power", panel=OVERRIDES,
                                                         metavar="LO HI", help="Power of its ramp."),
    anomaly_rate: Optional[float] = opt(None, "--anomaly-rate", panel=OVERRIDES, metavar="R",
                                        help="Benign humps per node-day (classic)."),
    anomaly_strength: Optional[tuple[float, float]] = opt(None, "--anomaly-strength", panel=OVERRIDES,
                                                          metavar="LO HI", help="A benign hump's peak strength."),
    anomaly_minutes: Optional[tuple[float, float]] = opt(None, "--anomaly-minutes", panel=OVERRIDES,
                                                         metavar="LO HI", help="A benign hump's minutes."),
    altheader: bool = flag(False, "--altheader", panel=FILES, help="LDMS headers in .HEADER files."),
    io: bool = flag(True, "--io/--no-io", panel=FILES, show_default="on", help="1 s lustre_client file."),
    slurm_events: bool = flag(False, "--slurm-events", panel=FILES,
                              help="slurm/events.txt too."),
    as_json: bool = flag(False, "--json", help="Print the summary (or the list) as JSON."),
) -> None:
    """Write simulated telemetry in the real formats, with ground truth.

    Files: docs/formats.md; profiles: --list-profiles; options: docs/site-guide.md
    hpcguard simulate telemetry --nodes 64 --hours 48 --profile mixed --out DIR
    """
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
                                     io=io, start=start, slurm_events=slurm_events, **overrides)
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
