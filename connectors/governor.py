"""Safety governor in front of every scheduler adapter, with a durable exactly-once ledger.

``Governor(adapter, config, ledger_path).apply(action) -> ActionAck`` runs, in order:

1. strict validation (``connectors.validation``): hostile values → ``refused``, nothing runs;
2. time sanity: a deadline more than ``stale_grace_s`` in the past → ``refused`` (``stale``);
   a deadline, ``time`` or ``trigger_time`` implausibly far ahead → ``refused``;
3. allow/deny lists of jobs, partitions and users (partition/user come from the adapter's
   ``job_info`` or the action's ``reason.partition``/``reason.user``; unknown with an allow
   list set → ``refused``);
4. in ONE SQLite ``BEGIN IMMEDIATE`` transaction on the site's ledger: the ledger lookup
   (an id seen before is answered from the ledger: ``duplicate``, with the earlier outcome
   in the detail, never re-run), the per-kind rate limits, the cool-downs per job and per
   node, the ceiling on nodes drained by hpcguard, and the claim (``executing``) — so limits
   hold across every process and host that shares the ledger file;
5. dry-run mode: everything above is checked, nothing is written or executed (``skipped``).

Ledger states (``LEDGER_STATES``)::

    (new) ──claim──> executing ──adapter──> applied | skipped | would_apply | refused | failed
      │                  └──reconcile──> applied | skipped | would_apply | failed | unknown
      └──check──> refused
    unknown ──operator──> applied | failed | retry
    failed | refused | skipped | would_apply ──operator──> retry ──next delivery──> executing | refused

``would_apply`` is the dry-run adapter's answer (what it would have run, nothing ran): final
like ``skipped``, never run again by itself, and it holds no effect, so it counts against
no limit.

A retry is always an explicit decision: a new action id, or ``hpcguard ledger resolve ID
--as retry``.  ``Governor.reconcile()`` finishes rows an interrupted worker left ``executing``.

Example
-------
>>> import tempfile, os
>>> from hpcguard.connectors.adapters import SimulatorAdapter
>>> gov = Governor(SimulatorAdapter(total_nodes=10), GovernorConfig(), os.path.join(tempfile.mkdtemp(), "l.sqlite"))
>>> gov.apply({"action_id": "a1", "kind": "drain", "nodes": ["n1"]}).status
'applied'
>>> ack = gov.apply({"action_id": "a1", "kind": "drain", "nodes": ["n1"]})
>>> ack.status, ack.detail[:15]
('duplicate', 'already applied')
>>> gov.apply({"action_id": "a2", "kind": "drain", "nodes": ["n1;touch pwned"]}).detail[:15]
'invalid action:'
>>> gov.apply({"action_id": "a3", "kind": "drain", "nodes": ["n2"], "deadline": 978307200}).detail
'refused by governor: stale: deadline 2001-01-01T00:00:00Z passed more than stale_grace_s (1800 s) ago'
"""
from __future__ import annotations

import json
import math
import os
import socket
import sqlite3
import threading
import time
import tomllib
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping

from hpcguard.connectors.adapters import ActionAck, SchedulerAdapter
from hpcguard.connectors.validation import (ACTION_KINDS, ValidatedAction, ValidationError, validate_action,
                                            validate_job_id, validate_partition, validate_user)

DISRUPTIVE = ("checkpoint", "migrate", "reschedule", "drain")
NODE_ACTIONS = ("drain", "migrate")  # kinds that change node state (node cool-down, drain ceiling)
LEDGER_STATES = ("executing", "applied", "skipped", "would_apply", "refused", "failed", "unknown", "retry")
# What an operator may record (``hpcguard ledger resolve``): from → allowed targets.
OPERATOR_TRANSITIONS = {"executing": ("applied", "failed", "retry"), "unknown": ("applied", "failed", "retry"),
                        "failed": ("retry",), "refused": ("retry",), "skipped": ("retry",),
                        "would_apply": ("retry",)}
# Rows that may hold an effect count against limits: applied, unknown (may have run), executing (in flight).
_ENDINGS = ("applied", "skipped", "would_apply", "refused", "failed", "unknown")  # how an executing row can end
_HOLDS = "(status IN ('applied', 'unknown') AND finished >= ? OR status = 'executing')"

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS actions (
        action_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        job_id TEXT,
        nodes TEXT NOT NULL,
        status TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '',
        adapter TEXT NOT NULL DEFAULT '',
        attempts INTEGER NOT NULL DEFAULT 1,
        claimed REAL NOT NULL,
        finished REAL,
        action TEXT NOT NULL DEFAULT '{}',
        owner TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL DEFAULT '',
        acked INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX IF NOT EXISTS actions_kind_time ON actions(kind, status, finished)",
    "CREATE TABLE IF NOT EXISTS drained (node TEXT PRIMARY KEY, action_id TEXT NOT NULL, time REAL NOT NULL)",
)
_COLUMNS = ("action_id", "kind", "job_id", "nodes", "status", "detail", "adapter", "attempts", "claimed", "finished",
            "action", "owner", "source", "acked")
# columns added after the first ledgers were written: name → SQL type and default
_ADDED = {"action": "TEXT NOT NULL DEFAULT '{}'", "owner": "TEXT NOT NULL DEFAULT ''",
          "source": "TEXT NOT NULL DEFAULT ''", "acked": "INTEGER NOT NULL DEFAULT 0"}
# what a verify step answers when the interrupted attempt had no effect: reconcile runs the action now
NOT_APPLIED = "not_applied"
DEFAULT_LEDGER = "/var/lib/hpcguard/ledger.sqlite"


class LedgerError(ValueError):
    """An impossible ledger transition or an unusable ledger path."""


def _iso(t: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t or 0))


_TOKENS: dict[int, str] = {}


def process_owner() -> str:
    """``host:pid:token`` of this process (the token tells a reused pid from the original process)."""
    pid = os.getpid()
    token = _TOKENS.setdefault(pid, uuid.uuid4().hex[:8])
    return f"{socket.gethostname()}:{pid}:{token}"


def owner_is_gone(owner: str) -> bool:
    """True when ``owner`` (``host:pid:token``) was a process on this host that no longer runs."""
    host, _, rest = owner.partition(":")
    pid_text, _, token = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another host (or no owner recorded): only the timeout can tell
    pid = int(pid_text)
    if pid == os.getpid():
        return token != _TOKENS.get(pid)  # our pid, an earlier process (containers reuse pids)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass
class GovernorConfig:
    """Safety limits.  ``rate_limits`` maps a kind to ``(max_count, window_s)``.

    ``stale_grace_s``: an action whose deadline passed longer ago is refused (``stale``).
    ``max_deadline_ahead_s``: a deadline further ahead is refused (no plausible prediction).
    ``clock_skew_s``: an action ``time``/``trigger_time`` further ahead of the clock is refused.
    ``executing_timeout_s``: ``reconcile`` takes over an ``executing`` row of a process it cannot
    see (another host) only when the claim is older than this.
    """

    dry_run: bool = False
    rate_limits: dict[str, tuple[int, float]] = field(default_factory=lambda: {
        "checkpoint": (60, 3600.0), "migrate": (10, 3600.0), "reschedule": (20, 3600.0),
        "drain": (10, 3600.0), "resume": (60, 3600.0), "delay": (120, 3600.0), "release": (120, 3600.0)})
    max_drained_fraction: float = 0.1
    total_nodes: int | None = None  # None → ask the adapter (node_count())
    job_cooldown_s: float = 300.0
    node_cooldown_s: float = 600.0
    cooldown_kinds: tuple[str, ...] = DISRUPTIVE
    allow_partitions: tuple[str, ...] = ()
    deny_partitions: tuple[str, ...] = ()
    allow_users: tuple[str, ...] = ()
    deny_users: tuple[str, ...] = ()
    allow_jobs: tuple[str, ...] = ()
    deny_jobs: tuple[str, ...] = ()
    stale_grace_s: float = 1800.0
    max_deadline_ahead_s: float = 86400.0
    clock_skew_s: float = 300.0
    executing_timeout_s: float = 900.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_drained_fraction <= 1.0:
            raise ValueError(f"max_drained_fraction must be within [0, 1], got {self.max_drained_fraction}")
        for kind, limit in self.rate_limits.items():
            if kind not in ACTION_KINDS:
                raise ValueError(f"rate_limits: unknown action kind {kind!r}")
            count, window = limit
            if int(count) < 0 or float(window) <= 0:
                raise ValueError(f"rate_limits[{kind}] must be (count >= 0, window_s > 0), got {limit!r}")
        for name in ("stale_grace_s", "max_deadline_ahead_s", "clock_skew_s", "executing_timeout_s"):
            if not float(getattr(self, name)) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        for name, check in (("partitions", validate_partition), ("users", validate_user), ("jobs", validate_job_id)):
            for value in (*getattr(self, f"allow_{name}"), *getattr(self, f"deny_{name}")):
                check(value)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], origin: str = "governor configuration") -> "GovernorConfig":
        """Build from a dict (e.g. a TOML table); list values become tuples, unknown keys are errors."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{origin}: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            if key == "rate_limits":
                value = {k: (int(v[0]), float(v[1])) for k, v in dict(value).items()}
            elif isinstance(value, list):
                value = tuple(str(v) for v in value)
            kwargs[key] = value
        return cls(**kwargs)

    @classmethod
    def load(cls, path: str | Path) -> "GovernorConfig":
        """Read a TOML file (top-level keys or a ``[governor]`` table)."""
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
        return cls.from_mapping(data.get("governor", data), origin=str(path))


def _row(values: tuple) -> dict[str, Any]:
    out = dict(zip(_COLUMNS, values))
    out["nodes"] = json.loads(out["nodes"])
    out["action"] = json.loads(out["action"] or "{}")
    return out


class Ledger:
    """The site's durable record of every action decision and outcome (SQLite, WAL mode).

    Every write is a ``BEGIN IMMEDIATE`` transaction with a busy timeout, so processes on one
    host (or hosts sharing the file on a local-locking file system) serialise on it; opening
    a fresh file concurrently retries while another process creates the schema.
    """

    def __init__(self, path: str | Path, timeout_s: float = 30.0):
        self.path = str(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
        self._lock = threading.RLock()
        self._db.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        deadline = time.monotonic() + timeout_s
        while True:  # journal-mode changes and schema creation can meet SQLITE_BUSY without the busy handler
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                with self.transaction():
                    for statement in _SCHEMA:
                        self._db.execute(statement)
                    present = {r[1] for r in self._db.execute("PRAGMA table_info(actions)")}
                    for column, sql in _ADDED.items():  # ledgers written before these columns existed
                        if column not in present:
                            self._db.execute(f"ALTER TABLE actions ADD COLUMN {column} {sql}")
                break
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) and "busy" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        self._db.close()

    def transaction(self) -> "_Transaction":
        """``with ledger.transaction():`` — one ``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back on error)."""
        return _Transaction(self)

    # -- reads
    def get(self, action_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM actions WHERE action_id = ?",
                                   (action_id,)).fetchone()
        return None if row is None else _row(row)

    def rows(self, status: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        """Rows, newest claim first, optionally only those in ``status``."""
        where, args = ("WHERE status = ?", (status,)) if status else ("", ())
        with self._lock:
            found = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM actions {where} ORDER BY claimed DESC "
                                     f"LIMIT ?", (*args, limit)).fetchall()
        return [_row(r) for r in found]

    def count_applied(self, kind: str, since: float) -> int:
        """Actions of ``kind`` applied (or unknown) since ``since``, plus those in flight."""
        with self._lock:
            return int(self._db.execute(f"SELECT COUNT(*) FROM actions WHERE kind=? AND {_HOLDS}",
                                        (kind, since)).fetchone()[0])

    def recent_applied(self, kinds: tuple[str, ...], since: float) -> list[dict[str, Any]]:
        marks = ",".join("?" * len(kinds))
        with self._lock:
            found = self._db.execute(f"SELECT action_id, kind, job_id, nodes, COALESCE(finished, claimed) FROM actions "
                                     f"WHERE {_HOLDS} AND kind IN ({marks})", (since, *kinds)).fetchall()
        return [{"action_id": r[0], "kind": r[1], "job_id": r[2], "nodes": json.loads(r[3]), "finished": r[4]}
                for r in found]

    def drained_nodes(self) -> set[str]:
        """Nodes hpcguard drained and has not resumed, plus those of drains in flight or of unknown outcome."""
        with self._lock:
            nodes = {r[0] for r in self._db.execute("SELECT node FROM drained").fetchall()}
            for (listed,) in self._db.execute("SELECT nodes FROM actions WHERE status IN ('executing', 'unknown') "
                                              "AND kind IN ('drain', 'migrate')").fetchall():
                nodes.update(json.loads(listed))
        return nodes

    # -- writes (call inside ``transaction()`` where several must be atomic)
    def claim(self, va: ValidatedAction, now: float, owner: str, check: Callable[[], str],
              record: bool = True, source: str = "") -> tuple[str, dict[str, Any] | str]:
        """Look up, check and claim ``va`` in one ``BEGIN IMMEDIATE`` transaction.

        Returns ``("duplicate", row)`` for an id already in the ledger (unless an operator
        marked it ``retry``), ``("refused", reason)`` when ``check()`` (run inside the
        transaction, so it sees every other process's claims) names one, else
        ``("claimed", "")`` with the row now ``executing``.  ``record=False`` (dry run)
        writes nothing.  ``source`` names the record the action came from (``topic:partition:offset``).
        """
        with self.transaction():
            row = self.get(va.action_id)
            if row is not None and row["status"] != "retry":
                return "duplicate", row
            reason = check()
            status = "refused" if reason else "executing"
            detail = f"refused by governor: {reason}" if reason else ""
            if record:
                payload = json.dumps(dict(va.raw), default=str)[:100_000]
                if row is None:
                    self._db.execute("INSERT INTO actions (action_id, kind, job_id, nodes, status, detail, claimed, "
                                     "finished, action, owner, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                     (va.action_id, va.kind, va.job_id, json.dumps(list(va.nodes)), status,
                                      detail[:2000], now, now if reason else None, payload, owner, source))
                else:
                    self._db.execute("UPDATE actions SET status=?, detail=?, attempts=attempts+1, claimed=?, "
                                     "finished=?, action=?, owner=?, source=?, acked=0 WHERE action_id=?",
                                     (status, detail[:2000], now, now if reason else None, payload, owner, source,
                                      va.action_id))
        return ("refused", reason) if reason else ("claimed", "")

    def finish(self, action_id: str, status: str, detail: str, adapter: str, now: float,
               drained_by_us: list[str] = (), resumed: list[str] = ()) -> bool:
        """``executing`` → ``status``; False when the row is not executing (someone else finished it)."""
        if status not in _ENDINGS:
            raise LedgerError(f"an executing action cannot end as {status!r}")
        with self.transaction():
            cur = self._db.execute("UPDATE actions SET status=?, detail=?, adapter=?, finished=? "
                                   "WHERE action_id=? AND status='executing'",
                                   (status, detail[:2000], adapter, now, action_id))
            if cur.rowcount != 1:
                return False
            self._mark_drained(action_id, drained_by_us, resumed, now)
        return True

    def take_over(self, action_id: str, owner: str, new_owner: str) -> bool:
        """Move an ``executing`` row from ``owner`` (gone) to ``new_owner``; False when another process was first."""
        with self.transaction():
            cur = self._db.execute("UPDATE actions SET owner=? WHERE action_id=? AND status='executing' AND owner=?",
                                   (new_owner, action_id, owner))
        return cur.rowcount == 1

    def mark_acked(self, action_ids: list[str]) -> None:
        """The acks of ``action_ids`` reached the ack topic: a redelivery of their records sends none again."""
        with self.transaction():
            self._db.executemany("UPDATE actions SET acked=1 WHERE action_id=?", [(a,) for a in action_ids])

    def resolve(self, action_id: str, to: str, now: float, note: str = "") -> dict[str, Any]:
        """An operator's finding: see ``OPERATOR_TRANSITIONS``; returns the updated row."""
        with self.transaction():
            row = self.get(action_id)
            if row is None:
                raise LedgerError(f"no action {action_id!r} in the ledger {self.path}")
            allowed = OPERATOR_TRANSITIONS.get(row["status"], ())
            if to not in allowed:
                raise LedgerError(f"action {action_id} is {row['status']}: it can be resolved as "
                                  f"{' or '.join(allowed) if allowed else 'nothing (final)'}, not {to!r}")
            detail = f"resolved by operator as {to} (was {row['status']}{': ' + note if note else ''}); {row['detail']}"
            self._db.execute("UPDATE actions SET status=?, detail=?, finished=? WHERE action_id=?",
                             (to, detail[:2000], now, action_id))
            if to == "applied" and row["kind"] in NODE_ACTIONS:
                self._mark_drained(action_id, row["nodes"], [], now)
            elif to == "applied" and row["kind"] == "resume":
                self._mark_drained(action_id, [], row["nodes"], now)
        return self.get(action_id) or {}

    def _mark_drained(self, action_id: str, drained: list[str], resumed: list[str], now: float) -> None:
        for node in drained:
            self._db.execute("INSERT OR REPLACE INTO drained (node, action_id, time) VALUES (?, ?, ?)",
                             (node, action_id, now))
        for node in resumed:
            self._db.execute("DELETE FROM drained WHERE node = ?", (node,))


class _Transaction:
    """Re-entrant ``BEGIN IMMEDIATE`` block on a ledger's connection (the outermost one commits)."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        self.outer = False

    def __enter__(self) -> None:
        self.ledger._lock.acquire()
        self.outer = not self.ledger._db.in_transaction
        if self.outer:
            self.ledger._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self.outer:
                self.ledger._db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.ledger._lock.release()


class Governor:
    """Applies actions through ``adapter`` only when every safety check passes.

    Parameters
    ----------
    adapter : SchedulerAdapter
        Any adapter (``make_adapter``).
    config : GovernorConfig
        The limits.
    ledger_path : str or Path
        The site's SQLite ledger, shared by restarts and by every worker of the site.
    clock : callable
        Epoch seconds (tests pass a fake clock).
    """

    def __init__(self, adapter: SchedulerAdapter, config: GovernorConfig | None = None,
                 ledger_path: str | Path = DEFAULT_LEDGER, clock: Callable[[], float] = time.time):
        self.adapter = adapter
        self.config = config or GovernorConfig()
        self.ledger = Ledger(ledger_path)
        self.clock = clock
        self.owner = process_owner()

    @classmethod
    def from_settings(cls, settings: Any, kind: str | None = None, config: GovernorConfig | None = None,
                      **adapter_opts: Any) -> "Governor":
        """``make_adapter`` + ``Governor`` from ``Settings`` (or its ``adapter`` section).

        ``kind`` defaults to ``settings.adapter.kind``; the ledger is ``settings.adapter.ledger``,
        which must be an absolute path (one ledger per site, whatever the working directory);
        without ``config``, a ``settings.adapter.governor_config`` TOML path is loaded, else the
        defaults; ``adapter_opts`` go to the adapter (e.g. ``slurm_conf=...``).
        """
        from hpcguard.connectors.adapters import make_adapter

        section = getattr(settings, "adapter", settings)
        ledger = str(section.ledger)
        if not os.path.isabs(ledger):
            raise LedgerError(f"adapter.ledger must be an absolute path (one ledger per site, shared by every worker), "
                              f"got {ledger!r}; e.g. {DEFAULT_LEDGER}")
        adapter = make_adapter(kind or section.kind, section, **adapter_opts)
        if config is None and getattr(section, "governor_config", ""):
            config = GovernorConfig.load(section.governor_config)
        return cls(adapter, config, ledger)

    @property
    def name(self) -> str:
        return f"governor+{self.adapter.name}"

    def close(self) -> None:
        self.ledger.close()

    def apply(self, action: Mapping[str, Any], source: str = "") -> ActionAck:
        """Check, claim, execute and record one action; the ack says what happened.

        ``source`` names the record the action came from (``topic:partition:offset``); the
        ledger keeps it so that :meth:`redelivery` can tell a consumer's redelivery of the
        same record from a new request with the same id.
        """
        try:
            va = validate_action(action)
        except ValidationError as err:
            action_id = str(action.get("action_id", ""))[:128] if isinstance(action, Mapping) else ""
            kind = str(action.get("kind", ""))[:32] if isinstance(action, Mapping) else ""
            return ActionAck(action_id=action_id, status="refused", adapter=self.adapter.name, kind=kind,
                             detail=f"invalid action: {err}; nothing was executed")
        now = self.clock()
        # Checks that ask the outside world (the scheduler) run before the transaction, to keep it short.
        early = self._check_times(va, now) or self._check_job(va)
        total = self._total_nodes() if va.kind in NODE_ACTIONS and self._ceiling_applies() else None
        outcome, info = self.ledger.claim(va, now, self.owner, lambda: early or self._check_ledger(va, now, total),
                                          record=not self.config.dry_run, source=source)
        if outcome == "duplicate":
            return self._duplicate(va, info)
        if outcome == "refused":
            return self._ack(va, "refused", f"refused by governor: {info}")  # as the ledger records it
        if self.config.dry_run:
            return self._ack(va, "skipped", "dry-run: all governor checks passed; not executed")
        try:
            ack = self.adapter.apply(dict(va.raw))
        except Exception as err:  # an adapter bug must not leave the id claimed forever without an ack
            ack = self._ack(va, "failed", f"adapter raised {type(err).__name__}: {err}")
        self._finish(va, ack)
        return ack

    def redelivery(self, action_id: str, source: str) -> tuple[ActionAck, bool] | None:
        """The answer to the action record at ``source`` arriving again (after a crash, offsets lag).

        ``None`` when the ledger holds no finished outcome claimed from that very record
        (apply it as usual: a new request with a known id is answered ``duplicate`` there);
        else the recorded outcome's ack — the one the first delivery sent or should have
        sent — and whether it reached the ack topic already (:meth:`acknowledged`), in which
        case nothing is sent again.

        >>> import tempfile, os
        >>> from hpcguard.connectors.adapters import SimulatorAdapter
        >>> gov = Governor(SimulatorAdapter(total_nodes=10), GovernorConfig(), os.path.join(tempfile.mkdtemp(), "l"))
        >>> gov.apply({"action_id": "a1", "kind": "drain", "nodes": ["n1"]}, source="actions:0:7").status
        'applied'
        >>> ack, sent = gov.redelivery("a1", "actions:0:7")
        >>> ack.status, sent, gov.redelivery("a1", "actions:0:9")
        ('applied', False, None)
        >>> gov.acknowledged(["a1"]); gov.redelivery("a1", "actions:0:7")[1]
        True
        """
        row = self.ledger.get(action_id) if source else None
        if row is None or row["source"] != source or row["status"] not in _ENDINGS:
            return None
        ack = ActionAck(action_id=row["action_id"], status=row["status"], adapter=row["adapter"] or self.adapter.name,
                        kind=row["kind"], job_id=row["job_id"], nodes=list(row["nodes"]), detail=row["detail"])
        ack.time = float(row["finished"] or row["claimed"])
        return ack, bool(row["acked"])

    def acknowledged(self, action_ids: list[str]) -> None:
        """The acks of ``action_ids`` were delivered: :meth:`redelivery` answers their records with nothing new."""
        if action_ids and not self.config.dry_run:
            self.ledger.mark_acked(action_ids)

    def reconcile(self) -> list[ActionAck]:
        """Finish the ledger rows an interrupted attempt left ``executing``; call at worker start.

        A row is taken over when its owner process is gone (same host, pid not running or
        reused) or, for a process this host cannot see, when its claim is older than
        ``config.executing_timeout_s``; rows in flight in this process are left to it.  The
        adapter's ``verify(action, claimed_at) -> ActionAck`` reads the scheduler (Slurm:
        ``scontrol`` state; dry-run: its audit log; command: the site's verify command) and says
        ``applied``/``skipped``/``would_apply``/``failed`` — for a Slurm ``migrate`` interrupted in
        its grace period it completes the requeue, or undoes hpcguard's own drain when the job cannot be
        requeued — ``not_applied`` (the attempt had no effect: the action runs now, unless its
        deadline went stale meanwhile) or ``unknown``, left for an operator
        (``hpcguard ledger resolve``).  Returns one ack per row finished (the
        interrupted attempt never sent one).
        """
        now = self.clock()
        acks = []
        for row in self.ledger.rows("executing", limit=100_000):
            if row["owner"] == self.owner:
                continue  # in flight in this process: its own thread finishes it
            if not (owner_is_gone(row["owner"]) or now - row["claimed"] > self.config.executing_timeout_s):
                continue
            if not self.ledger.take_over(row["action_id"], row["owner"], self.owner):
                continue  # another worker's reconcile took it first
            try:
                va = validate_action(row["action"])
            except ValidationError as err:
                ack = ActionAck(action_id=row["action_id"], status="unknown", adapter=self.adapter.name,
                                kind=row["kind"], job_id=row["job_id"], nodes=row["nodes"],
                                detail=f"the ledger holds no valid copy of the action ({err}): resolve it by hand")
                self.ledger.finish(row["action_id"], "unknown", ack.detail, ack.adapter, self.clock())
                acks.append(ack)
                continue
            verify = getattr(self.adapter, "verify", None)
            try:
                ack = verify(va.raw, row["claimed"]) if callable(verify) else self._ack(
                    va, "unknown", f"the {self.adapter.name} adapter cannot verify what an interrupted attempt did")
            except Exception as err:  # a scheduler we cannot read leaves the row for an operator
                ack = self._ack(va, "unknown", f"verify raised {type(err).__name__}: {err}")
            if ack.status == NOT_APPLIED:
                ack = self._run_again(va, ack.detail)
            ack.detail = f"reconciled after an interrupted attempt (claimed {_iso(row['claimed'])} by " \
                         f"{row['owner'] or '?'}): {ack.detail}"
            if ack.status == "unknown":
                ack.detail += "; resolve with: hpcguard ledger resolve ID --as applied|failed|retry"
            if self._finish(va, ack):
                acks.append(ack)
        return acks

    def _run_again(self, va: ValidatedAction, verified: str) -> ActionAck:
        """Run an action whose interrupted attempt verifiably had no effect (so this is its first execution)."""
        why = self._check_times(va, self.clock())
        if why:
            return self._ack(va, "failed", f"{verified}; not run now: {why}")
        try:
            ack = self.adapter.apply(dict(va.raw))
        except Exception as err:  # noqa: BLE001 — as in apply: the row must end
            ack = self._ack(va, "failed", f"adapter raised {type(err).__name__}: {err}")
        ack.detail = f"{verified}; ran it now: {ack.detail}"
        return ack

    def _finish(self, va: ValidatedAction, ack: ActionAck) -> bool:
        status = ack.status if ack.status in _ENDINGS else "failed"
        applied = ack.status == "applied"
        drained = list(va.nodes) if applied and va.kind in NODE_ACTIONS else []
        resumed = list(va.nodes) if applied and va.kind == "resume" else []
        return self.ledger.finish(va.action_id, status, ack.detail, ack.adapter, self.clock(), drained, resumed)

    # -- checks
    def _check_times(self, va: ValidatedAction, now: float) -> str:
        cfg = self.config
        for key in ("time", "trigger_time"):
            value = va.raw.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                return f"{key} must be epoch seconds, got {str(value)[:40]!r}"
            if value > now + cfg.clock_skew_s:
                return f"{key} {_iso(value)} lies more than clock_skew_s ({cfg.clock_skew_s:g} s) in the future"
        if va.deadline is None:
            return ""
        if va.deadline > now + cfg.max_deadline_ahead_s:
            return (f"deadline {_iso(va.deadline)} lies more than max_deadline_ahead_s "
                    f"({cfg.max_deadline_ahead_s:g} s) ahead: not a plausible prediction")
        # a scheduler must not act on an old decision; the dry-run adapter (replays of history) changes nothing
        if getattr(self.adapter, "changes_scheduler", True) and va.deadline < now - cfg.stale_grace_s:
            return f"stale: deadline {_iso(va.deadline)} passed more than stale_grace_s ({cfg.stale_grace_s:g} s) ago"
        return ""

    def _check_job(self, va: ValidatedAction) -> str:
        cfg = self.config
        if va.job_id is None:
            return ""
        if va.job_id in cfg.deny_jobs:
            return f"job {va.job_id} is on the deny list"
        if cfg.allow_jobs and va.job_id not in cfg.allow_jobs:
            return f"job {va.job_id} is not on the allow list"
        return self._check_job_owner(va)

    def _check_ledger(self, va: ValidatedAction, now: float, total: int | None) -> str:
        """Limits that read the ledger: run inside the claim's transaction."""
        cfg = self.config
        limit = cfg.rate_limits.get(va.kind)
        if limit is not None:
            count, window = limit
            used = self.ledger.count_applied(va.kind, now - window)
            if used >= count:
                return f"rate limit for {va.kind}: {used} applied in the last {window:g} s (max {count})"
        if va.kind in cfg.cooldown_kinds:
            why = self._check_cooldown(va, now)
            if why:
                return why
        if va.kind in NODE_ACTIONS and va.nodes and self._ceiling_applies():
            return self._check_drain_ceiling(va, total)
        return ""

    def _check_job_owner(self, va: ValidatedAction) -> str:
        cfg = self.config
        if not (cfg.allow_partitions or cfg.deny_partitions or cfg.allow_users or cfg.deny_users):
            return ""
        info = self._job_info(va)
        for key, allow, deny in (("partition", cfg.allow_partitions, cfg.deny_partitions),
                                 ("user", cfg.allow_users, cfg.deny_users)):
            if not (allow or deny):
                continue
            value = (info or {}).get(key) or ""
            if not value:
                return f"{key} of job {va.job_id} is unknown, so the {key} allow/deny lists cannot be checked"
            if value in deny:
                return f"{key} {value!r} of job {va.job_id} is on the deny list"
            if allow and value not in allow:
                return f"{key} {value!r} of job {va.job_id} is not on the allow list"
        return ""

    def _job_info(self, va: ValidatedAction) -> Mapping[str, Any] | None:
        lookup = getattr(self.adapter, "job_info", None)
        info = lookup(va.job_id) if callable(lookup) else None
        if info:
            return info
        reason = va.raw.get("reason") or {}
        out = {}
        for key, check in (("partition", validate_partition), ("user", validate_user)):
            if reason.get(key) is not None:
                try:
                    out[key] = check(reason[key])
                except ValidationError:
                    return None
        return out or None

    def _check_cooldown(self, va: ValidatedAction, now: float) -> str:
        cfg = self.config
        horizon = max(cfg.job_cooldown_s, cfg.node_cooldown_s)
        if horizon <= 0:
            return ""
        for row in self.ledger.recent_applied(tuple(cfg.cooldown_kinds), now - horizon):
            age = now - row["finished"]
            if va.job_id and row["job_id"] == va.job_id and age < cfg.job_cooldown_s:
                return (f"job {va.job_id} is cooling down: {row['kind']} {row['action_id']} applied {age:.0f} s ago "
                        f"(job cool-down {cfg.job_cooldown_s:g} s)")
            if va.kind not in NODE_ACTIONS or row["kind"] not in NODE_ACTIONS:
                continue  # a checkpoint's node list is informational: it does not touch the nodes
            shared = sorted(set(va.nodes) & set(row["nodes"]))
            if shared and age < cfg.node_cooldown_s:
                return (f"node {shared[0]} is cooling down: {row['kind']} {row['action_id']} applied {age:.0f} s ago "
                        f"(node cool-down {cfg.node_cooldown_s:g} s)")
        return ""

    def _ceiling_applies(self) -> bool:
        return getattr(self.adapter, "changes_scheduler", True)  # e.g. the dry-run adapter drains nothing

    def _total_nodes(self) -> int | None:
        if self.config.total_nodes is not None:
            return self.config.total_nodes
        counter = getattr(self.adapter, "node_count", None)
        return counter() if callable(counter) else None

    def _check_drain_ceiling(self, va: ValidatedAction, total: int | None) -> str:
        cfg = self.config
        if not total:
            return "the total node count is unknown (set total_nodes), so the drain ceiling cannot be checked"
        ours = self.ledger.drained_nodes()
        after = ours | set(va.nodes)
        allowed = int(cfg.max_drained_fraction * total + 1e-9)
        if len(after) > allowed:
            return (f"drain ceiling: {len(after)} of {total} nodes would be drained by hpcguard "
                    f"(max fraction {cfg.max_drained_fraction:g} → {allowed} nodes; already {len(ours)})")
        return ""

    # -- acks
    def _ack(self, va: ValidatedAction, status: str, detail: str) -> ActionAck:
        return ActionAck(action_id=va.action_id, status=status, adapter=self.adapter.name, kind=va.kind,
                         job_id=va.job_id, nodes=list(va.nodes), detail=detail)

    def _duplicate(self, va: ValidatedAction, row: Mapping[str, Any]) -> ActionAck:
        """The ledger's answer to a redelivery: the same ack (detail and time) however often it comes."""
        if row["status"] == "executing":
            detail = (f"executing since {_iso(row['claimed'])} by {row['owner'] or '?'} (attempt {row['attempts']}); "
                      f"not executed twice: its outcome follows when it finishes or is reconciled")
        else:
            detail = (f"already {row['status']} at {_iso(row['finished'])} by {row['adapter'] or 'the governor'} "
                      f"(attempt {row['attempts']}): {row['detail']}")
        ack = self._ack(va, "duplicate", detail[:2000])
        ack.time = float(row["finished"] or row["claimed"])
        return ack
