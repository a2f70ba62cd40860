"""A real single-host Slurm cluster for the adapter tests (fixture ``slurm_cluster``).

Starts ``munged`` (when no munge socket answers), one ``slurmctld`` and one ``slurmd -N nX``
per node from a ``slurm.conf`` in a per-run temporary directory: its own ClusterName,
StateSaveLocation, SlurmdSpoolDir and free ports, so runs never collide and a leftover
state directory cannot trip CLUSTER NAME MISMATCH.  Needs root and Debian's
``slurm-wlm`` + ``munge`` (``.ci/slurm-setup.sh`` installs them).  Without them the
tests skip, unless ``CI`` is set: then the fixture fails loudly.  The run directory
(configuration, state, logs) is removed at teardown unless ``HPCGUARD_KEEP_SLURM=1``.

Manual use (prints the SLURM_CONF to export, stops on Enter)::

    .venv/bin/python tests/_slurm_fixture.py
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "sinfo", "scancel")
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")


def missing_requirements() -> str:
    """Why a real Slurm cannot start here ('' when it can)."""
    if os.geteuid() != 0:
        return "the Slurm fixture must run as root (slurmd needs it)"
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        return f"missing binaries {', '.join(missing)} (run .ci/slurm-setup.sh: apt-get install slurm-wlm munge)"
    return ""


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


@dataclass
class SlurmCluster:
    """Handle on the running cluster; ``env`` holds ``SLURM_CONF`` for commands."""

    root: Path
    conf: Path
    nodes: list[str]
    cluster_name: str
    procs: list[subprocess.Popen] = field(default_factory=list)
    started_munged: int | None = None
    startup_s: float = 0.0

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess:
        """Run a Slurm client command (argv list) against this cluster."""
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout, check=check)

    def sbatch(self, script: str, *options: str) -> str:
        """Submit a batch script text; return the job id."""
        path = self.root / f"job-{uuid.uuid4().hex[:8]}.sh"
        path.write_text(script)
        out = self.run("sbatch", "--parsable", f"--chdir={self.root}", f"--output={self.root}/slurm-%j.out",
                       *options, str(path)).stdout
        return out.strip().split(";")[0]

    def job_field(self, job_id: str, key: str) -> str:
        text = self.run("scontrol", "show", "job", "-o", job_id).stdout
        for token in text.split():
            if token.startswith(key + "="):
                return token[len(key) + 1:]
        return ""

    def node_line(self, node: str) -> str:
        return self.run("scontrol", "show", "node", "-o", node).stdout

    def wait_for(self, predicate, timeout: float = 30.0, interval: float = 0.2, what: str = "condition"):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what() if callable(what) else what}")
            time.sleep(interval)

    def reset_nodes(self) -> None:
        """Cancel all jobs and resume drained nodes (between tests)."""
        self.run("scancel", "--full", "--quiet", "--user=root", check=False)
        self.wait_for(lambda: not self.run("squeue", "-h", "-o", "%i").stdout.strip(), timeout=30,
                      what="queue to empty")
        drained = self.run("sinfo", "-h", "-N", "-t", "drain", "-o", "%N", check=False).stdout.split()
        if drained:
            self.run("scontrol", "update", f"NodeName={','.join(sorted(set(drained)))}", "State=RESUME", check=False)
        self.wait_for(self._all_idle, timeout=30, what="nodes idle")

    def _all_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False).stdout.split("\n")
        states = dict(line.split() for line in out if line.strip())
        return all(states.get(n) == "idle" for n in self.nodes)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 5
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()  # slurmd may ignore SIGTERM while jobs are being cleaned up
                proc.wait(timeout=5)
        if self.started_munged:
            try:
                os.kill(self.started_munged, signal.SIGTERM)
            except ProcessLookupError:
                pass
        if not os.environ.get("HPCGUARD_KEEP_SLURM"):
            shutil.rmtree(self.root, ignore_errors=True)


def _ensure_munged(root: Path) -> int | None:
    """Start munged if its socket does not answer; return the pid we started (or None)."""
    if shutil.which("munge") and MUNGE_SOCKET.exists():
        if subprocess.run(["munge", "-n"], capture_output=True, timeout=10).returncode == 0:
            return None
    if not MUNGE_KEY.exists():
        MUNGE_KEY.parent.mkdir(parents=True, exist_ok=True)
        MUNGE_KEY.write_bytes(os.urandom(1024))
    for path, mode in ((MUNGE_KEY, 0o400), (MUNGE_KEY.parent, 0o700)):
        os.chmod(path, mode)
    for d in ("/run/munge", "/var/lib/munge", "/var/log/munge"):
        Path(d).mkdir(parents=True, exist_ok=True)
    pidfile = root / "munged.pid"
    subprocess.run(["munged", "--force", f"--pid-file={pidfile}"], check=True, capture_output=True, timeout=20)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if MUNGE_SOCKET.exists() and subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
            return int(pidfile.read_text().strip())
        time.sleep(0.1)
    raise RuntimeError("munged did not come up")



def slurm_conf_text(name: str, root: Path, ctl_port: int, node_ports: dict[str, int], *, return_to_service: int,
                    job_requeue: int, slurmd_timeout: int, accounting: str = "") -> str:
    """A one-host test cluster's ``slurm.conf``: slurmctld on ``ctl_port``, a slurmd per node on its port,
    state, spool and logs under ``root``; ``accounting``: the ``AccountingStorage*`` lines (none: no
    accounting)."""
    host = socket.gethostname().split(".")[0]
    state, spool, logs = root / "state", root / "spool", root / "log"
    node_lines = "\n".join(f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={p} CPUs=1 RealMemory=500 "
                           "State=UNKNOWN" for n, p in node_ports.items())
    return f"""\
ClusterName={name}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctl_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={state}
SlurmdSpoolDir={spool}/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={logs}/slurmctld.log
SlurmdLogFile={logs}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MpiDefault=none
ReturnToService={return_to_service}
JobRequeue={job_requeue}
KillWait=2
MinJobAge=30
SlurmctldTimeout=30
SlurmdTimeout={slurmd_timeout}
MessageTimeout=5
InactiveLimit=0
{accounting or "AccountingStorageType=accounting_storage/none"}
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
{node_lines}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""

def start_cluster(n_nodes: int = 4, root: Path | None = None, timeout: float = 60.0) -> SlurmCluster:
    """Start munged (if needed), slurmctld and ``n_nodes`` slurmd on this host."""
    t0 = time.monotonic()
    root = Path(root or tempfile.mkdtemp(prefix="hpcguard-slurm-"))
    os.chmod(root, 0o755)
    name = f"hg{uuid.uuid4().hex[:8]}"
    nodes = [f"n{i}" for i in range(1, n_nodes + 1)]
    ports = _free_ports(1 + n_nodes)
    state, spool, logs = root / "state", root / "spool", root / "log"
    for d in (state, spool, logs):
        d.mkdir(parents=True, exist_ok=True)
    conf = root / "slurm.conf"
    conf.write_text(slurm_conf_text(name, root, ports[0], dict(zip(nodes, ports[1:])), return_to_service=2,
                                    job_requeue=1, slurmd_timeout=12))
    cluster = SlurmCluster(root=root, conf=conf, nodes=nodes, cluster_name=name)
    try:
        cluster.started_munged = _ensure_munged(root)
        env = cluster.env
        cluster.procs.append(subprocess.Popen(["slurmctld", "-D", "-i", "-f", str(conf)], env=env,
                                              stdout=open(logs / "slurmctld.stdout", "w"), stderr=subprocess.STDOUT))
        for n in nodes:
            (spool / n).mkdir(exist_ok=True)
            cluster.procs.append(subprocess.Popen(["slurmd", "-D", "-N", n, "-f", str(conf)], env=env,
                                                  stdout=open(logs / f"slurmd-{n}.stdout", "w"),
                                                  stderr=subprocess.STDOUT))
        deadline = time.monotonic() + timeout
        while not cluster._all_idle():
            dead = [p.args for p in cluster.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                log = (logs / "slurmctld.log").read_text()[-2000:] if (logs / "slurmctld.log").exists() else ""
                raise RuntimeError(f"Slurm did not come up (exited: {dead}); slurmctld log tail:\n{log}")
            time.sleep(0.2)
    except BaseException:
        cluster.stop()
        raise
    cluster.startup_s = time.monotonic() - t0
    return cluster


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running 4-node Slurm cluster (session-scoped); skips without root/Slurm unless CI is set."""
    why = missing_requirements()
    if why:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"CI is set but a real Slurm cannot start: {why}")
        pytest.skip(f"real Slurm unavailable: {why}")
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


if __name__ == "__main__":
    c = start_cluster()
    print(f"export SLURM_CONF={c.conf}   # started in {c.startup_s:.1f} s; Enter stops it")
    try:
        input()
    finally:
        c.stop()
