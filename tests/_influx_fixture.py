"""A real InfluxDB 1.x (Debian's ``influxdb`` 1.6) for the sink tests.

The ``influxdb`` fixture starts one ``influxd`` per test session with its own
configuration, meta/data/wal directories and free ports (HTTP and RPC) on loopback,
and stops it at the end.  ``.ci/influx-setup.sh`` installs the package; without
``influxd`` on PATH the tests that need it are skipped with that reason.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

CONFIG = """\
reporting-disabled = true
bind-address = "127.0.0.1:{rpc_port}"

[meta]
  dir = "{root}/meta"

[data]
  dir = "{root}/data"
  wal-dir = "{root}/wal"
  query-log-enabled = false

[monitor]
  store-enabled = false

[http]
  enabled = true
  bind-address = "127.0.0.1:{http_port}"
  log-enabled = false
  pprof-enabled = false

[continuous_queries]
  enabled = false

[subscriber]
  enabled = false

[logging]
  level = "warn"
  suppress-logo = true
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class InfluxServer:
    """One ``influxd`` process on fixed directories and ports; can be stopped and restarted."""

    root: Path
    http_port: int = field(default_factory=free_port)
    rpc_port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self, timeout_s: float = 30.0) -> "InfluxServer":
        conf = self.root / "influxdb.conf"
        conf.write_text(CONFIG.format(root=self.root, http_port=self.http_port, rpc_port=self.rpc_port))
        log = open(self.root / "influxd.log", "ab")
        self.process = subprocess.Popen([shutil.which("influxd") or "influxd", "run", "-config", str(conf)],
                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"influxd exited ({self.process.returncode}):\n{self.log_tail()}")
            try:
                if requests.get(f"{self.url}/ping", timeout=0.5).status_code == 204:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"influxd did not answer /ping within {timeout_s} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def log_tail(self, n: int = 2000) -> str:
        p = self.root / "influxd.log"
        return p.read_text(errors="replace")[-n:] if p.exists() else ""

    def query(self, q: str, db: str | None = None, epoch: str = "ns") -> list[dict]:
        """Run InfluxQL; returns the ``results`` list (raises on an HTTP or statement error)."""
        params = {"q": q, "epoch": epoch}
        if db:
            params["db"] = db
        resp = requests.post(f"{self.url}/query", data=params, timeout=10)
        resp.raise_for_status()
        results = resp.json()["results"]
        errors = [r["error"] for r in results if "error" in r]
        if errors:
            raise RuntimeError(f"InfluxQL error for {q!r}: {errors}")
        return results

    def rows(self, q: str, db: str) -> list[dict]:
        """Rows of every series of the first statement, as dicts (tags merged in)."""
        out = []
        for series in self.query(q, db)[0].get("series", []):
            for values in series["values"]:
                row = dict(zip(series["columns"], values))
                row.update(series.get("tags", {}))
                out.append(row)
        return out


@pytest.fixture(scope="session")
def influxdb(tmp_path_factory):
    """A running :class:`InfluxServer` (InfluxDB 1.6) for the test session."""
    if not shutil.which("influxd"):
        why = "influxd not installed (run .ci/influx-setup.sh: apt-get install influxdb)"
        if os.environ.get("CI"):
            pytest.fail(why)  # CI installs it: a missing server there is a broken setup, not a skip
        pytest.skip(why)
    server = InfluxServer(tmp_path_factory.mktemp("influxdb"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


__all__ = ["InfluxServer", "free_port", "influxdb"]
