"""Safety governor in front of every scheduler adapter, with a durable exactly-once ledger.

``Governor(adapter, config, ledger_path).apply(action) -> AckResult`` runs, in order:

1. strict validation (``connectors.validation``): hostile values → ``refused``, nothing runs;
2. the ledger: an action id already ``applied`` → ``duplicate`` (also after a restart; the
   ledger is SQLite); an id whose earlier attempt was interrupted mid-execution → ``refused``
   (it may have run: never twice);
3. allow/deny lists of jobs, partitions and users (partition/user come from the adapter's
   ``job_info`` or the action's ``reason.partition``/``reason.user``; unknown with an allow
   list set → ``refused``);
4. per-kind rate limits over a sliding window of applied actions;
5. cool-down per job (checkpoint, migrate, reschedule) and per node (drain, migrate; a
   checkpoint's node list is informational and does not count);
6. the ceiling on the fraction of all nodes drained by hpcguard at once (adapters with
   ``changes_scheduler = False``, like dry-run, are exempt);
7. dry-run mode: everything above is checked, then ``skipped`` without executing.

The ledger claims an action id atomically before executing it, so two workers sharing
one ledger file never run the same id twice.

Example
-------
>>> import tempfile, os
>>> from hpcguard.connectors.adapters import SimulatorAdapter
>>> gov = Governor(SimulatorAdapter(total_nodes=10), GovernorConfig(), os.path.join(tempfile.mkdtemp(), "l.sqlite"))
>>> gov.apply({"action_id": "a1", "kind": "drain", "nodes": ["n1"]}).status
'applied'
>>> gov.apply({"action_id": "a1", "kind": "drain", "nodes": ["n1"]}).status
'duplicate'
>>> gov.apply({"action_id": "a2", "kind": "drain", "nodes": ["n1;touch pwned"]}).detail[:15]
'invalid action:'
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping

from hpcguard.connectors.adapters import AckResult, SchedulerAdapter
from hpcguard.connectors.validation import (ACTION_KINDS, ValidatedAction, ValidationError, validate_action,
                                            validate_job_id, validate_partition, validate_user)

DISRUPTIVE = ("checkpoint", "migrate", "reschedule", "drain")
NODE_ACTIONS = ("drain", "migrate")  # kinds that change node state (node cool-down, drain ceiling)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS actions (
    action_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    job_id TEXT,
    nodes TEXT NOT NULL,
    status TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    adapter TEXT NOT NULL DEFAULT '',
    attempts INTEGER NOT NULL DEFAULT 1,
    claimed REAL NOT NULL,
    finished REAL
);
CREATE INDEX IF NOT EXISTS actions_kind_time ON actions(kind, status, finished);
CREATE TABLE IF NOT EXISTS drained (
    node TEXT PRIMARY KEY,
    action_id TEXT NOT NULL,
    time REAL NOT NULL
);
"""


@dataclass
class GovernorConfig:
    """Safety limits.  ``rate_limits`` maps a kind to ``(max_count, window_s)``."""

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

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_drained_fraction <= 1.0:
            raise ValueError(f"max_drained_fraction must be within [0, 1], got {self.max_drained_fraction}")
        for kind, limit in self.rate_limits.items():
            if kind not in ACTION_KINDS:
                raise ValueError(f"rate_limits: unknown action kind {kind!r}")
            count, window = limit
            if int(count) < 0 or float(window) <= 0:
                raise ValueError(f"rate_limits[{kind}] must be (count >= 0, window_s > 0), got {limit!r}")
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


class Ledger:
    """Durable record of every action the governor let through (SQLite, WAL mode)."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def get(self, action_id: str) -> dict[str, Any] | None:
        with self._lock:
            cur = self._db.execute("SELECT action_id, kind, job_id, nodes, status, detail, adapter, attempts, claimed, "
                                   "finished FROM actions WHERE action_id = ?", (action_id,))
            row = cur.fetchone()
        if row is None:
            return None
        keys = ("action_id", "kind", "job_id", "nodes", "status", "detail", "adapter", "attempts", "claimed", "finished")
        out = dict(zip(keys, row))
        out["nodes"] = json.loads(out["nodes"])
        return out

    def claim(self, va: ValidatedAction, now: float) -> bool:
        """Atomically mark the id ``executing``; False when it is applied or executing elsewhere."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cur = self._db.execute("SELECT status FROM actions WHERE action_id = ?", (va.action_id,))
                row = cur.fetchone()
                if row is None:
                    self._db.execute("INSERT INTO actions (action_id, kind, job_id, nodes, status, claimed) "
                                     "VALUES (?, ?, ?, ?, 'executing', ?)",
                                     (va.action_id, va.kind, va.job_id, json.dumps(list(va.nodes)), now))
                elif row[0] in ("applied", "executing"):
                    self._db.execute("ROLLBACK")
                    return False
                else:  # failed/refused/skipped earlier: a retry may run
                    self._db.execute("UPDATE actions SET status='executing', attempts=attempts+1, claimed=?, "
                                     "finished=NULL WHERE action_id = ?", (now, va.action_id))
                self._db.execute("COMMIT")
                return True
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def finish(self, va: ValidatedAction, ack: AckResult, now: float, drained_by_us: list[str],
               resumed: list[str]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("UPDATE actions SET status=?, detail=?, adapter=?, finished=? WHERE action_id=?",
                             (ack.status, ack.detail[:2000], ack.adapter, now, va.action_id))
            for node in drained_by_us:
                self._db.execute("INSERT OR REPLACE INTO drained (node, action_id, time) VALUES (?, ?, ?)",
                                 (node, va.action_id, now))
            for node in resumed:
                self._db.execute("DELETE FROM drained WHERE node = ?", (node,))
            self._db.execute("COMMIT")

    def record_refusal(self, va: ValidatedAction, ack: AckResult, now: float) -> None:
        """Keep refusals for audit; an existing row (e.g. applied) is never overwritten."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO actions (action_id, kind, job_id, nodes, status, detail, adapter, "
                             "claimed, finished) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                             (va.action_id, va.kind, va.job_id, json.dumps(list(va.nodes)), ack.status,
                              ack.detail[:2000], ack.adapter, now, now))
            self._db.execute("UPDATE actions SET status=?, detail=?, finished=? WHERE action_id=? AND status IN "
                             "('refused', 'failed', 'skipped')", (ack.status, ack.detail[:2000], now, va.action_id))

    # Limits count actions in flight ('executing', finished NULL → their claim time) as applied.
    def count_applied(self, kind: str, since: float) -> int:
        with self._lock:
            cur = self._db.execute("SELECT COUNT(*) FROM actions WHERE kind=? AND (status='applied' AND finished>=? "
                                   "OR status='executing')", (kind, since))
            return int(cur.fetchone()[0])

    def recent_applied(self, kinds: tuple[str, ...], since: float) -> list[dict[str, Any]]:
        marks = ",".join("?" * len(kinds))
        with self._lock:
            cur = self._db.execute(f"SELECT action_id, kind, job_id, nodes, COALESCE(finished, claimed) FROM actions "
                                   f"WHERE (status='applied' AND finished>=? OR status='executing') "
                                   f"AND kind IN ({marks})", (since, *kinds))
            rows = cur.fetchall()
        return [{"action_id": r[0], "kind": r[1], "job_id": r[2], "nodes": json.loads(r[3]), "finished": r[4]}
                for r in rows]

    def drained_nodes(self) -> set[str]:
        """Nodes hpcguard drained and has not resumed, plus those of drains in flight."""
        with self._lock:
            nodes = {r[0] for r in self._db.execute("SELECT node FROM drained").fetchall()}
            for (listed,) in self._db.execute("SELECT nodes FROM actions WHERE status='executing' AND kind IN "
                                              "('drain', 'migrate')").fetchall():
                nodes.update(json.loads(listed))
        return nodes


class Governor:
    """Applies actions through ``adapter`` only when every safety check passes.

    Parameters
    ----------
    adapter : SchedulerAdapter
        Any adapter (``make_adapter``).
    config : GovernorConfig
        The limits.
    ledger_path : str or Path
        SQLite file shared by restarts (and by workers on one host).
    clock : callable
        Epoch seconds (tests pass a fake clock).
    """

    def __init__(self, adapter: SchedulerAdapter, config: GovernorConfig | None = None,
                 ledger_path: str | Path = "hpcguard-ledger.sqlite", clock: Callable[[], float] = time.time):
        self.adapter = adapter
        self.config = config or GovernorConfig()
        self.ledger = Ledger(ledger_path)
        self.clock = clock
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Any, kind: str | None = None, config: GovernorConfig | None = None,
                      ledger_path: str | Path | None = None, **adapter_opts: Any) -> "Governor":
        """``make_adapter`` + ``Governor`` from ``Settings`` (or its ``adapter`` section).

        ``kind`` and ``ledger_path`` default to ``settings.adapter.kind`` / ``.ledger``; without
        ``config``, a ``settings.adapter.governor_config`` TOML path (when that field exists)
        is loaded, else the defaults; ``adapter_opts`` go to the adapter (e.g. ``slurm_conf=...``).
        """
        from hpcguard.connectors.adapters import make_adapter

        section = getattr(settings, "adapter", settings)
        adapter = make_adapter(kind or section.kind, section, **adapter_opts)
        if config is None and getattr(section, "governor_config", ""):
            config = GovernorConfig.load(section.governor_config)
        return cls(adapter, config, ledger_path or section.ledger)

    @property
    def name(self) -> str:
        return f"governor+{self.adapter.name}"

    def close(self) -> None:
        self.ledger.close()

    def apply(self, action: Mapping[str, Any]) -> AckResult:
        try:
            va = validate_action(action)
        except ValidationError as err:
            action_id = str(action.get("action_id", ""))[:128] if isinstance(action, Mapping) else ""
            kind = str(action.get("kind", ""))[:32] if isinstance(action, Mapping) else ""
            return AckResult(action_id=action_id, status="refused", adapter=self.adapter.name, kind=kind,
                             detail=f"invalid action: {err}; nothing was executed")
        previous = self.ledger.get(va.action_id)
        if previous is not None and previous["status"] in ("applied", "executing"):
            return self._duplicate(va, previous)
        with self._lock:  # checks + claim are one step for the threads of this process
            reason = self.check(va)
            now = self.clock()
            if reason:
                ack = self._ack(va, "refused", f"refused by governor: {reason}")
                self.ledger.record_refusal(va, ack, now)
                return ack
            if self.config.dry_run:
                ack = self._ack(va, "skipped", "dry-run: all governor checks passed; not executed")
                self.ledger.record_refusal(va, ack, now)
                return ack
            if not self.ledger.claim(va, now):
                return self._duplicate(va, self.ledger.get(va.action_id) or {})
        try:
            ack = self.adapter.apply(dict(va.raw))
        except Exception as err:  # an adapter bug must not leave the id claimed forever without an ack
            ack = self._ack(va, "failed", f"adapter raised {type(err).__name__}: {err}")
        drained = list(va.nodes) if ack.status == "applied" and va.kind in ("drain", "migrate") else []
        resumed = list(va.nodes) if ack.status == "applied" and va.kind == "resume" else []
        self.ledger.finish(va, ack, self.clock(), drained, resumed)
        return ack

    # -- checks
    def check(self, va: ValidatedAction) -> str:
        """The first reason to refuse ``va`` ('' when it may run)."""
        cfg, now = self.config, self.clock()
        if va.job_id is not None:
            if va.job_id in cfg.deny_jobs:
                return f"job {va.job_id} is on the deny list"
            if cfg.allow_jobs and va.job_id not in cfg.allow_jobs:
                return f"job {va.job_id} is not on the allow list"
            why = self._check_job_owner(va)
            if why:
                return why
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
        if va.kind in ("drain", "migrate") and va.nodes:
            why = self._check_drain_ceiling(va)
            if why:
                return why
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

    def _check_drain_ceiling(self, va: ValidatedAction) -> str:
        cfg = self.config
        if not getattr(self.adapter, "changes_scheduler", True):
            return ""  # e.g. the dry-run adapter: nothing gets drained
        total = cfg.total_nodes
        if total is None:
            counter = getattr(self.adapter, "node_count", None)
            total = counter() if callable(counter) else None
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
    def _ack(self, va: ValidatedAction, status: str, detail: str) -> AckResult:
        return AckResult(action_id=va.action_id, status=status, adapter=self.adapter.name, kind=va.kind,
                         job_id=va.job_id, nodes=list(va.nodes), detail=detail)

    def _duplicate(self, va: ValidatedAction, previous: Mapping[str, Any]) -> AckResult:
        if previous.get("status") == "executing":
            return self._ack(va, "refused", "this action id is executing right now, or an earlier attempt "
                                            "started and never finished (worker crash?); not executing it twice: "
                                            "check the scheduler")
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(previous.get("finished") or previous.get("claimed") or 0))
        detail = f"already applied at {when} by {previous.get('adapter', '?')}: {previous.get('detail', '')}"
        return self._ack(va, "duplicate", detail[:2000])
