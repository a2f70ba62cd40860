"""Fault-suite harness: replay recorded telemetry through a supervised worker subprocess,
inject a fault, and collect what came out (predictions, actions, acks, adapter executions,
dead letters) for comparison with a clean run.

The harness is the worker's supervisor: a worker that exits (or is killed by the fault) is
started again, and every exit the fault did not cause is recorded.  Recovery time of a fault
is the wall time from the end of the fault (restart, thaw) until the worker's output topics
grow again (checked about once a second; NaN when they never grew).
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from hpcguard.connectors.kafka import ensure_topics
from hpcguard.settings import TopicSettings
from hpcguard.streams.topics import TopicNames

OUTPUTS = ("predictions", "actions", "acks", "io_degradation")
#: outputs compared and reported but not yet required exact across a kill -9 (docs/faults.md, "Known gaps")
REPORTED_ONLY = ("io_degradation",)
HOSTILE_KEY = b"hostile"  # key of every record a test sends as hostile input (outputs skip them)


@dataclass
class Outcome:
    """What one run published and executed."""

    records: dict[str, list[tuple[dict, float]]]  # topic kind → (record, publish wall time s)
    executions: list[str]  # action ids in the adapter's execution log, in order
    exits: list[int] = field(default_factory=list)  # worker exit codes the fault did not cause
    recoveries_s: list[float] = field(default_factory=list)

    def keys(self, kind: str) -> Counter:
        """Identity of each output record: predictions by (node, time) and what they said (warn, probability),
        IO verdicts by (system, window) and what they said (features, verdict), actions/acks by action id."""
        recs = [r for r, _ in self.records[kind]]
        if kind == "predictions":
            return Counter((r["node"], r["time"], r["model"], r["warn"], round(float(r["failure_probability"]), 9))
                           for r in recs)
        if kind == "io_degradation":  # CanarIO's verdict per file system and window, with the window's features
            return Counter((r["system"], r["window_end"], r["degraded"], round(float(r["probability"]), 9),
                            # 9 significant digits: a restart changes how a window's sums are batched (last-bit noise)
                            json.dumps({k: float(f"{v:.9g}") if isinstance(v, float) else v
                                        for k, v in (r.get("features") or {}).items()}, sort_keys=True)) for r in recs)
        return Counter(r["action_id"] for r in recs)

    def compare(self, clean: "Outcome") -> dict[str, dict[str, int]]:
        """Lost (in the clean run, not here) and duplicated (more than once here) per output."""
        out = {}
        for kind in OUTPUTS:
            mine, ref = self.keys(kind), clean.keys(kind)
            out[kind] = {"clean": len(ref), "lost": len(set(ref) - set(mine)), "extra": len(set(mine) - set(ref)),
                         "duplicated": sum(n - 1 for n in mine.values() if n > 1)}
            if out[kind]["lost"] or out[kind]["extra"]:  # what differs, for the report (first few)
                out[kind]["examples"] = {"lost": [str(k)[:600] for k in sorted(set(ref) - set(mine), key=str)[:4]],
                                         "extra": [str(k)[:600] for k in sorted(set(mine) - set(ref), key=str)[:4]]}
        ex, ref_ex = Counter(self.executions), Counter(clean.executions)
        out["executions"] = {"clean": len(ref_ex), "lost": len(set(ref_ex) - set(ex)),
                             "extra": len(set(ex) - set(ref_ex)),
                             "duplicated": sum(n - 1 for n in ex.values() if n > 1)}
        return out


def read_topic(bootstrap: str, topic: str, timeout_ms: int = 3000) -> list[tuple[dict | bytes, float, int]]:
    """Every record of ``topic`` but the hostile ones the tests sent: (JSON value or raw bytes, timestamp s, offset)."""
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None,
                      enable_auto_commit=False, consumer_timeout_ms=timeout_ms)
    out = []
    try:
        for m in c:
            if m.key == HOSTILE_KEY:
                continue
            try:
                value = json.loads(m.value)
            except (ValueError, RecursionError):
                value = m.value
            out.append((value, m.timestamp / 1000.0, m.offset))
    finally:
        c.close()
    return out


class FaultRun:
    """One replay of ``data_dir`` through a supervised ``hpcguard worker`` on its own topic prefix."""

    def __init__(self, bootstrap: str, data_dir: Path, model_dir: str, tmp: Path, speed: float = 60.0,
                 env: dict[str, str] | None = None, extra: tuple[str, ...] = (), adapter: str = "dry-run"):
        self.bootstrap, self.data_dir, self.tmp, self.speed = bootstrap, data_dir, tmp, speed
        tmp.mkdir(parents=True, exist_ok=True)
        self.prefix = f"f{uuid.uuid4().hex[:8]}"
        self.topics = TopicNames.from_settings(TopicSettings(prefix=self.prefix,
                                                             ldms_format=self.prefix + ".ldms.{schema}"))
        self.executions_log = tmp / "executions.log"
        self.audit_log = tmp / "audit.jsonl"
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", "HPCGUARD_TOPICS__PREFIX": self.prefix,
                    "HPCGUARD_TOPICS__LDMS_FORMAT": self.prefix + ".ldms.{schema}",
                    "HPCGUARD_ADAPTER__LEDGER": str(tmp / "ledger.sqlite"),
                    "HPCGUARD_LIVENESS__STALL_AFTER_S": "45", **(env or {})}
        self.worker_argv = [sys.executable, "-m", "hpcguard", "worker", "--bootstrap", bootstrap, "--model", model_dir,
                            "--app-id", f"app-{self.prefix}", "--data-dir", str(tmp / "state"),
                            "--audit-log", str(self.audit_log), "--adapter", adapter, *extra]
        if os.environ.get("HPCGUARD_FAULT_LOGLEVEL"):  # e.g. info: Faust's rebalance and recovery steps in worker.log
            self.worker_argv += ["--loglevel", os.environ["HPCGUARD_FAULT_LOGLEVEL"]]
        self.worker: subprocess.Popen | None = None
        self.replayer: subprocess.Popen | None = None
        self.exits: list[int] = []
        self.recoveries: list[list[float]] = []  # per fault: [wall time it ended, outputs then, seconds to recover]
        self.starts = 0
        self._log = open(tmp / "worker.log", "ab")

    # -- worker supervision ------------------------------------------------------------
    def start_worker(self) -> None:
        self.starts += 1
        self._log.write(f"\n===== worker start {self.starts} at {time.time():.3f} =====\n".encode())
        self._log.flush()
        self.worker = subprocess.Popen(self.worker_argv, stdout=self._log, stderr=subprocess.STDOUT, env=self.env,
                                       start_new_session=True)

    def kill_worker(self) -> None:
        """kill -9 of the worker's whole process group (the worker and any adapter child)."""
        proc, self.worker = self.worker, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def supervise(self) -> None:
        """Restart a worker that exited on its own, recording its exit status."""
        if self.worker is not None and self.worker.poll() is not None:
            self.exits.append(self.worker.returncode)
            self.start_worker()

    def mark_recovery(self) -> None:
        """The fault ended now: recovery lasts until the outputs grow again (broker timestamps are not used,
        a restarted broker may not keep them)."""
        ended = time.time()
        for _ in range(30):  # the restarted broker may take a few seconds to answer
            try:
                count = self._output_count()
                break
            except Exception:  # noqa: BLE001
                time.sleep(1.0)
        else:
            raise AssertionError(f"the broker did not answer within 30 s of the fault's end:\n{self.log_tail()}")
        self.recoveries.append([ended, count, math.nan])

    def _ends(self, kinds) -> list[int]:
        """End offsets of the ``kinds`` output topics (their record counts: the worker writes no transaction
        markers): one request, where reading an S3-backed topic whole takes longer than a short ``read_topic``
        waits.  A truncated count once saw half the predictions when all were written, so the broker restart
        came after the last output and no recovery could be seen (CI of stop 69)."""
        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False,
                          request_timeout_ms=30000)
        try:
            tps = [TopicPartition(getattr(self.topics, k), 0) for k in kinds]
            ends = c.end_offsets(tps)
            return [ends[tp] for tp in tps]
        finally:
            c.close()

    def _output_count(self) -> int:
        return sum(self._ends(OUTPUTS))

    def _watch_recovery(self) -> None:
        pending = [r for r in self.recoveries if math.isnan(r[2])]
        if pending and time.time() - getattr(self, "_watched_at", 0.0) >= 1.0:
            self._watched_at = time.time()
            try:
                n = self._output_count()
            except Exception:  # noqa: BLE001 — the broker is still down
                return
            for r in pending:
                if n > r[1]:
                    r[2] = round(time.time() - r[0], 1)

    # -- replay ------------------------------------------------------------------------
    def start_replay(self) -> None:
        argv = [sys.executable, "-m", "hpcguard", "replay", str(self.data_dir), "--bootstrap", self.bootstrap,
                "--prefix", self.prefix, "--json"]
        if self.speed:
            argv += ["--speed", str(self.speed)]
        self.replayer = subprocess.Popen(argv, stdout=open(self.tmp / "replay.json", "wb"),
                                         stderr=open(self.tmp / "replay.log", "wb"), env=self.env)

    def replay_done(self) -> bool:
        return self.replayer is not None and self.replayer.poll() is not None

    def wait_outputs(self, kind: str, count: int, timeout_s: float = 400) -> bool:
        """Sleep (supervising) until the worker published ``count`` records of ``kind`` (a point of its work);
        False when the replay ended and the outputs stopped growing first (the fault then comes late)."""
        deadline = time.monotonic() + timeout_s
        last, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            n = self._ends([kind])[0]
            if n >= count:
                return True
            if n != last:
                last, since = n, time.monotonic()
            elif self.replay_done() and time.monotonic() - since > 60:
                return False
            self.sleep(1.0)
        return False

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.supervise()
            self._watch_recovery()
            time.sleep(0.2)

    # -- the run -----------------------------------------------------------------------
    def __enter__(self) -> "FaultRun":
        ensure_topics(_kafka(self.bootstrap), self.topics.all())
        self.start_worker()
        return self

    def __exit__(self, *exc) -> None:
        if self.replayer is not None and self.replayer.poll() is None:
            self.replayer.kill()
            self.replayer.wait()
        if self.worker is not None and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGTERM)
            try:
                self.worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.worker.pid, signal.SIGKILL)
                self.worker.wait()
        self._log.close()

    def settle(self, quiet_s: float = 25.0, timeout_s: float = 400.0) -> None:
        """Wait for the replay to end and the outputs to stop growing for ``quiet_s``."""
        deadline = time.monotonic() + timeout_s
        while not self.replay_done() and time.monotonic() < deadline:
            self.sleep(1.0)
        assert self.replayer.returncode == 0, (self.tmp / "replay.log").read_text()[-2000:]
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            self.sleep(5.0)
            sizes = self._sizes()
            if sizes != last or not self.caught_up():
                last, since = sizes, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return
        raise AssertionError(f"not settled after {timeout_s} s (records not committed: "
                             f"{getattr(self, 'last_commit_gap', '?')}):\n{self.log_tail()}")

    def caught_up(self) -> bool:
        """The worker's group committed every replayed record of the raw input topics."""
        published = {t: n for t, n in json.loads((self.tmp / "replay.json").read_text())["published"].items()
                     if not t.endswith(".dlq")}
        # why consumers that never subscribe: they read the groups' committed offsets without joining the groups;
        # LDMS rows have a consumer group of their own (streams/agents_normalize.py)
        done: dict[str, int] = {}
        for group in (f"app-{self.prefix}", f"app-{self.prefix}-ldms"):
            c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=group, enable_auto_commit=False)
            try:
                for t in published:
                    done[t] = max(done.get(t, 0), c.committed(TopicPartition(t, 0)) or 0)
            except Exception:  # noqa: BLE001 — the group is (re)joining: not caught up
                return False
            finally:
                c.close()
        self.last_commit_gap = {t: n - done.get(t, 0) for t, n in published.items() if done.get(t, 0) < n}
        return not self.last_commit_gap

    def _sizes(self) -> tuple:
        return (*self._ends(OUTPUTS), len(self.execution_ids()))

    def execution_ids(self) -> list[str]:
        """Action ids the adapter executed: the command adapter's log, else the dry-run audit log."""
        if self.executions_log.exists():
            return [line.split()[1] for line in self.executions_log.read_text().splitlines()
                    if line.startswith("done ")]
        if not self.audit_log.exists():
            return []
        out = []
        for line in self.audit_log.read_text().splitlines():
            try:
                out.append(json.loads(line)["action"]["action_id"])
            except (ValueError, KeyError, TypeError):
                continue
        return out

    def outcome(self) -> Outcome:
        records = {}
        for kind in OUTPUTS:
            records[kind] = [(v, ts) for v, ts, _ in read_topic(self.bootstrap, getattr(self.topics, kind))
                             if isinstance(v, dict)]
        return Outcome(records=records, executions=self.execution_ids(), exits=list(self.exits),
                       recoveries_s=[r[2] for r in self.recoveries])

    def dead_letters(self) -> list[dict]:
        return [v for v, _, _ in read_topic(self.bootstrap, self.topics.dlq) if isinstance(v, dict)]

    def log_tail(self, n: int = 3000) -> str:
        if not self._log.closed:
            self._log.flush()
        return (self.tmp / "worker.log").read_text(errors="replace")[-n:]

    def produce_raw(self, items: list[tuple[str, bytes]]) -> list[tuple[str, int]]:
        """Publish raw values (``(topic, bytes)``); returns their (topic, offset)."""
        p = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        futures = [(t, p.send(t, key=HOSTILE_KEY, value=v)) for t, v in items]
        p.flush()
        out = [(t, f.get(timeout=30).offset) for t, f in futures]
        p.close()
        return out


def _kafka(bootstrap: str):
    from hpcguard.settings import KafkaSettings

    return KafkaSettings(bootstrap=bootstrap)


def write_report(name: str, report: dict) -> None:
    """Append one fault's note (injected, lost, duplicated, recovery) to $HPCGUARD_FAULT_REPORT, if set."""
    path = os.environ.get("HPCGUARD_FAULT_REPORT")
    print(f"\nFAULT {name}: {json.dumps(report)}")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"fault": name, **report}) + "\n")


def check_fault(name: str, run: FaultRun, out: Outcome, clean: Outcome, injected: str) -> None:
    """0 lost, 0 duplicated outputs; 0 worker exits the fault did not cause.

    A worker killed with -9 comes back through a rebalance and a table recovery: it must settle on its
    own, with no stall exit (75) of the liveness guard after it (the rebalance's lost acknowledgements
    are re-listed once, ``streams.worker.fill_gaps_once``).
    """
    diff = out.compare(clean)
    write_report(name, {"injected": injected, "diff": diff, "exits": out.exits, "recovery_s": out.recoveries_s})
    assert out.exits == [], f"worker exits the fault did not cause: {out.exits}\n{run.log_tail()}"
    for kind in (*OUTPUTS, "executions"):
        if kind in REPORTED_ONLY:
            continue
        assert diff[kind]["lost"] == 0, f"{name}: lost {kind}: {diff}"
        assert diff[kind]["duplicated"] == 0, f"{name}: duplicated {kind}: {diff}"


def simulated_recording(root: Path, nodes: int, hours: float, seed: int, mtbf_hours: float,
                        governor: Path) -> tuple[Path, str]:
    """(data directory, baseline model directory) of a simulated recording with precursor failures; the model
    is learned on a separate seed.  ``governor``: the safety governor's settings for it (written here)."""
    hpc = [sys.executable, "-m", "hpcguard"]
    subprocess.run(hpc + ["simulate", "telemetry", "--nodes", str(nodes), "--hours", str(hours), "--seed", str(seed),
                          "--mtbf-hours", str(mtbf_hours), "--precursor-fraction", "1", "--out", str(root / "data")],
                   check=True, capture_output=True)
    subprocess.run(hpc + ["simulate", "telemetry", "--nodes", "8", "--hours", "3", "--seed", "99", "--out",
                          str(root / "history")], check=True, capture_output=True)
    subprocess.run(hpc + ["train", "baseline", "--data", str(root / "history"), "--out", str(root / "model")],
                   check=True, capture_output=True)
    # the recording is from 2023: its action deadlines are years old, which the governor refuses as stale;
    # on a cluster this small the default drain ceiling (10 %) would refuse every drain
    governor.write_text(f"stale_grace_s = 1e10\ntotal_nodes = {nodes}\nmax_drained_fraction = 1.0\n")
    return root / "data", str(root / "model")
