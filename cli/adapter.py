"""CLI commands: scheduler adapters: act, and the site's action ledger.

``hpcguard act`` applies one action through the safety governor and prints the ack::

    hpcguard act --adapter dry-run '{"action_id": "a1", "kind": "drain", "nodes": ["n1"]}'
    hpcguard act --adapter slurm --slurm-conf /etc/slurm/slurm.conf action.json --json
    echo '{...}' | hpcguard act --adapter command --command drain=/usr/local/sbin/site-drain -

``hpcguard ledger list|resolve`` shows and settles the ledger's rows (settings ``adapter.ledger``)::

    hpcguard ledger list --status unknown
    hpcguard ledger resolve mig-7f3a --as failed --note "job was requeued by hand"
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from hpcguard.cli.common import CONFIG, app, emit_json, fail, load_settings

EXIT_CODES = {"applied": 0, "skipped": 0, "duplicate": 0, "failed": 1, "unknown": 1, "refused": 3}
ledger_app = typer.Typer(help="The site's action ledger (settings adapter.ledger): list outcomes, resolve "
                              "interrupted or failed actions.", no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")


def read_action(source: str) -> dict:
    """ACTION_JSON: '-' (stdin), a path to a JSON file, or an inline JSON object."""
    if source == "-":
        text = sys.stdin.read()
    elif source.lstrip().startswith("{"):
        text = source
    else:
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"action file not found (and not inline JSON): {source}")
        text = path.read_text(encoding="utf-8")
    try:
        action = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"action is not valid JSON: {err}") from None
    if not isinstance(action, dict):
        raise ValueError(f"action must be a JSON object, got {type(action).__name__}")
    return action


def _pairs(values: List[str], what: str) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ValueError(f"{what} expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


@app.command("act")
def act(
    action_json: str = typer.Argument(..., metavar="ACTION_JSON",
                                      help="The action: a JSON file, '-' for stdin, or an inline JSON object."),
    adapter: Optional[str] = typer.Option(None, "--adapter", "-a",
                                          help="slurm, dry-run, command or simulator (default: settings adapter.kind)."),
    config: Optional[str] = CONFIG,
    audit_log: Optional[str] = typer.Option(None, "--audit-log", help="JSONL audit log of the dry-run adapter."),
    governor_config: Optional[str] = typer.Option(None, "--governor-config",
                                                  help="TOML file with governor limits (keys of GovernorConfig, "
                                                       "top level or in a [governor] table)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check every governor limit but execute nothing."),
    total_nodes: Optional[int] = typer.Option(None, "--total-nodes", help="Cluster size for the drain ceiling "
                                              "(default: ask the scheduler)."),
    max_drained_fraction: Optional[float] = typer.Option(None, "--max-drained-fraction",
                                                         help="Most nodes hpcguard may hold drained, as a fraction."),
    job_cooldown_s: Optional[float] = typer.Option(None, "--job-cooldown-s", help="Cool-down per job (s)."),
    node_cooldown_s: Optional[float] = typer.Option(None, "--node-cooldown-s", help="Cool-down per node (s)."),
    rate_limit: List[str] = typer.Option([], "--rate-limit", help="KIND=COUNT/WINDOW_S, e.g. drain=5/3600 "
                                         "(repeatable)."),
    allow_partition: List[str] = typer.Option([], "--allow-partition", help="Only act on jobs in these partitions."),
    deny_partition: List[str] = typer.Option([], "--deny-partition", help="Never act on jobs in these partitions."),
    allow_user: List[str] = typer.Option([], "--allow-user", help="Only act on jobs of these users."),
    deny_user: List[str] = typer.Option([], "--deny-user", help="Never act on jobs of these users."),
    deny_job: List[str] = typer.Option([], "--deny-job", help="Never act on these job ids."),
    slurm_conf: Optional[str] = typer.Option(None, "--slurm-conf", help="slurm.conf for the Slurm commands "
                                             "(SLURM_CONF)."),
    checkpoint_signal: str = typer.Option("USR1", "--checkpoint-signal", help="Signal that asks a job to checkpoint."),
    signal_scope: str = typer.Option("batch", "--signal-scope", help="batch, full or steps (scancel --batch/--full)."),
    migrate_grace_s: float = typer.Option(30.0, "--migrate-grace-s", help="Wait between the checkpoint signal and "
                                          "the requeue of a migrated job."),
    migrate_hook: Optional[str] = typer.Option(None, "--migrate-hook", help="Executable for live migration "
                                               "(HOOK JOBID NODE...), instead of requeue."),
    command: List[str] = typer.Option([], "--command", help="KIND=/abs/path/executable for the command adapter "
                                      "(repeatable)."),
    json_out: bool = typer.Option(False, "--json", help="Print the ack as JSON."),
) -> None:
    """Apply ONE action through the safety governor and print the ack.

    The site's ledger (settings adapter.ledger) records it: an id seen before is answered from it (duplicate).

    Exit status: 0 applied/skipped/duplicate, 1 failed/unknown, 3 refused, 2 usage error.
    """
    from hpcguard.connectors.governor import Governor, GovernorConfig
    from hpcguard.connectors.validation import ValidationError

    settings = load_settings(config)
    kind = adapter or settings.adapter.kind
    try:
        action = read_action(action_json)
        base = GovernorConfig.load(governor_config) if governor_config else GovernorConfig()
        overrides: dict = {k: v for k, v in dict(total_nodes=total_nodes, max_drained_fraction=max_drained_fraction,
                                                 job_cooldown_s=job_cooldown_s,
                                                 node_cooldown_s=node_cooldown_s).items() if v is not None}
        if dry_run:
            overrides["dry_run"] = True
        if rate_limit:
            limits = dict(base.rate_limits)
            for k, v in _pairs(rate_limit, "--rate-limit").items():
                count, sep, window = v.partition("/")
                if not sep:
                    raise ValueError(f"--rate-limit expects KIND=COUNT/WINDOW_S, got {k}={v}")
                limits[k] = (int(count), float(window))
            overrides["rate_limits"] = limits
        for name, values in (("allow_partitions", allow_partition), ("deny_partitions", deny_partition),
                             ("allow_users", allow_user), ("deny_users", deny_user), ("deny_jobs", deny_job)):
            if values:
                overrides[name] = tuple(getattr(base, name)) + tuple(values)
        cfg = GovernorConfig.from_mapping({**{f: getattr(base, f) for f in base.__dataclass_fields__}, **overrides})
        opts: dict = {}
        if kind == "slurm":
            opts = dict(slurm_conf=slurm_conf, checkpoint_signal=checkpoint_signal, signal_scope=signal_scope,
                        migrate_grace_s=migrate_grace_s, migrate_hook=migrate_hook)
        elif kind == "command" and command:  # else: settings adapter.commands
            opts = dict(commands={k: [v] for k, v in _pairs(command, "--command").items()})
        elif kind == "dry-run" and audit_log:
            opts = dict(audit_log=audit_log)
        elif kind == "simulator":
            opts = dict(total_nodes=total_nodes)
        governor = Governor.from_settings(settings, kind=kind, config=cfg, **opts)
    except (ValueError, ValidationError, OSError) as err:
        fail(str(err))
        return
    try:
        ack = governor.apply(action)
    finally:
        governor.close()
    if json_out:
        emit_json(ack.as_dict())
    else:
        typer.echo(f"{ack.status}: {ack.kind} {ack.action_id} via {ack.adapter}: {ack.detail}")
        if ack.output:
            typer.echo(ack.output)
    raise typer.Exit(EXIT_CODES.get(ack.status, 1))


def _open_ledger(config: Optional[str]):
    from hpcguard.connectors.governor import Ledger

    path = load_settings(config).adapter.ledger
    if not os.path.isabs(path):
        fail(f"adapter.ledger must be an absolute path, got {path!r}")
    if not os.path.exists(path):
        fail(f"no ledger at {path} (settings adapter.ledger; set it with --config or HPCGUARD_ADAPTER__LEDGER)")
    return Ledger(path)


def _when(t: Optional[float]) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) if t else "-"


@ledger_app.command("list")
def ledger_list(
    status: Optional[str] = typer.Option(None, "--status", help="Only rows in this state: executing, applied, "
                                         "skipped, refused, failed, unknown or retry."),
    limit: int = typer.Option(200, "--limit", help="Most rows to show, newest claim first."),
    config: Optional[str] = CONFIG,
    json_out: bool = typer.Option(False, "--json", help="Print the rows (with the stored actions) as JSON."),
) -> None:
    """List the ledger's actions and their outcomes, newest first.

    'executing' rows are in flight or were interrupted (the worker reconciles them at start).

    'unknown' rows need an operator: check the scheduler, then 'hpcguard ledger resolve'.
    """
    from hpcguard.connectors.governor import LEDGER_STATES

    if status is not None and status not in LEDGER_STATES:
        fail(f"unknown status {status!r}; choose from {', '.join(LEDGER_STATES)}")
    ledger = _open_ledger(config)
    try:
        rows = ledger.rows(status, limit)
    finally:
        ledger.close()
    if json_out:
        emit_json({"ledger": ledger.path, "rows": rows})
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("action_id", "status", "kind", "job", "nodes", "attempts", "claimed (UTC)", "finished (UTC)",
                  "detail", title=f"{ledger.path}: {len(rows)} row(s)")
    for r in rows:
        table.add_row(r["action_id"], r["status"], r["kind"], r["job_id"] or "-", ",".join(r["nodes"]) or "-",
                      str(r["attempts"]), _when(r["claimed"]), _when(r["finished"]), r["detail"][:120])
    Console(width=200).print(table)


@ledger_app.command("resolve")
def ledger_resolve(
    action_id: str = typer.Argument(..., metavar="ACTION_ID", help="The action to settle."),
    as_: str = typer.Option(..., "--as", help="applied or failed (what the scheduler shows happened to an "
                            "executing/unknown action), or retry (run it again on its next delivery)."),
    note: str = typer.Option("", "--note", help="Why (kept in the row's detail)."),
    config: Optional[str] = CONFIG,
    json_out: bool = typer.Option(False, "--json", help="Print the updated row as JSON."),
) -> None:
    """Record an operator's finding for one action.

    executing/unknown → applied, failed or retry; failed/refused/skipped → retry.

    An applied action is final: a new decision needs a new action id.

    'retry' lets the next delivery of the same action id (a replay, or 'hpcguard act') run it again.
    """
    from hpcguard.connectors.governor import LedgerError

    if as_ not in ("applied", "failed", "retry"):
        fail(f"--as must be applied, failed or retry, got {as_!r}")
    ledger = _open_ledger(config)
    try:
        row = ledger.resolve(action_id, as_, time.time(), note=note[:200])
    except LedgerError as err:
        fail(str(err))
        return
    finally:
        ledger.close()
    if json_out:
        emit_json(row)
    else:
        typer.echo(f"{row['action_id']}: {row['status']} ({row['kind']}): {row['detail'][:200]}")
