"""Scheduler adapters: turn an action into scheduler operations and say what happened.

One small interface: ``adapter.apply(action) -> ActionAck``.  ``action`` is a plain
dict with the fields of ``streams.records.Action`` (action_id, kind, job_id, nodes,
deadline, source, reason, time).  Adapters never build shell commands; they validate
every id they pass on (``connectors.validation``) and run argv lists with timeouts.

Adapters: ``dry-run`` (audit log only; acks ``would_apply`` with the Slurm commands it would
have run), ``command`` (site executables per kind), ``simulator`` (in-memory, for the cluster
simulator), ``slurm`` (``connectors.slurm``).
Adapters that can tell what an interrupted attempt did also have ``verify(action,
claimed_at) -> ActionAck`` (``applied``/``skipped``/``would_apply``/``failed``/``unknown``, or
``not_applied``: the attempt had no effect), used by
``Governor.reconcile`` at worker start.
``make_adapter(kind, settings, **opts)`` builds one; ``connectors.governor.Governor``
wraps any of them with the safety limits and the exactly-once ledger.

Writing another scheduler's adapter (e.g. Flux) is a single module: a class with
``name``, ``apply(action) -> ActionAck`` that calls ``validate_action`` first, maps the
seven kinds to the scheduler's commands (Flux: ``flux job kill -s SIG`` for checkpoint,
``flux resource drain/undrain`` for drain/resume, ``flux job urgency JOBID hold|default``
for delay/release), verifies by reading state back, and optionally ``job_info(job_id)``
(user, partition, state, nodes — used by the governor's allow/deny lists),
``node_count()`` (used by the drain ceiling) and ``verify(action, claimed_at)``; then one
line in ``make_adapter``.

Example
-------
>>> import tempfile, os
>>> log = os.path.join(tempfile.mkdtemp(), "audit.jsonl")
>>> ack = DryRunAdapter(log).apply({"action_id": "act-1", "kind": "checkpoint", "job_id": "42", "nodes": ["n1"]})
>>> ack.status, ack.detail
('would_apply', 'dry-run: would run: scancel --signal=USR1 --batch 42')
"""
from __future__ import annotations

import json
import os
import shlex
import string
import subprocess
import threading
from dataclasses import replace
from typing import Any, Callable, Mapping

from hpcguard.connectors.acks import ActionAck, SchedulerAdapter  # noqa: F401  (the interface, re-exported)


class DryRunAdapter:
    """Records every action to a JSONL audit log and changes nothing: ``would_apply``, with the plan.

    A valid action is acknowledged ``would_apply``; its ``detail`` names the exact Slurm
    commands the ``slurm`` adapter would have run (``connectors.slurm.planned_commands``, with
    the same ``checkpoint_signal``, ``signal_scope``, ``migrate_grace_s`` and ``migrate_hook``),
    and the audit log's record holds them as ``command`` (argv lists) beside the action and
    the ack.  A malformed action is ``refused`` as by every adapter (and recorded).
    """

    name = "dry-run"
    changes_scheduler = False

    def __init__(self, audit_log: str, *, checkpoint_signal: str = "USR1", signal_scope: str = "batch",
                 migrate_grace_s: float = 30.0, migrate_hook: str | None = None, reason_prefix: str = "hpcguard"):
        from hpcguard.connectors.slurm import SIGNAL_SCOPES
        from hpcguard.connectors.validation import validate_signal

        if signal_scope not in SIGNAL_SCOPES:
            raise ValueError(f"signal_scope must be batch, full or steps, got {signal_scope!r}")
        self.audit_log = audit_log
        self.checkpoint_signal = validate_signal(checkpoint_signal)
        self.signal_scope = signal_scope
        self.migrate_grace_s = float(migrate_grace_s)
        self.migrate_hook = migrate_hook or None
        self.reason_prefix = reason_prefix
        self._lock = threading.Lock()
        parent = os.path.dirname(os.path.abspath(audit_log))
        os.makedirs(parent, exist_ok=True)

    def plan(self, action: Any) -> list[list[str]]:
        """The Slurm argv lists the ``slurm`` adapter would run (raises ``ValidationError`` when malformed)."""
        from hpcguard.connectors.slurm import planned_commands

        return planned_commands(action, checkpoint_signal=self.checkpoint_signal, signal_scope=self.signal_scope,
                                migrate_hook=self.migrate_hook, reason_prefix=self.reason_prefix)

    def describe(self, kind: str, commands: list[list[str]]) -> str:
        """The ack's detail: ``dry-run: would run: CMD; CMD`` (each argv shell-quoted, exactly as it would run)."""
        text = "dry-run: would run: " + "; ".join(shlex.join(argv) for argv in commands)
        if kind == "migrate" and len(commands) > 1:
            text += f" (the last {self.migrate_grace_s:g} s after the signal)"
        return text

    def apply(self, action: Mapping[str, Any]) -> ActionAck:
        from hpcguard.connectors.validation import ValidationError, validate_action

        try:
            va = validate_action(action)
            commands = self.plan(va)
        except ValidationError as err:
            ack, commands = _refused(action, self.name, err), []
        else:
            ack = ActionAck(action_id=va.action_id, status="would_apply", adapter=self.name, kind=va.kind,
                            job_id=va.job_id, nodes=list(va.nodes), detail=self.describe(va.kind, commands))
        record = {"action": dict(action) if isinstance(action, Mapping) else action, "ack": ack.as_dict(),
                  "would_apply": ack.status == "would_apply", "command": commands}
        with self._lock, open(self.audit_log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, default=str) + "\n")
        return ack

    def verify(self, action: Mapping[str, Any], claimed_at: float) -> ActionAck:
        """After an interruption: the recorded answer (``would_apply`` and its plan) when the audit log holds
        the action, else ``not_applied``: the attempt stopped before doing anything, so the governor runs it now
        (as for a command adapter whose verify command says "not applied"); ``failed`` would lose the action."""
        action_id = str(action.get("action_id", ""))
        recorded: dict | None = None
        if os.path.exists(self.audit_log):
            with open(self.audit_log, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        entry = json.loads(line)
                        # a refused record was a malformed action that merely carried this id
                        if entry["action"]["action_id"] == action_id and entry["ack"]["status"] != "refused":
                            recorded = entry
                    except (ValueError, KeyError, TypeError):
                        continue  # a line cut short by the interruption itself
                    if recorded is not None:
                        break
        ack = ActionAck(action_id=action_id, status="not_applied", adapter=self.name,
                        kind=str(action.get("kind", "")), job_id=action.get("job_id"),
                        nodes=list(action.get("nodes") or []),
                        detail="dry-run: not in the audit log, so the attempt stopped before doing anything")
        if recorded is not None:
            earlier = recorded.get("ack") or {}
            # audit logs written before would_apply existed hold "skipped": the same outcome, said the old way
            ack.status = "skipped" if earlier.get("status") == "skipped" else "would_apply"
            ack.detail = earlier.get("detail") or self.describe(ack.kind, recorded.get("command") or [])
        return ack


def _refused(action: Any, adapter: str, err: Exception) -> ActionAck:
    action_id = str(action.get("action_id", ""))[:128] if isinstance(action, Mapping) else ""
    return ActionAck(action_id=action_id, status="refused", adapter=adapter, detail=f"invalid action: {err}")


PLACEHOLDERS = ("action_id", "kind", "job_id", "nodes", "reason", "source", "deadline")


def template_fields(arg: str) -> set[str]:
    """Placeholders in one argv template argument; anything but a bare known ``{name}`` is an error.

    >>> sorted(template_fields("--node={nodes}:{action_id}"))
    ['action_id', 'nodes']
    """
    found = set()
    try:
        parsed = list(string.Formatter().parse(arg))
    except ValueError as err:
        raise ValueError(f"bad argv template {arg!r}: {err}") from None
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if name not in PLACEHOLDERS or spec or conversion:
            raise ValueError(f"bad placeholder {{{name}{'!' + conversion if conversion else ''}"
                             f"{':' + spec if spec else ''}}} in {arg!r}; allowed: "
                             + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS))
        found.add(name)
    return found


class CommandAdapter:
    """Runs a site-provided executable per action kind with validated fields as argv.

    A kind's command is an argv template: an absolute executable, then arguments that may
    hold the placeholders ``{action_id} {kind} {job_id} {nodes} {reason} {source} {deadline}``
    (``{nodes}`` comma-separated, ``{deadline}`` epoch seconds or empty), filled from the
    validated action — never through a shell.  A command without any placeholder gets
    ``--action-id ID --kind KIND [--job JOBID] [--nodes n1,n2] --reason TEXT`` appended.
    The validated action is also written as JSON on stdin.  Exit status 0 → ``applied``,
    ``skipped_exit`` (default 3) → ``skipped``, anything else or a timeout → ``failed``;
    stdout/stderr go into the ack.  A kind without a command, or with an empty one, is
    ``skipped``.

    ``verify`` maps a kind to a command of the same form that tells, after a crash, what an
    interrupted attempt did (``Governor.reconcile``): exit 0 → ``applied`` (the effect is
    there), 1 → ``not_applied`` (no effect: reconcile runs the action now), ``skipped_exit``
    → ``skipped``, anything else or a timeout → ``unknown`` for an operator.  A kind without
    a verify command stays ``unknown``.

    Example
    -------
    >>> ack = CommandAdapter({"drain": ["/bin/echo", "{nodes}"]}).apply({"action_id": "a", "kind": "drain",
    ...                                                                  "nodes": ["n1", "n2"]})
    >>> ack.status, ack.output
    ('applied', 'n1,n2')
    >>> CommandAdapter({"drain": ["/bin/true"]}, verify={"drain": ["/bin/false", "{action_id}"]}).verify(
    ...     {"action_id": "a", "kind": "drain", "nodes": ["n1"]}, 0.0).status
    'not_applied'
    """

    name = "command"

    def __init__(self, commands: Mapping[str, list[str] | tuple[str, ...] | str], timeout_s: float = 30.0,
                 skipped_exit: int = 3, env: Mapping[str, str] | None = None,
                 verify: Mapping[str, list[str] | tuple[str, ...] | str] | None = None):
        self.commands, self.templated = _argv_table(commands, "command")
        self.verify_commands, self.verify_templated = _argv_table(verify or {}, "verify command")
        self.timeout_s = timeout_s
        self.skipped_exit = skipped_exit
        self.env = None if env is None else dict(env)

    def argv(self, va: Any, verify: bool = False) -> list[str] | None:
        base = (self.verify_commands if verify else self.commands).get(va.kind)
        if not base:
            return None
        if va.kind in (self.verify_templated if verify else self.templated):
            values = {"action_id": va.action_id, "kind": va.kind, "job_id": va.job_id or "",
                      "nodes": ",".join(va.nodes), "reason": va.reason_text, "source": va.source,
                      "deadline": "" if va.deadline is None else f"{va.deadline:.0f}"}
            return [base[0], *(a.format(**values) for a in base[1:])]
        argv = [*base, "--action-id", va.action_id, "--kind", va.kind]
        if va.job_id:
            argv += ["--job", va.job_id]
        if va.nodes:
            argv += ["--nodes", ",".join(va.nodes)]
        return argv + ["--reason", va.reason_text]

    def apply(self, action: Mapping[str, Any]) -> ActionAck:
        from hpcguard.connectors.validation import ValidationError, validate_action

        try:
            va = validate_action(action)
        except ValidationError as err:
            return _refused(action, self.name, err)
        ack = ActionAck(action_id=va.action_id, status="skipped", adapter=self.name, kind=va.kind, job_id=va.job_id,
                        nodes=list(va.nodes))
        argv = self.argv(va)
        if argv is None:
            ack.detail = f"no command configured for {va.kind}"
            return ack
        return self._run(argv, va, ack, {0: "applied", self.skipped_exit: "skipped"}, "failed")

    def verify(self, action: Mapping[str, Any], claimed_at: float) -> ActionAck:
        """After an interruption: what the kind's verify command says (see the class docstring)."""
        from hpcguard.connectors.validation import validate_action

        va = validate_action(action)
        ack = ActionAck(action_id=va.action_id, status="unknown", adapter=self.name, kind=va.kind, job_id=va.job_id,
                        nodes=list(va.nodes))
        argv = self.argv(va, verify=True)
        if argv is None:
            ack.detail = (f"no verify command configured for {va.kind} ([adapter.verify]), so what the interrupted "
                          f"attempt did cannot be told")
            return ack
        return self._run(argv, va, ack, {0: "applied", 1: "not_applied", self.skipped_exit: "skipped"}, "unknown")

    def _run(self, argv: list[str], va: Any, ack: ActionAck, by_exit: Mapping[int, str], otherwise: str) -> ActionAck:
        """Run ``argv`` with the action as JSON on stdin; the exit status picks ``ack.status``."""
        payload = json.dumps({"action_id": va.action_id, "kind": va.kind, "job_id": va.job_id,
                              "nodes": list(va.nodes), "reason": va.reason_text, "source": va.source,
                              "deadline": va.deadline})
        try:
            done = subprocess.run(argv, input=payload, capture_output=True, text=True, timeout=self.timeout_s,
                                  env=self.env, check=False)
        except subprocess.TimeoutExpired:
            ack.status, ack.detail = otherwise, f"{argv[0]} timed out after {self.timeout_s:g} s"
            return ack
        except OSError as err:
            ack.status, ack.detail = otherwise, f"{argv[0]} could not run: {err}"
            return ack
        ack.output = (done.stdout + done.stderr).strip()
        ack.status = by_exit.get(done.returncode, otherwise)
        ack.detail = f"{argv[0]} exited {done.returncode}" + (f" ({ack.status})" if done.returncode else "")
        return ack


def _argv_table(table: Mapping[str, Any], what: str) -> tuple[dict[str, list[str]], set[str]]:
    """Checked argv templates per action kind, and the kinds whose templates hold placeholders."""
    from hpcguard.connectors.validation import ACTION_KINDS, NODE_KINDS

    commands: dict[str, list[str]] = {}
    templated: set[str] = set()
    for kind, argv in table.items():
        if kind not in ACTION_KINDS:
            raise ValueError(f"unknown action kind {kind!r} in command adapter configuration")
        argv = [argv] if isinstance(argv, str) else [str(a) for a in argv]
        if not argv:  # an empty command: this kind is deliberately not handled
            commands[kind] = []
            continue
        if not os.path.isabs(argv[0]) or not os.access(argv[0], os.X_OK):
            raise ValueError(f"{what} for {kind!r} must start with an absolute path to an executable: {argv!r}")
        used = set().union(*(template_fields(a) for a in argv[1:])) if argv[1:] else set()
        if template_fields(argv[0]):
            raise ValueError(f"{what} for {kind!r}: the executable path cannot hold placeholders: {argv[0]!r}")
        if "job_id" in used and kind in NODE_KINDS - {"migrate"}:
            raise ValueError(f"{what} for {kind!r} uses {{job_id}}, but {kind} actions carry no job id")
        if used:
            templated.add(kind)
        commands[kind] = argv
    return commands, templated


class SimulatorAdapter:
    """In-memory adapter for the cluster simulator: records actions and tracks drained nodes.

    ``handler(validated_action) -> (status, detail)`` lets the simulator apply the effect
    to its own state; without it every valid action is ``applied``.

    Example
    -------
    >>> sim = SimulatorAdapter(total_nodes=4)
    >>> sim.apply({"action_id": "a", "kind": "drain", "nodes": ["n1"]}).status, sorted(sim.drained)
    ('applied', ['n1'])
    """

    name = "simulator"

    def __init__(self, total_nodes: int | None = None,
                 handler: Callable[[Any], tuple[str, str]] | None = None,
                 jobs: Mapping[str, Mapping[str, Any]] | None = None):
        self.total_nodes = total_nodes
        self.handler = handler
        self.jobs = dict(jobs or {})
        self.applied: list[ActionAck] = []
        self.drained: set[str] = set()

    def node_count(self) -> int | None:
        return self.total_nodes

    def job_info(self, job_id: str) -> Mapping[str, Any] | None:
        return self.jobs.get(job_id)

    def apply(self, action: Mapping[str, Any]) -> ActionAck:
        from hpcguard.connectors.validation import ValidationError, validate_action

        try:
            va = validate_action(action)
        except ValidationError as err:
            return _refused(action, self.name, err)
        status, detail = self.handler(va) if self.handler else ("applied", f"simulated {va.kind}")
        if status == "applied":
            if va.kind in ("drain", "migrate"):
                self.drained.update(va.nodes)
            elif va.kind == "resume":
                self.drained.difference_update(va.nodes)
        ack = ActionAck(action_id=va.action_id, status=status, adapter=self.name, kind=va.kind, job_id=va.job_id,
                        nodes=list(va.nodes), detail=detail)
        self.applied.append(ack)
        return ack

    def verify(self, action: Mapping[str, Any], claimed_at: float) -> ActionAck:
        """After an interruption: the recorded outcome, or ``failed`` when this simulator never saw the action."""
        action_id = str(action.get("action_id", ""))
        for ack in self.applied:
            if ack.action_id == action_id:
                return replace(ack)
        return ActionAck(action_id=action_id, status="failed", adapter=self.name, kind=str(action.get("kind", "")),
                         job_id=action.get("job_id"), nodes=list(action.get("nodes") or []),
                         detail="the simulator never received this action")


ADAPTER_KINDS = ("dry-run", "slurm", "command", "simulator")
SLURM_SETTING_KEYS = ("slurm_conf", "checkpoint_signal", "signal_scope", "migrate_grace_s", "migrate_hook",
                      "timeout_s")
PLAN_SETTING_KEYS = ("checkpoint_signal", "signal_scope", "migrate_grace_s", "migrate_hook")  # the dry-run plan


def make_adapter(kind: str, settings: Any = None, **opts: Any) -> SchedulerAdapter:
    """Build an adapter by name.

    ``settings`` is ``hpcguard.settings.Settings`` or its ``AdapterSettings`` (for the audit
    log path and, where the settings define them, the ``SLURM_SETTING_KEYS``; the dry-run adapter's plan
    uses the ``PLAN_SETTING_KEYS``) or None;
    ``opts`` go to the adapter's constructor: ``slurm`` takes
    ``slurm_conf``, ``checkpoint_signal``, ``signal_scope``, ``migrate_grace_s``, ``migrate_hook``…;
    ``command`` takes ``commands={kind: argv}``; ``simulator`` takes ``total_nodes``, ``handler``.

    Example
    -------
    >>> make_adapter("simulator", total_nodes=8).name
    'simulator'
    """
    adapter_settings = getattr(settings, "adapter", settings)
    if kind == "dry-run":
        audit = opts.pop("audit_log", None) or getattr(adapter_settings, "audit_log", "hpcguard-actions.jsonl")
        for key in PLAN_SETTING_KEYS:  # the plan names the commands the Slurm adapter would run with these settings
            value = getattr(adapter_settings, key, None)
            if value not in (None, "") and opts.get(key) is None:
                opts[key] = value
        return DryRunAdapter(audit, **{k: v for k, v in opts.items() if v is not None})
    if kind == "slurm":
        from hpcguard.connectors.slurm import SlurmAdapter

        for key in SLURM_SETTING_KEYS:  # settings fields (when the site configures them) under explicit options
            value = getattr(adapter_settings, key, None)
            if value not in (None, "") and opts.get(key) is None:
                opts[key] = value
        return SlurmAdapter(**{k: v for k, v in opts.items() if v is not None})
    if kind == "command":
        if "commands" not in opts:  # from the settings: every kind must be decided, [] = not handled
            from hpcguard.connectors.validation import ACTION_KINDS

            commands = dict(getattr(adapter_settings, "commands", None) or {})
            missing = [k for k in ACTION_KINDS if k not in commands]
            if missing:
                raise ValueError(
                    f"the command adapter has no command for: {', '.join(missing)}. Configure every action kind in "
                    f"the [adapter.commands] table of the configuration file, e.g. "
                    f'drain = ["/usr/local/sbin/site-drain", "{{nodes}}", "--id", "{{action_id}}"], '
                    f"or KIND = [] to leave a kind unhandled (acknowledged as skipped)")
            opts["commands"] = commands
            opts.setdefault("verify", dict(getattr(adapter_settings, "verify", None) or {}))
            opts.setdefault("timeout_s", getattr(adapter_settings, "timeout_s", 30.0))
        return CommandAdapter(**opts)
    if kind == "simulator":
        return SimulatorAdapter(**opts)
    raise ValueError(f"unknown adapter {kind!r} (known: {', '.join(ADAPTER_KINDS)})")
