"""``hpcguard evaluate sites``: randomised sites nobody tuned on, trained and streamed one by one
(:func:`hpcguard.simulators.site_sweep.run_site_sweep` runs them; this module parses and prints)."""
from __future__ import annotations

from typing import Optional

import typer

from hpcguard.cli.common import emit_json, evaluate_app, fail, flag, opt

SITES, SCAN = "Sites", "Online scan"


@evaluate_app.command("sites")
def evaluate_sites(
    sites: int = opt(20, "--sites", panel=SITES, min=1, metavar="N", help="Randomised sites."),
    seed: int = opt(1, "--seed", panel=SITES, metavar="S", help="First site's seed (S..S+N-1)."),
    nodes: int = opt(64, "--nodes", panel=SITES, min=2, metavar="N", help="Nodes per site."),
    train_hours: float = opt(48.0, "--train-hours", panel=SITES, metavar="H", help="History trained on."),
    test_hours: float = opt(48.0, "--test-hours", panel=SITES, metavar="H", help="Next hours streamed."),
    false_alarms: float = opt(2.0, "--false-alarms", panel=SCAN, min=0, metavar="N",
                              help="Per 100 node-days; 0: off."),
    prime: bool = flag(False, "--prime", help="Prime the budget from training."),
    stride: int = opt(1, "--scan-stride", panel=SCAN, min=1, metavar="N", help="Scan every N-th step."),
    max_ok: int = opt(20000, "--max-ok", panel=SCAN, min=100, metavar="N", help="Ok events."),
    out: Optional[str] = opt(None, "--out", metavar="DIR", show_default="temp dir",
                             help="Report, site results."),
    cache_dir: Optional[str] = opt(None, "--cache-dir", metavar="DIR", show_default="~/.cache/hpcguard",
                                   help="Prior cache."),
    as_json: bool = flag(False, "--json", help="Print JSON."),
) -> None:
    """Train and stream randomised sites nobody tuned on.

    Each seed draws a site (vendors, failure physics, look-alikes, gaps), trains
    on its first hours with train failure's defaults and scores the next hours
    online. Reports the distribution over sites (docs/results.md, issue 56),
    and the budget controller beside the fixed and hindsight-best thresholds.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from hpcguard.models.failure.site_training import TrainingError
    from hpcguard.simulators.site_sweep import run_site_sweep, sweep_markdown

    def notify(kind: str, message: str) -> None:
        if kind != "note":   # notes stay in each site's row
            bar.console.print(f"[yellow]{kind}: {message}[/yellow]")

    bar = Progress(TextColumn("sites"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.description}"), console=Console(stderr=True), transient=True)
    task = bar.add_task("", total=sites)
    try:
        with bar:
            result = run_site_sweep(sites, seed, nodes=nodes, train_hours=train_hours, test_hours=test_hours,
                                    false_alarms=false_alarms, budget_controller=false_alarms > 0, prime=prime, out=out,
                                    stride=stride, max_ok=max_ok,
                                    cache_dir=cache_dir, notify=notify,
                                    progress=lambda done, total, m: bar.update(task, completed=done, description=m))
    except (TrainingError, ValueError, OSError) as exc:
        fail(str(exc))
    if as_json:
        emit_json(result)
    else:
        typer.echo(sweep_markdown(result))
