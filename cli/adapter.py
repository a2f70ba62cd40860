"""CLI commands: scheduler adapters: act (issue 8).

``hpcguard act`` applies one action through the safety governor and prints the ack::

    hpcguard act --adapter dry-run '{"action_id": "a1", "kind": "drain", "nodes": ["n1"]}'
    hpcguard act --adapter slurm --slurm-conf /etc/slurm/slurm.conf action.json --json
    echo '{...}' | hpcguard act --adapter command --command drain=/usr/local/sbin/site-drain -
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from hpcguard.cli import app, emit_json, fail
from hpcguard.cli.common import CONFIG, load_settings

EXIT_CODES = {"applied": 0, "skipped": 0, "duplicate": 0, "failed": 1, "refused": 3}


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
    ledger: Optional[str] = typer.Option(None, "--ledger", help="SQLite ledger for exactly-once "
                                         "(default: settings adapter.ledger)."),
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

    Exit status: 0 applied/skipped/duplicate, 1 failed, 3 refused, 2 usage error.
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
        elif kind == "command":
            opts = dict(commands={k: [v] for k, v in _pairs(command, "--command").items()})
        elif kind == "dry-run" and audit_log:
            opts = dict(audit_log=audit_log)
        elif kind == "simulator":
            opts = dict(total_nodes=total_nodes)
        governor = Governor.from_settings(settings, kind=kind, config=cfg, ledger_path=ledger, **opts)
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
