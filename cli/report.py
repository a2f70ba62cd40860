"""``hpcguard report``: what a running worker published, scored for an operator.

``report shadow``: a shadow worker's (``hpcguard worker --shadow``) warnings and would-be actions
against the site's failure labels (:func:`hpcguard.simulators.shadow_report.shadow_report`; this
module parses and prints).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer

from hpcguard.cli import common as o
from hpcguard.cli.common import app, emit_json, fail

report_app = typer.Typer(help="Reports on what the workers published.", no_args_is_help=True)
app.add_typer(report_app, name="report")


def _ci(pair, fmt: str = "{:.2f}") -> str:
    lo, hi = pair
    return "n/a" if lo is None or math.isnan(lo) else f"{fmt.format(lo)}–{fmt.format(hi)}"


@report_app.command("shadow")
def shadow(
    failures: Optional[Path] = o.opt(None, "--failures", metavar="FILE", show_default="stream",
                                     help="hpcguard label CSV."),
    sacct: Optional[Path] = o.opt(None, "--sacct", metavar="FILE", help="sacct -P dump: node-hours."),
    data: Optional[Path] = o.opt(None, "--data", metavar="DIR", help="Recorded history: its jobs."),
    false_alarms: float = o.opt(2.0, "--false-alarms", metavar="N", help="Budget per 100 node-days."),
    plot: Optional[Path] = o.opt(None, "--plot", metavar="PNG", help="Running rate and thresholds, hourly."),
    json_out: bool = o.flag(False, "--json", help="Print JSON."),
    bootstrap: Optional[str] = o.BOOTSTRAP, config: Optional[str] = o.CONFIG, prefix: Optional[str] = o.PREFIX,
    security_protocol: Optional[str] = o.SECURITY_PROTOCOL, sasl_mechanism: Optional[str] = o.SASL_MECHANISM,
    sasl_username: Optional[str] = o.SASL_USERNAME, sasl_password: Optional[str] = o.SASL_PASSWORD,
    ssl_cafile: Optional[str] = o.SSL_CAFILE, ssl_certfile: Optional[str] = o.SSL_CERTFILE,
    ssl_keyfile: Optional[str] = o.SSL_KEYFILE,
) -> None:
    """A shadow worker's false-alarm rate, recall and would-be savings.

    Reads its predictions, actions and acks from the broker; scores them against
    the failure labels. At length: docs/site-guide.md (Shadow mode).
    """
    from hpcguard.simulators.shadow_report import shadow_report, write_shadow_plot

    if failures is not None and not failures.is_file():
        fail(f"--failures: no such file: {failures}")
    if sacct is not None and not sacct.is_file():
        fail(f"--sacct: no such file: {sacct}")
    if data is not None and not data.is_dir():
        fail(f"--data: not a recorded-data directory: {data}")
    settings = o.load_settings(config, bootstrap, prefix, security_protocol, sasl_mechanism, sasl_username,
                               sasl_password, ssl_cafile, ssl_certfile, ssl_keyfile)
    try:
        r = shadow_report(settings, failures, sacct=sacct, data=data, budget=false_alarms, hourly=plot is not None)
    except (FileNotFoundError, ValueError, ConnectionError) as exc:
        fail(str(exc))
        raise
    if plot is not None:
        try:
            r["plot"] = write_shadow_plot(r, plot)
        except OSError as exc:
            fail(f"--plot: cannot write {plot}: {exc}")
    if json_out:
        emit_json(r)
        return
    rate = r["false_alarms_per_100_node_days"]
    typer.echo(f"observed {r['node_days']:.2f} node-days on {r['nodes']} nodes · {r['warning_episodes']} warning "
               f"episodes · acks {r['acks'] or 'none'} · applied {r['applied']}")
    typer.echo(f"false alarms: {r['false_alarm_episodes']} episodes = "
               f"{'n/a' if math.isnan(rate) else f'{rate:.2f}'} per 100 node-days "
               f"(95 % {_ci(r['false_alarms_per_100_node_days_ci95'])}) · budget {r['budget']:g}: "
               f"{r['budget_verdict']}")
    recall = r["recall"]
    typer.echo(f"labels: {r['labels_source']}")
    typer.echo(f"recall: {r['warned_2min']} of {r['failures']} failures warned >= 2 min ahead"
               f" = {'n/a' if math.isnan(recall) else f'{recall:.0%}'} (95 % {_ci(r['recall_ci95'], '{:.0%}')})"
               + (f" · {r['failures_outside_run']} labels outside the run" if r["failures_outside_run"] else ""))
    if len(r["by_day"]) > 1:  # whether the promise held from the first day
        for d in r["by_day"]:
            thr = d["threshold"]
            typer.echo(f"  day {d['day'] + 1}: {d['node_days']:.1f} node-days · {d['false_alarm_episodes']} false "
                       f"alarms · running rate {d['cumulative_false_alarms_per_100_node_days']:.2f} "
                       f"(95 % {_ci(d['cumulative_ci95'])}) · {d['warned_2min']} of {d['failures']} failures warned"
                       + (f" · threshold {thr['median']:.4g}" if thr else ""))
    kinds = ", ".join(f"{k} {n}" for k, n in r["actions"]["by_kind"].items()) or "none"
    typer.echo(f"would-be actions: {r['actions']['total']} ({kinds})")
    s = r["savings"]
    if s is None:
        typer.echo("node-hours: give the jobs (--sacct or --data) to account them")
    else:
        typer.echo(f"node-hours would-have-saved {s['saved']:.2f}, spent {s['spent']:.2f}, net {s['net']:.2f} "
                   f"(95 % {_ci(s['ci95']['net']) if s['ci95']['net'] else 'n/a'}) over {s['jobs']} jobs")
    if plot is not None:
        typer.echo(f"plot: {r['plot']}")
