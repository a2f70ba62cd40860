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

from hpcguard.cli.common import _BUILT_IN, CONFIG, app, emit_json, fail, flag, load_settings, opt

GOVERNOR, ADAPTERS = "Governor", "Slurm and command adapters"

EXIT_CODES = {"applied": 0, "skipped": 0, "would_apply": 0, "duplicate": 0, "failed": 1, "unknown": 1, "refused": 3}
ledger_app = typer.Typer(help="The site's action ledger: list outcomes, settle actions.", no_args_is_help=True)
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
    action_json: str = typer.Argument(..., metavar="ACTION_JSON", show_default=False,
                                      help="A file, '-' (stdin) or inline JSON."),
    adapter: Optional[str] = opt(None, "--adapter", "-a", metavar="NAME", show_default=_BUILT_IN.adapter.kind,
                                 help="slurm, command, simulator."),
    config: Optional[str] = CONFIG,
    audit_log: Optional[str] = opt(None, "--audit-log", panel=ADAPTERS, metavar="FILE",
                                   help="Dry-run adapter's JSONL log."),
    governor_config: Optional[str] = opt(None, "--governor-config", panel=GOVERNOR, metavar="FILE",
                                         help="Limits TOML (GovernorConfig keys)."),
    dry_run: bool = flag(False, "--dry-run", help="Check every governor limit, execute nothing."),
    # the shown defaults are GovernorConfig's (connectors/governor.py, not imported here: it is slow)
    total_nodes: Optional[int] = opt(None, "--total-nodes", panel=GOVERNOR, metavar="N",
                                     show_default="scheduler's", help="Cluster size."),
    max_drained_fraction: Optional[float] = opt(None, "--max-drained-fraction", panel=GOVERNOR, metavar="F",
                                                show_default="0.1", help="Share drained at most."),
    job_cooldown_s: Optional[float] = opt(None, "--job-cooldown-s", panel=GOVERNOR, metavar="S",
                                          show_default="300", help="Cool-down per job."),
    node_cooldown_s: Optional[float] = opt(None, "--node-cooldown-s", panel=GOVERNOR, metavar="S",
                                           show_default="600", help="Cool-down per node."),
    rate_limit: List[str] = opt([], "--rate-limit", panel=GOVERNOR, metavar="SPEC",
                                help="KIND=COUNT/WINDOW_S; repeatable."),
    allow_partition: List[str] = opt([], "--allow-partition", panel=GOVERNOR, metavar="NAME",
                                     help="Only jobs of this partition; repeat."),
    deny_partition: List[str] = opt([], "--deny-partition", panel=GOVERNOR, metavar="NAME",
                                    help="Never jobs of this partition; repeat."),
    allow_user: List[str] = opt([], "--allow-user", panel=GOVERNOR, metavar="NAME",
                                help="Only jobs of this user; repeat."),
    deny_user: List[str] = opt([], "--deny-user", panel=GOVERNOR, metavar="NAME",
                               help="Never jobs of this user; repeat."),
    deny_job: List[str] = opt([], "--deny-job", panel=GOVERNOR, metavar="ID", help="Never this job id; repeat."),
    slurm_conf: Optional[str] = opt(None, "--slurm-conf", panel=ADAPTERS, metavar="FILE",
                                    help="slurm.conf (SLURM_CONF)."),
    checkpoint_signal: str = opt("USR1", "--checkpoint-signal", panel=ADAPTERS, metavar="SIG",
                                 help="Checkpoint signal."),
    signal_scope: str = opt("batch", "--signal-scope", panel=ADAPTERS, metavar="SCOPE", help="batch, full or steps."),
    migrate_grace_s: float = opt(30.0, "--migrate-grace-s", panel=ADAPTERS, metavar="S",
                                 help="Wait before requeue."),
    migrate_hook: Optional[str] = opt(None, "--migrate-hook", panel=ADAPTERS, metavar="EXE",
                                      help="Live migration: HOOK JOBID NODE..."),
    command: List[str] = opt([], "--command", panel=ADAPTERS, metavar="KIND=EXE",
                             help="Command adapter's executable; repeat."),
    json_out: bool = flag(False, "--json", help="Print the ack as JSON."),
) -> None:
    """Apply ONE action through the safety governor and print the ack.

    Exit 0 applied/would_apply/skipped/duplicate, 1 failed/unknown, 3 refused.
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
        elif kind == "dry-run":  # its plan names the Slurm commands these options would run
            opts = dict(audit_log=audit_log, checkpoint_signal=checkpoint_signal, signal_scope=signal_scope,
                        migrate_grace_s=migrate_grace_s, migrate_hook=migrate_hook)
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
    status: Optional[str] = opt(None, "--status", metavar="STATE", help="Only rows in this state."),
    limit: int = opt(200, "--limit", metavar="N", help="Most rows, newest claim first."),
    config: Optional[str] = CONFIG,
    json_out: bool = flag(False, "--json", help="Print the rows (and actions) as JSON."),
) -> None:
    """List the ledger's actions and their outcomes, newest first.

    'unknown' rows need an operator: check the scheduler, then 'ledger resolve'.
    States and transitions: docs/ledger.md.
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
    action_id: str = typer.Argument(..., metavar="ACTION_ID", show_default=False, help="The action to settle."),
    as_: str = opt(..., "--as", metavar="STATE", help="applied, failed or retry."),
    note: str = opt("", "--note", metavar="TEXT", help="Why (kept in the row's detail)."),
    config: Optional[str] = CONFIG,
    json_out: bool = flag(False, "--json", help="Print the updated row as JSON."),
) -> None:
    """Record an operator's finding for one action.

    executing/unknown → applied, failed or retry; failed, refused, skipped or
    would_apply → retry (its next delivery runs it again); applied is final.
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
