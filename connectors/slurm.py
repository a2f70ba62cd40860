"""Slurm: run its client commands safely, parse what they print, act on actions.

``SlurmRunner`` runs ``scontrol``/``scancel``/``squeue``/``sinfo`` as argv lists (never a
shell) with a timeout and an optional ``SLURM_CONF``.  ``SlurmAdapter`` maps each action
kind to Slurm operations and verifies the effect by reading state back:

- ``checkpoint``: ``scancel --signal=SIG --batch|--full JOBID`` (running jobs only; others
  ``skipped``); verified by ``scontrol show job -o JOBID`` (still known; state reported).
- ``drain``: ``scontrol update NodeName=n1,n2 State=DRAIN "Reason=hpcguard ID: TEXT"`` (nodes
  already drained are left alone); verified by ``scontrol show node -o``: DRAIN flag and the
  exact reason.
- ``resume``: ``scontrol update NodeName=n1,n2 State=RESUME``, only for nodes whose reason
  starts with ``hpcguard`` unless ``resume_foreign``; verified: no DRAIN flag any more.
- ``migrate``: drain the suspicious nodes (as ``drain``), ``scancel --signal=SIG`` (as
  ``checkpoint``), wait ``migrate_grace_s``, ``scontrol requeue JOBID``; verified: nodes
  drained and the job's ``Restarts`` went up.  With a site hook, ``HOOK JOBID NODE...``
  replaces the requeue; verified: the job's ``NodeList`` avoids the nodes.
- ``reschedule``: ``scontrol requeue JOBID`` (``requeuehold`` when ``reason.hold``);
  verified: ``Restarts`` +1 (and ``Priority=0`` when held).
- ``delay``: ``scontrol hold JOBID`` (pending jobs only); verified: ``Priority=0``.
- ``release``: ``scontrol release JOBID`` (held jobs only); verified: ``Priority>0``.

``SlurmAdapter.verify(action, claimed_at)`` tells ``Governor.reconcile`` what an interrupted
attempt did (and finishes an interrupted ``migrate``).

``planned_commands(action, ...)`` (``SlurmAdapter.plan``) lists those commands as argv lists
without running anything: the adapter runs the very same lists, and the dry-run adapter
reports them as what it would have done (``would_apply``).

Example
-------
>>> parse_time_limit("1-02:30")
95400.0
>>> parse_kv_line("JobId=7 JobState=RUNNING Reason=None NodeList=n[1-2]")["NodeList"]
'n[1-2]'

Node lists are expanded with ``connectors.hostlist.expand_hostlist``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from hpcguard.connectors.acks import ActionAck
from hpcguard.connectors.hostlist import expand_hostlist
from hpcguard.connectors.validation import ValidatedAction, ValidationError, validate_action, validate_signal

TOOLS = frozenset({"scontrol", "scancel", "squeue", "sinfo", "sbatch", "sacct"})
REQUEUED_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING"})
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=")


# ----------------------------------------------------------------------------- parsing
def parse_kv_line(line: str) -> dict[str, str]:
    """One ``scontrol show -o`` line → ``{key: value}`` (values may contain spaces)."""
    matches = list(_KEY.finditer(line))
    out = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        out[m.group(1)] = line[m.end():end].strip()
    return out


def parse_scontrol_show(text: str) -> list[dict[str, str]]:
    """``scontrol show job|node -o`` output → one dict per line."""
    return [parse_kv_line(line) for line in text.splitlines() if "=" in line]


def parse_time_limit(text: str | None) -> float | None:
    """Slurm time limits (``[D-]HH:MM:SS``, ``MM:SS``, ``MM``, ``UNLIMITED``) → seconds (None = unlimited)."""
    if text is None or text.strip().upper() in ("", "UNLIMITED", "INFINITE", "NONE", "N/A", "PARTITION_LIMIT"):
        return None
    text = text.strip()
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
    fields_ = [int(x) for x in text.split(":")]
    if len(fields_) > 3:
        raise ValueError(f"bad Slurm time limit {text!r}")
    if days or len(fields_) == 3:  # [D-]HH[:MM[:SS]]
        h, m, s = (fields_ + [0, 0])[:3]
    elif len(fields_) == 2:  # MM:SS
        h, (m, s) = 0, fields_
    else:  # MM
        h, m, s = 0, fields_[0], 0
    return float(days * 86400 + h * 3600 + m * 60 + s)


def parse_slurm_time(text: str | None) -> float | None:
    """``2026-11-23T10:21:59`` (controller's local time) → epoch seconds; Unknown/None → None."""
    if not text or text in ("Unknown", "None", "N/A", "(null)"):
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def _state_flags(state: str) -> set[str]:
    """``IDLE+DRAIN`` / ``idle*`` / ``drained`` → upper-case flag set."""
    s = state.upper().rstrip("*~#!%$@^-")
    flags = set(s.split("+"))
    if state.endswith("*"):
        flags.add("NOT_RESPONDING")
    if s in ("DRAINED", "DRAINING"):
        flags |= {"DRAIN", "IDLE" if s == "DRAINED" else "ALLOCATED"}
    return flags


def parse_squeue_json(text: str) -> list[dict[str, Any]]:
    """``squeue --json`` (Slurm 22.05, OpenAPI v0.0.38) → normalised job dicts."""
    jobs = []
    for j in json.loads(text).get("jobs", []):
        limit = j.get("time_limit")
        jobs.append({
            "job_id": str(j["job_id"]) if not j.get("array_task_id") else f"{j['array_job_id']}_{j['array_task_id']}",
            "state": str(j.get("job_state", "")).upper(),
            "nodes": expand_hostlist(j.get("nodes") or ""),
            "num_nodes": int(j.get("node_count") or 0),
            "user": j.get("user_name") or "",
            "partition": j.get("partition") or "",
            "name": j.get("name") or "",
            "time_limit_s": None if limit in (None, 0) else float(limit) * 60.0,
            "submit_time": float(j["submit_time"]) if j.get("submit_time") else None,
            "start_time": float(j["start_time"]) if j.get("start_time") else None,
            "end_time": float(j["end_time"]) if j.get("end_time") else None,
            "restarts": int(j.get("restart_cnt") or 0),
            "reason": j.get("state_reason") or "",
        })
    return jobs


SQUEUE_FORMAT = "%i|%T|%u|%P|%N|%l|%V|%S|%e|%D|%r|%j"


def parse_squeue_text(text: str) -> list[dict[str, Any]]:
    """``squeue -h -o SQUEUE_FORMAT`` → the same dicts as ``parse_squeue_json`` (restarts unknown: -1)."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = line.split("|", 11)
        if len(f) < 12:
            raise ValueError(f"unexpected squeue line: {line!r}")
        start = parse_slurm_time(f[7])
        jobs.append({"job_id": f[0], "state": f[1].upper(), "user": f[2], "partition": f[3],
                     "nodes": expand_hostlist(f[4]), "time_limit_s": parse_time_limit(f[5]),
                     "submit_time": parse_slurm_time(f[6]), "start_time": start if f[1] != "PENDING" else None,
                     "end_time": parse_slurm_time(f[8]), "num_nodes": int(f[9] or 0), "reason": f[10],
                     "name": f[11], "restarts": -1})
    return jobs


def parse_sinfo_json(text: str) -> list[dict[str, Any]]:
    """``sinfo --json`` → ``[{name, state, flags, reason}]`` with upper-case flags."""
    out = []
    for n in json.loads(text).get("nodes", []):
        flags = {str(n.get("state", "")).upper(), *(str(x).upper() for x in n.get("state_flags") or [])}
        out.append({"name": n["name"], "state": "+".join(sorted(flags)), "flags": flags, "reason": n.get("reason") or ""})
    return out


def parse_sinfo_text(text: str) -> list[dict[str, Any]]:
    """``sinfo -h -N -o '%N|%T|%E'`` → the same dicts as ``parse_sinfo_json``."""
    out, seen = [], set()
    for line in text.splitlines():
        if not line.strip():
            continue
        name, state, reason = (line.split("|", 2) + ["", ""])[:3]
        if name in seen:  # a node in several partitions is listed once per partition
            continue
        seen.add(name)
        flags = _state_flags(state)
        out.append({"name": name, "state": "+".join(sorted(flags)), "flags": flags,
                    "reason": "" if reason == "none" else reason})
    return out


# ----------------------------------------------------------------------------- runner
@dataclass
class CommandResult:
    """One finished command: argv, exit status (None on timeout), output."""

    argv: list[str]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def render(self) -> str:
        rc = "timeout" if self.returncode is None else self.returncode
        text = f"$ {' '.join(self.argv)}  (rc={rc})"
        body = (self.stdout.strip() + ("\n" + self.stderr.strip() if self.stderr.strip() else "")).strip()
        return text + ("\n" + body if body else "")


class SlurmRunner:
    """Runs Slurm client tools with argv lists, a timeout, and ``SLURM_CONF`` when given."""

    def __init__(self, slurm_conf: str | None = None, bin_dir: str | None = None, timeout_s: float = 15.0,
                 env: Mapping[str, str] | None = None):
        self.slurm_conf = slurm_conf
        self.bin_dir = bin_dir
        self.timeout_s = timeout_s
        self.env = dict(os.environ if env is None else env)
        if slurm_conf:
            self.env["SLURM_CONF"] = str(slurm_conf)

    def resolve(self, tool: str) -> str:
        if tool not in TOOLS:
            raise ValueError(f"not a Slurm client tool: {tool!r}")
        if self.bin_dir:
            return os.path.join(self.bin_dir, tool)
        found = shutil.which(tool, path=self.env.get("PATH"))
        if not found:
            raise FileNotFoundError(f"{tool} not found on PATH (install slurm-client)")
        return found

    def run(self, tool: str, *args: str) -> CommandResult:
        argv = [self.resolve(tool), *args]
        t0 = time.monotonic()
        shown = [tool, *args]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout_s, env=self.env,
                                  stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired as err:
            return CommandResult(shown, None, _text(err.stdout), f"timed out after {self.timeout_s:g} s",
                                 time.monotonic() - t0)
        return CommandResult(shown, done.returncode, done.stdout, done.stderr, time.monotonic() - t0)


def _text(data: Any) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


# ----------------------------------------------------------------------------- the commands, as data
# The one place each Slurm command of an action is spelled: ``SlurmAdapter`` runs these argv lists and
# ``planned_commands`` (the dry-run adapter's plan) lists them, so a plan and a real run cannot diverge.
SIGNAL_SCOPES = {"batch": ("--batch",), "full": ("--full",), "steps": ()}


def drain_argv(nodes: list[str] | tuple[str, ...], reason: str) -> list[str]:
    """``scontrol update NodeName=n1,n2 State=DRAIN Reason=TEXT`` (one argv item: no shell quoting needed)."""
    return ["scontrol", "update", f"NodeName={','.join(nodes)}", "State=DRAIN", f"Reason={reason}"]


def resume_argv(nodes: list[str] | tuple[str, ...]) -> list[str]:
    return ["scontrol", "update", f"NodeName={','.join(nodes)}", "State=RESUME"]


def signal_argv(job_id: str, signal: str, scope: str) -> list[str]:
    """The checkpoint signal: ``scancel --signal=SIG [--batch|--full] JOBID``."""
    return ["scancel", f"--signal={signal}", *SIGNAL_SCOPES[scope], job_id]


def requeue_argv(job_id: str, hold: bool = False) -> list[str]:
    return ["scontrol", "requeuehold" if hold else "requeue", job_id]


def hold_argv(job_id: str) -> list[str]:
    return ["scontrol", "hold", job_id]


def release_argv(job_id: str) -> list[str]:
    return ["scontrol", "release", job_id]


def drain_reason(va: ValidatedAction, reason_prefix: str = "hpcguard") -> str:
    """The Slurm reason of a drain: ``PREFIX ACTION_ID: TEXT`` (resume and verify recognise hpcguard's drains by it)."""
    return f"{reason_prefix} {va.action_id}: {va.reason_text}"


def planned_commands(action: Mapping[str, Any] | ValidatedAction, *, checkpoint_signal: str = "USR1",
                     signal_scope: str = "batch", migrate_hook: str | None = None,
                     reason_prefix: str = "hpcguard") -> list[list[str]]:
    """The argv lists ``SlurmAdapter`` runs for ``action``, in order (a pure function: nothing runs).

    The plan assumes the state the adapter acts on: a running job (checkpoint, migrate,
    reschedule), a pending job (delay; held for release), nodes not drained yet (drain) or
    drained by hpcguard (resume).  The real adapter reads that state first and may skip
    (nodes already drained are left out of the drain, a pending job is not signalled);
    ``migrate`` waits ``migrate_grace_s`` between the signal and the requeue (or the hook).
    A malformed action raises ``ValidationError``, as the adapter refuses it.

    >>> planned_commands({"action_id": "a1", "kind": "checkpoint", "job_id": "42", "nodes": ["n1"]})
    [['scancel', '--signal=USR1', '--batch', '42']]
    >>> planned_commands({"action_id": "a2", "kind": "migrate", "job_id": "42", "nodes": ["n1"],
    ...                   "reason": {"text": "fan"}})  # doctest: +NORMALIZE_WHITESPACE
    [['scontrol', 'update', 'NodeName=n1', 'State=DRAIN', 'Reason=hpcguard a2: fan'],
     ['scancel', '--signal=USR1', '--batch', '42'], ['scontrol', 'requeue', '42']]
    """
    va = action if isinstance(action, ValidatedAction) else validate_action(action)
    signal = validate_signal(checkpoint_signal)
    if signal_scope not in SIGNAL_SCOPES:
        raise ValueError(f"signal_scope must be batch, full or steps, got {signal_scope!r}")
    job = va.job_id or ""
    if va.kind == "checkpoint":
        return [signal_argv(job, signal, signal_scope)]
    if va.kind == "drain":
        return [drain_argv(va.nodes, drain_reason(va, reason_prefix))]
    if va.kind == "resume":
        return [resume_argv(va.nodes)]
    if va.kind == "reschedule":
        return [requeue_argv(job, hold=va.hold)]
    if va.kind == "delay":
        return [hold_argv(job)]
    if va.kind == "release":
        return [release_argv(job)]
    if va.kind == "migrate":
        steps = [drain_argv(va.nodes, drain_reason(va, reason_prefix))] if va.nodes else []
        steps.append(signal_argv(job, signal, signal_scope))
        steps.append([migrate_hook, job, *va.nodes] if migrate_hook else requeue_argv(job))
        return steps
    raise ValueError(f"no Slurm commands for kind {va.kind!r}")  # validate_action admits only the seven kinds


# ----------------------------------------------------------------------------- adapter
@dataclass
class _Run:
    """Commands run for one action (their rendered output goes into the ack)."""

    results: list[CommandResult] = field(default_factory=list)

    def add(self, result: CommandResult) -> CommandResult:
        self.results.append(result)
        return result

    @property
    def output(self) -> str:
        return "\n".join(r.render() for r in self.results)


class SlurmAdapter:
    """Acts on a Slurm controller; every operation is verified by reading state back.

    Parameters
    ----------
    runner : SlurmRunner, optional
        Built from ``slurm_conf``/``timeout_s`` when omitted.
    checkpoint_signal : str
        Signal the site's checkpoint library listens to (``USR1`` for SCR/DMTCP setups).
    signal_scope : {"batch", "full", "steps"}
        ``--batch`` (batch shell only), ``--full`` (all steps and the batch shell), or steps only.
    migrate_grace_s : float
        Seconds between the checkpoint signal and the requeue of a migrated job.
    migrate_hook : str, optional
        Executable for live migration, run as ``HOOK JOBID NODE...``; replaces the requeue.
    reason_prefix : str
        Drain reasons start with it; resume touches only nodes whose reason does, unless
        ``resume_foreign``.
    """

    name = "slurm"

    def __init__(self, runner: SlurmRunner | None = None, *, slurm_conf: str | None = None, timeout_s: float = 15.0,
                 checkpoint_signal: str = "USR1", signal_scope: str = "batch", migrate_grace_s: float = 30.0,
                 migrate_hook: str | None = None, reason_prefix: str = "hpcguard", resume_foreign: bool = False,
                 verify_timeout_s: float = 10.0, sleep: Callable[[float], None] = time.sleep):
        if signal_scope not in SIGNAL_SCOPES:
            raise ValueError(f"signal_scope must be batch, full or steps, got {signal_scope!r}")
        if migrate_hook and not os.access(migrate_hook, os.X_OK):
            raise ValueError(f"migrate hook {migrate_hook!r} is not an executable file")
        self.runner = runner or SlurmRunner(slurm_conf=slurm_conf, timeout_s=timeout_s)
        self.checkpoint_signal = validate_signal(checkpoint_signal)
        self.signal_scope = signal_scope
        self.migrate_grace_s = float(migrate_grace_s)
        self.migrate_hook = migrate_hook
        self.reason_prefix = reason_prefix
        self.resume_foreign = resume_foreign
        self.verify_timeout_s = verify_timeout_s
        self.sleep = sleep

    # -- state read-back
    def job_info(self, job_id: str) -> dict[str, Any] | None:
        """``scontrol show job -o`` as a dict with parsed ``nodes``, ``state``, ``user``, ``partition``."""
        res = self.runner.run("scontrol", "show", "job", "-o", job_id)
        return self._job_from(res)

    def _job_from(self, res: CommandResult) -> dict[str, Any] | None:
        if not res.ok:
            return None
        rows = parse_scontrol_show(res.stdout)
        if not rows:
            return None
        row = rows[0]
        user = row.get("UserId", "").split("(")[0]
        return {**row, "state": row.get("JobState", ""), "user": user, "partition": row.get("Partition", ""),
                "nodes": expand_hostlist(row.get("NodeList", "")), "restarts": int(row.get("Restarts", "0") or 0),
                "priority": int(row.get("Priority", "0") or 0)}

    def node_info(self, nodes: list[str] | tuple[str, ...]) -> dict[str, dict[str, Any]]:
        res = self.runner.run("scontrol", "show", "node", "-o", ",".join(nodes))
        out = {}
        for row in parse_scontrol_show(res.stdout) if res.ok else []:
            reason = re.sub(r"\s*\[[^\]]*@[^\]]*\]\s*$", "", row.get("Reason", ""))  # strip " [user@time]"
            out[row.get("NodeName", "")] = {"state": row.get("State", ""), "flags": _state_flags(row.get("State", "")),
                                            "reason": reason}
        return out

    def node_count(self) -> int | None:
        res = self.runner.run("sinfo", "-h", "-N", "-o", "%N")
        return len(set(res.stdout.split())) if res.ok else None

    # -- entry point
    def apply(self, action: Mapping[str, Any]) -> ActionAck:
        try:
            va = validate_action(action)
        except ValidationError as err:
            return ActionAck(action_id=str(action.get("action_id", ""))[:128] if isinstance(action, Mapping) else "",
                             status="refused", adapter=self.name, detail=f"invalid action: {err}")
        run = _Run()
        try:
            status, detail = getattr(self, f"_{va.kind}")(va, run)
        except (OSError, ValueError) as err:
            status, detail = "failed", f"{type(err).__name__}: {err}"
        return ActionAck(action_id=va.action_id, status=status, adapter=self.name, kind=va.kind, job_id=va.job_id,
                         nodes=list(va.nodes), detail=detail, output=run.output)

    # -- after an interruption
    def verify(self, action: Mapping[str, Any], claimed_at: float) -> ActionAck:
        """Tell from Slurm's state what an interrupted attempt of ``action`` did (``Governor.reconcile``).

        ``drain``/``resume``/``delay``/``release``/``reschedule`` read node or job state back;
        ``migrate`` interrupted after its drain completes the requeue (after what is left of the
        grace period) or, when the job cannot be requeued any more, resumes the nodes this
        action drained — only those whose reason names this action id; ``checkpoint`` leaves
        no trace in Slurm: ``unknown``.
        """
        va = validate_action(action)
        run = _Run()
        try:
            status, detail = getattr(self, f"_verify_{va.kind}")(va, run, claimed_at)
        except (OSError, ValueError) as err:
            status, detail = "unknown", f"could not read Slurm: {type(err).__name__}: {err}"
        return ActionAck(action_id=va.action_id, status=status, adapter=self.name, kind=va.kind, job_id=va.job_id,
                         nodes=list(va.nodes), detail=detail, output=run.output)

    def _ours(self, va: ValidatedAction, info: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """Nodes drained with this action's own reason."""
        mark = f"{self.reason_prefix} {va.action_id}:"
        return [n for n in va.nodes if "DRAIN" in info.get(n, {}).get("flags", ()) and
                info[n]["reason"].startswith(mark)]

    def _verify_drain(self, va: ValidatedAction, run: _Run, claimed_at: float) -> tuple[str, str]:
        info = self.node_info(va.nodes)
        ours = self._ours(va, info)
        undrained = [n for n in va.nodes if "DRAIN" not in info.get(n, {}).get("flags", ())]
        state = _nodes_text(info, va.nodes)
        if ours and not undrained:
            return "applied", f"drained by this action: {state}"
        if not ours and undrained:
            return "failed", f"not drained by this action (interrupted before scontrol update): {state}"
        if not ours:
            return "skipped", f"all nodes were already drained by others: {state}"
        return "unknown", f"partly drained: {state}"

    def _verify_resume(self, va: ValidatedAction, run: _Run, claimed_at: float) -> tuple[str, str]:
        info = self.node_info(va.nodes)
        drained = [n for n in va.nodes if "DRAIN" in info.get(n, {}).get("flags", {"DRAIN"})]
        return ("failed" if drained else "applied"), _nodes_text(info, va.nodes)

    def _verify_checkpoint(self, va: ValidatedAction, run: _Run, claimed_at: float) -> tuple[str, str]:
        return "unknown", "a checkpoint signal leaves no trace in Slurm: ask the job's checkpoint library"

    def _verify_delay(self, va: ValidatedAction, run: _Run, claimed_at: float) -> tuple[str, str]:
        job = self.job_info(va.job_id)
        if job is None:
            return "unknown", f"job {va.job_id} not found"
        if job["priority"] == 0:
            return "applied", f"job {va.job_id} is held: {job['state']}, Priority=0"
        return ("failed" if job["state"] == "PENDING" else "unknown"), f"job {va.job_id} is {job['state']}, not held"

    def _verify_release(self, va: ValidatedAction, run: _Run, claimed_at: float) -> tuple[str, str]:
        job = self.job_info(va.job_id)
        if job is None:
            return "unknown", f"job {va.job_id} not found"
        if job["priority"] == 0:
            return "failed", f"job {va.job_id} is still held"
        return "applied", f"job {va.job_id} is {job['state']}, Priority={job['priority']}"

    def _verify_reschedule(self, va: ValidatedAction, run: _Run, claimed_at: float) -> tuple[str, str]:
        job = self.job_info(va.job_id)
        if job is None:
            return "unknown", f"job {va.job_id} not found"
        text = f"job {va.job_id} is {job['state']}, Restarts={job['restarts']}"
        if job["state"] in REQUEUED_STATES:
            return "applied", text
        if job["state"] == "RUNNING" and job["restarts"] == 0:
            return "failed", text + ": it was not requeued"
        return "unknown", text

    def _verify_migrate(self, va: ValidatedAction, run: _Run, claimed_at: float) -> tuple[str, str]:
        job = self.job_info(va.job_id)
        info = self.node_info(va.nodes) if va.nodes else {}
        ours = self._ours(va, info)
        state = "gone" if job is None else job["state"]
        if job is not None and job["state"] in REQUEUED_STATES and (ours or not va.nodes):
            return "applied", f"job {va.job_id} is {state} (Restarts={job['restarts']}) and {_nodes_text(info, ours)}" \
                              f": the migrate had completed"
        on_suspects = job is not None and job["state"] == "RUNNING" and set(job["nodes"]) & set(va.nodes)
        if job is not None and job["state"] == "RUNNING" and not on_suspects:
            return "applied", f"job {va.job_id} runs on {','.join(job['nodes'])}, off {','.join(va.nodes)}"
        if on_suspects and (ours or not va.nodes):
            # interrupted between the drain and the requeue (the grace period): finish it
            left = claimed_at + self.migrate_grace_s - time.time()
            if left > 0:
                self.sleep(left)
            status, detail = self._requeue(va, run, job, hold=False)
            return status, f"completed the interrupted migrate: {detail}"
        if on_suspects:
            return "failed", f"job {va.job_id} still runs on {','.join(va.nodes)} and nothing was drained: " \
                             f"interrupted before any change"
        if ours:  # the job cannot be requeued any more: do not leave our drain behind
            res = run.add(self.runner.run(*resume_argv(ours)))
            undone = "undid this action's drain of " + ",".join(ours) if res.ok else \
                f"could not undo the drain of {','.join(ours)}: {res.stderr.strip()}"
            return ("failed" if res.ok else "unknown"), (f"job {va.job_id} is {state}, so it cannot be requeued; "
                                                         f"{undone}")
        return "failed", f"job {va.job_id} is {state} and no node carries this action's drain"

    def slurm_reason(self, va: ValidatedAction) -> str:
        return drain_reason(va, self.reason_prefix)

    def plan(self, action: Mapping[str, Any] | ValidatedAction) -> list[list[str]]:
        """The argv lists :meth:`apply` runs for ``action`` with this adapter's settings (``planned_commands``)."""
        return planned_commands(action, checkpoint_signal=self.checkpoint_signal, signal_scope=self.signal_scope,
                                migrate_hook=self.migrate_hook, reason_prefix=self.reason_prefix)

    def _wait(self, check: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + self.verify_timeout_s
        while True:
            if check():
                return True
            if time.monotonic() > deadline:
                return False
            self.sleep(0.2)

    # -- kinds
    def _drain(self, va: ValidatedAction, run: _Run) -> tuple[str, str]:
        before = self.node_info(va.nodes)
        unknown = [n for n in va.nodes if n not in before]
        if unknown:
            return "failed", f"unknown nodes: {', '.join(unknown)}"
        todo = [n for n in va.nodes if "DRAIN" not in before[n]["flags"]]
        if not todo:
            return "skipped", "all nodes already drained: " + "; ".join(f"{n} ({before[n]['reason']})" for n in va.nodes)
        reason = self.slurm_reason(va)
        res = run.add(self.runner.run(*drain_argv(todo, reason)))
        if not res.ok:
            return "failed", f"scontrol update failed: {res.stderr.strip()}"
        after: dict[str, dict[str, Any]] = {}

        def drained() -> bool:
            after.update(self.node_info(todo))
            return all("DRAIN" in after.get(n, {}).get("flags", ()) and after[n]["reason"] == reason for n in todo)

        if not self._wait(drained):
            return "failed", "drain not visible: " + _nodes_text(after, todo)
        skipped = [n for n in va.nodes if n not in todo]
        return "applied", (f"drained {','.join(todo)} with reason {reason!r}: " + _nodes_text(after, todo)
                           + (f"; already drained: {','.join(skipped)}" if skipped else ""))

    def _resume(self, va: ValidatedAction, run: _Run) -> tuple[str, str]:
        before = self.node_info(va.nodes)
        unknown = [n for n in va.nodes if n not in before]
        if unknown:
            return "failed", f"unknown nodes: {', '.join(unknown)}"
        drained = [n for n in va.nodes if "DRAIN" in before[n]["flags"]]
        if not drained:
            return "skipped", "no node is drained: " + _nodes_text(before, va.nodes)
        foreign = [n for n in drained if not before[n]["reason"].startswith(self.reason_prefix)]
        if foreign and not self.resume_foreign:
            return "refused", ("not drained by hpcguard (resume_foreign is off): "
                               + "; ".join(f"{n} ({before[n]['reason']})" for n in foreign))
        res = run.add(self.runner.run(*resume_argv(drained)))
        if not res.ok:
            return "failed", f"scontrol update failed: {res.stderr.strip()}"
        after: dict[str, dict[str, Any]] = {}

        def resumed() -> bool:
            after.update(self.node_info(drained))
            return all("DRAIN" not in after.get(n, {}).get("flags", {"DRAIN"}) for n in drained)

        if not self._wait(resumed):
            return "failed", "resume not visible: " + _nodes_text(after, drained)
        return "applied", f"resumed {','.join(drained)}: " + _nodes_text(after, drained)

    def _signal(self, va: ValidatedAction, run: _Run) -> CommandResult:
        return run.add(self.runner.run(*signal_argv(va.job_id, self.checkpoint_signal, self.signal_scope)))

    def _checkpoint(self, va: ValidatedAction, run: _Run) -> tuple[str, str]:
        job = self.job_info(va.job_id)
        if job is None:
            return "failed", f"job {va.job_id} not found"
        if job["state"] != "RUNNING":
            return "skipped", f"job {va.job_id} is {job['state']}; only running jobs are signalled"
        res = self._signal(va, run)
        if not res.ok:
            return "failed", f"scancel failed: {res.stderr.strip()}"
        after = self.job_info(va.job_id)
        state = after["state"] if after else "gone"
        return "applied", (f"signal {self.checkpoint_signal} sent ({self.signal_scope}) to job {va.job_id}; "
                           f"job state after: {state}")

    def _requeue(self, va: ValidatedAction, run: _Run, before: dict[str, Any], hold: bool) -> tuple[str, str]:
        argv = requeue_argv(va.job_id, hold=hold)
        verb = argv[1]
        res = run.add(self.runner.run(*argv))
        if not res.ok:
            return "failed", f"scontrol {verb} failed: {res.stderr.strip()}"
        seen: dict[str, Any] = {}

        def requeued() -> bool:
            job = self.job_info(va.job_id)
            seen.update(job or {})
            ok = job is not None and job["restarts"] > before["restarts"]
            return ok and (not hold or job["priority"] == 0)

        if not self._wait(requeued):
            return "failed", (f"requeue not visible: Restarts={seen.get('restarts')} (before {before['restarts']}), "
                              f"state {seen.get('state')}")
        return "applied", (f"job {va.job_id} requeued{' and held' if hold else ''}: state {seen['state']}, "
                           f"Restarts {before['restarts']}→{seen['restarts']}, reason {seen.get('Reason', '')}")

    def _reschedule(self, va: ValidatedAction, run: _Run) -> tuple[str, str]:
        job = self.job_info(va.job_id)
        if job is None:
            return "failed", f"job {va.job_id} not found"
        if job["state"] not in ("RUNNING", "SUSPENDED"):
            return "skipped", f"job {va.job_id} is {job['state']}; only running jobs are requeued"
        return self._requeue(va, run, job, hold=va.hold)

    def _migrate(self, va: ValidatedAction, run: _Run) -> tuple[str, str]:
        job = self.job_info(va.job_id)
        if job is None:
            return "failed", f"job {va.job_id} not found"
        steps = []
        if va.nodes:
            status, detail = self._drain(va, run)
            if status == "failed":
                return "failed", f"drain step failed: {detail}"
            steps.append(detail)
        if job["state"] != "RUNNING":
            return "applied", "; ".join(steps + [f"job {va.job_id} is {job['state']}: draining keeps it off the nodes"])
        res = self._signal(va, run)
        steps.append(f"checkpoint signal {self.checkpoint_signal}: rc={res.returncode}")
        if self.migrate_grace_s > 0:
            self.sleep(self.migrate_grace_s)
        if self.migrate_hook:
            hook_argv = self.plan(va)[-1]  # HOOK JOBID NODE...
            hook = run.add(_run_hook(hook_argv[0], hook_argv[1:], self.runner.timeout_s, self.runner.env))
            if not hook.ok:
                return "failed", "; ".join(steps + [f"migrate hook failed: rc={hook.returncode}"])
            after = self.job_info(va.job_id)
            left = sorted(set(after["nodes"] if after else []) & set(va.nodes))
            if left:
                return "failed", "; ".join(steps + [f"job still on {','.join(left)} after the hook"])
            return "applied", "; ".join(steps + [f"hook moved job to {','.join(after['nodes']) if after else '?'}"])
        status, detail = self._requeue(va, run, job, hold=False)
        return status, "; ".join(steps + [detail])

    def _delay(self, va: ValidatedAction, run: _Run) -> tuple[str, str]:
        job = self.job_info(va.job_id)
        if job is None:
            return "failed", f"job {va.job_id} not found"
        if job["state"] != "PENDING":
            return "skipped", f"job {va.job_id} is {job['state']}; hold applies to pending jobs"
        if job["priority"] == 0:
            return "skipped", f"job {va.job_id} is already held ({job.get('Reason', '')})"
        res = run.add(self.runner.run(*hold_argv(va.job_id)))
        if not res.ok:
            return "failed", f"scontrol hold failed: {res.stderr.strip()}"
        seen: dict[str, Any] = {}
        ok = self._wait(lambda: bool(seen.update(self.job_info(va.job_id) or {}) or seen.get("priority") == 0))
        if not ok:
            return "failed", f"hold not visible: Priority={seen.get('priority')}"
        return "applied", f"job {va.job_id} held: Priority=0, reason {seen.get('Reason', '')}"

    def _release(self, va: ValidatedAction, run: _Run) -> tuple[str, str]:
        job = self.job_info(va.job_id)
        if job is None:
            return "failed", f"job {va.job_id} not found"
        if job["state"] != "PENDING" or job["priority"] != 0:
            return "skipped", f"job {va.job_id} is {job['state']} and not held"
        res = run.add(self.runner.run(*release_argv(va.job_id)))
        if not res.ok:
            return "failed", f"scontrol release failed: {res.stderr.strip()}"
        seen: dict[str, Any] = {}
        ok = self._wait(lambda: bool(seen.update(self.job_info(va.job_id) or {}) or (seen.get("priority") or 0) > 0))
        if not ok:
            return "failed", f"release not visible: Priority={seen.get('priority')}"
        return "applied", f"job {va.job_id} released: Priority={seen['priority']}, state {seen['state']}"


def _nodes_text(info: Mapping[str, Mapping[str, Any]], nodes) -> str:
    return "; ".join(f"{n} {info.get(n, {}).get('state', '?')} ({info.get(n, {}).get('reason', '')})" for n in nodes)


def _run_hook(executable: str, args: list[str], timeout_s: float, env: Mapping[str, str]) -> CommandResult:
    t0 = time.monotonic()
    try:
        done = subprocess.run([executable, *args], capture_output=True, text=True, timeout=timeout_s, env=dict(env),
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired as err:
        return CommandResult([executable, *args], None, _text(err.stdout), f"timed out after {timeout_s:g} s",
                             time.monotonic() - t0)
    return CommandResult([executable, *args], done.returncode, done.stdout, done.stderr, time.monotonic() - t0)
