"""``hpcguard evaluate savings``: node-hours saved vs spent on a recorded history
(:func:`hpcguard.simulators.savings_report.evaluate_savings`; this module parses and prints)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from hpcguard.cli.common import emit_json, evaluate_app, fail, flag, load_settings, opt

ACCOUNTING = "Accounting"


@evaluate_app.command("savings")
def evaluate_savings_cmd(
    data: Path = opt(..., "--data", metavar="DIR", help="History (slurm/, failures.csv)."),
    model: Path = opt(..., "--model", metavar="DIR", help="Model the worker would run."),
    config: Optional[str] = opt(None, "--config", metavar="FILE", help="Site settings (policy costs)."),
    horizon: float = opt(10.0, "--horizon-min", panel=ACCOUNTING, metavar="M", help="Minutes after a deadline."),
    checkpoint_every: Optional[float] = opt(None, "--checkpoint-every-h", panel=ACCOUNTING, metavar="H",
                                            help="Jobs' checkpoint interval."),
    report: Optional[Path] = opt(None, "--report", metavar="DIR", help="Write the JSON and a PNG plot here."),
    json_out: bool = flag(False, "--json", help="Print the accounting as JSON."),
) -> None:
    """Node-hours saved and spent on a history (docs/savings.md).

    Replays the history's decisions through the worker's decide path and counts,
    job by job, what each action saved and cost; --horizon-min: how long after an
    action's deadline a failure still counts.
    """
    from hpcguard.simulators.savings_report import evaluate_savings, savings_table, write_savings_plot

    if not data.is_dir():
        fail(f"not a recorded-data directory: {data}")
    if not model.is_dir():
        fail(f"model directory not found: {model}")
    if horizon < 0 or (checkpoint_every is not None and checkpoint_every <= 0):
        fail("--horizon-min must be >= 0 and --checkpoint-every-h > 0")
    settings = load_settings(config)
    try:
        result = evaluate_savings(data, str(model), settings, horizon_s=60.0 * horizon,
                                  checkpoint_every_h=checkpoint_every)
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
        raise
    if report is not None:
        import json

        report.mkdir(parents=True, exist_ok=True)
        (report / "savings.json").write_text(json.dumps(result, indent=1))
        result["plot"] = write_savings_plot(result, report / "savings.png")
    if json_out:
        emit_json(result)
        return
    from rich.console import Console
    from rich.table import Table

    ci = result["ci95"]["net"]
    table = Table(title=f"node-hours: net {result['net']:.2f} saved"
                        + (f" (95 % {ci[0]:.2f} … {ci[1]:.2f})" if ci else ""))
    for col in ("action", "count", "saved", "spent"):
        table.add_column(col, justify="left" if col == "action" else "right")
    for row in savings_table(result):
        table.add_row(*row)
    console = Console()
    console.print(table)
    per = result["net_per_1000_node_days"]
    console.print(f"{result['inputs']['failures']} failures · {len(result['protected'])} jobs protected · "
                  f"without hpcguard {result['without_node_hours_lost']:.2f} node-hours lost"
                  + (f" · net {per:.1f} per 1,000 node-days" if per is not None else ""))
    for p in result["protected"]:
        console.print(f"  job {p['job_id']} ({p['nodes']} nodes): {p['kind']} {p['action_id']} saved "
                      f"{p['node_hours_saved']:.2f} before {p['failure_node']} failed")
    if report is not None:
        console.print(f"report: {report / 'savings.json'} · plot: {result['plot']}")
