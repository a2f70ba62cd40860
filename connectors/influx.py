"""InfluxDB sink: canonical records → line-protocol points → InfluxDB 2.x or 1.x.

Two backends share one buffer:

* **2.x** (``version = 2``): ``influxdb-client``'s synchronous write API — URL, org,
  bucket, token.
* **1.x** (``version = 1``): HTTP ``POST /write?db=…&rp=…&precision=ns`` with ``requests``
  — database, retention policy, username/password (HTTP basic auth).  With
  ``create_database`` the sink issues ``CREATE DATABASE`` once when the server answers
  "database not found".

Delivery
--------
``add()`` only converts and buffers (no network I/O, never blocks on InfluxDB).  Points
leave the buffer in batches of ``batch_size``: from a background thread every
``flush_interval_s`` (or as soon as a batch is full), or when ``flush()`` is called.
A failed write keeps the batch at the head of the buffer and the next attempt waits
``backoff_s · 2^(failures−1)`` (capped at ``backoff_max_s``); ``flush()`` called
explicitly tries at once.  The buffer holds at most ``buffer_points`` points: when
InfluxDB stays away longer than that, the *oldest* points are dropped and counted
(``stats["dropped_overflow"]`` and ``hpcguard_sink_points_total{outcome="dropped_overflow"}``)
and a warning is logged — never silently.  A batch InfluxDB refuses as malformed (HTTP
400/413/422, e.g. a field type conflict) is not retried; it is counted as ``rejected``
and logged.  ``close()`` keeps retrying until its timeout and counts what is still
buffered then as ``dropped_unsent``.

Threading
---------
Thread-safe: ``add``, ``flush``, ``stats`` and ``close`` may be called from any thread;
writes are serialised.  From asyncio (a Faust agent) call ``add()`` directly and leave
writing to the background thread, or run ``flush`` in an executor
(``await loop.run_in_executor(None, sink.flush)``) — it blocks for up to ``timeout_s``.

Example
-------
>>> sink = InfluxSink(_ListWriter(), background=False)
>>> sink.add("NodeSample", {"node": "n1", "time": 1.0, "source": "ipmi", "values": {"cpu_temp": 50.0}})
1
>>> sink.flush(), sink.stats["written"]
(1, 1)
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Mapping, Protocol

from hpcguard.connectors.lineprotocol import LineProtocolError, SampleDownsampler, to_line
from hpcguard.connectors.metrics import SINK_POINTS
from hpcguard.settings import InfluxSettings

log = logging.getLogger(__name__)

OUTCOMES = ("written", "retried", "dropped_overflow", "rejected", "dropped_unsent", "downsampled")
#: Canonical topics a sink agent reads (``streams.topics.TopicNames`` attributes) → record kind.
SINK_TOPICS: dict[str, str] = {
    "samples_ipmi": "NodeSample", "samples_io": "NodeSample", "samples_os": "NodeSample",
    "predictions": "NodePrediction", "io_degradation": "IoDegradation", "actions": "Action",
    "acks": "ActionAck", "probes": "ProbeResult",
}


class InfluxWriteError(Exception):
    """A write failed.  ``retryable`` is False when InfluxDB refused the data itself."""

    def __init__(self, message: str, retryable: bool = True, status: int | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class Writer(Protocol):
    """What a backend does: write newline-joined points, or raise :class:`InfluxWriteError`."""

    def write(self, body: str) -> None: ...

    def close(self) -> None: ...


_PERMANENT = {400, 413, 422}  # the data (or its size) is the problem: retrying cannot help


class V1Writer:
    """InfluxDB 1.x ``/write`` over HTTP.

    Parameters
    ----------
    url
        ``http://host:8086`` (a path prefix is kept).
    database, retention_policy
        Target database and retention policy (empty → the database's default policy).
    username, password
        HTTP basic auth when ``username`` is set.
    create_database
        On "database not found" send ``CREATE DATABASE`` once, then retry the write.
    """

    def __init__(self, url: str, database: str, retention_policy: str = "", username: str = "",
                 password: str = "", timeout_s: float = 10.0, create_database: bool = True):
        import requests

        if not url:
            raise ValueError("InfluxDB URL is empty")
        if not database:
            raise ValueError("InfluxDB 1.x needs a database name (influx.database)")
        self.url = url.rstrip("/")
        self.database = database
        self.retention_policy = retention_policy
        self.timeout_s = timeout_s
        self.create_database = create_database
        self._session = requests.Session()
        if username:
            self._session.auth = (username, password)

    def write(self, body: str) -> None:
        import requests

        params = {"db": self.database, "precision": "ns"}
        if self.retention_policy:
            params["rp"] = self.retention_policy
        for attempt in (1, 2):
            try:
                resp = self._session.post(f"{self.url}/write", params=params, data=body.encode("utf-8"),
                                          timeout=self.timeout_s)
            except requests.RequestException as exc:
                raise InfluxWriteError(f"InfluxDB {self.url} unreachable: {exc}") from None
            if resp.status_code == 204:
                return
            text = resp.text.strip()[:500]
            if (resp.status_code == 404 and "database not found" in text and self.create_database
                    and attempt == 1):
                self._create_database()
                continue
            raise InfluxWriteError(f"InfluxDB {self.url}/write answered {resp.status_code}: {text}",
                                   retryable=resp.status_code not in _PERMANENT, status=resp.status_code)

    def _create_database(self) -> None:
        import requests

        name = self.database.replace("\\", "\\\\").replace('"', '\\"')
        try:
            resp = self._session.post(f"{self.url}/query", data={"q": f'CREATE DATABASE "{name}"'},
                                      timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise InfluxWriteError(f"InfluxDB {self.url} unreachable: {exc}") from None
        if resp.status_code != 200 or '"error"' in resp.text:
            raise InfluxWriteError(f"CREATE DATABASE {self.database!r} failed ({resp.status_code}): "
                                   f"{resp.text.strip()[:300]}", status=resp.status_code)
        log.info("created InfluxDB database %r on %s", self.database, self.url)

    def close(self) -> None:
        self._session.close()


class V2Writer:
    """InfluxDB 2.x through ``influxdb-client`` (synchronous write API, nanosecond precision)."""

    def __init__(self, url: str, org: str, bucket: str, token: str, timeout_s: float = 10.0):
        from influxdb_client import InfluxDBClient
        from influxdb_client.client.write_api import SYNCHRONOUS

        if not url:
            raise ValueError("InfluxDB URL is empty")
        if not org or not bucket:
            raise ValueError("InfluxDB 2.x needs influx.org and influx.bucket")
        self.url, self.org, self.bucket = url, org, bucket
        self._client = InfluxDBClient(url=url, token=token, org=org, timeout=int(timeout_s * 1000))
        self._api = self._client.write_api(write_options=SYNCHRONOUS)

    def write(self, body: str) -> None:
        from influxdb_client import WritePrecision
        from influxdb_client.rest import ApiException

        try:
            self._api.write(bucket=self.bucket, org=self.org, record=body, write_precision=WritePrecision.NS)
        except ApiException as exc:
            raise InfluxWriteError(f"InfluxDB {self.url} answered {exc.status}: {str(exc.body)[:500]}",
                                   retryable=exc.status not in _PERMANENT, status=exc.status) from None
        except Exception as exc:  # urllib3 connection/timeout errors and the like
            raise InfluxWriteError(f"InfluxDB {self.url} unreachable: {exc}") from None

    def close(self) -> None:
        self._client.close()


class _ListWriter:
    """In-memory writer for examples: keeps every body written."""

    def __init__(self) -> None:
        self.bodies: list[str] = []

    def write(self, body: str) -> None:
        self.bodies.append(body)

    def close(self) -> None:
        pass


class InfluxSink:
    """Buffered, batching, retrying InfluxDB writer for canonical records.

    Parameters
    ----------
    writer
        A backend (:class:`V1Writer`, :class:`V2Writer`); usually built by :meth:`from_settings`.
    batch_size
        Points per write request.
    flush_interval_s
        Period of the background flush.
    buffer_points
        Most points held while InfluxDB is unreachable; beyond it the oldest are dropped (counted).
    backoff_s, backoff_max_s
        First retry delay after a failed write and its cap (doubles per consecutive failure).
    sample_every_s
        Keep at most one ``NodeSample`` per node and source per this many seconds (0 = all).
    background
        Start the background flush thread now.
    """

    def __init__(self, writer: Writer, batch_size: int = 1000, flush_interval_s: float = 2.0,
                 buffer_points: int = 100_000, backoff_s: float = 0.5, backoff_max_s: float = 30.0,
                 sample_every_s: float = 0.0, background: bool = True):
        if batch_size < 1 or buffer_points < 1:
            raise ValueError("batch_size and buffer_points must be >= 1")
        if flush_interval_s <= 0 or backoff_s <= 0 or backoff_max_s < backoff_s:
            raise ValueError("flush_interval_s, backoff_s must be > 0 and backoff_max_s >= backoff_s")
        self.writer = writer
        self.batch_size = int(batch_size)
        self.flush_interval_s = float(flush_interval_s)
        self.buffer_points = int(buffer_points)
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self._downsampler = SampleDownsampler(sample_every_s)
        self._buffer: collections.deque[str] = collections.deque()
        self._lock = threading.Lock()  # buffer, counters, downsampler
        self._write_lock = threading.Lock()  # one write at a time
        self._counts = dict.fromkeys(("queued",) + OUTCOMES, 0)
        self._failures = 0
        self._next_attempt = 0.0
        self._last_error = ""
        self._last_write = None
        self._closed = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if background:
            self.start()

    @classmethod
    def from_settings(cls, settings: InfluxSettings, background: bool = True) -> "InfluxSink":
        """Build the sink for ``settings.influx`` (``version`` 1 or 2); an empty URL is an error."""
        s = settings
        if not s.url:
            raise ValueError("InfluxDB sink needs influx.url (HPCGUARD_INFLUX__URL)")
        if s.version == 2:
            writer: Writer = V2Writer(s.url, s.org, s.bucket, s.token, timeout_s=s.timeout_s)
        elif s.version == 1:
            writer = V1Writer(s.url, s.database, s.retention_policy, s.username, s.password,
                              timeout_s=s.timeout_s, create_database=s.create_database)
        else:
            raise ValueError(f"influx.version must be 1 or 2, got {s.version}")
        return cls(writer, batch_size=s.batch_size, flush_interval_s=s.flush_interval_s,
                   buffer_points=s.buffer_points, backoff_s=s.backoff_s, backoff_max_s=s.backoff_max_s,
                   sample_every_s=s.sample_every_s, background=background)

    # --- input ------------------------------------------------------------------------------------
    def add(self, record_kind: str, record: Mapping[str, Any]) -> int:
        """Buffer one record as a point; returns 1, or 0 when downsampling skipped it.

        ``record_kind`` is the record class name (``NodeSample``, ``NodePrediction``,
        ``IoDegradation``, ``Action``, ``ActionAck``, ``ProbeResult``); ``record`` its fields
        (``rec.asdict()``).  A record that cannot become a point raises
        :class:`~hpcguard.connectors.lineprotocol.LineProtocolError` (a ``ValueError``).
        """
        if self._closed:
            raise RuntimeError("InfluxSink is closed")
        line = to_line(record_kind, record)
        with self._lock:
            if record_kind == "NodeSample" and not self._downsampler.keep(
                    str(record["node"]), str(record["source"]), float(record["time"])):
                self._count("downsampled", 1)
                return 0
            self._buffer.append(line)
            self._count("queued", 1)
            self._trim()
            full = len(self._buffer) >= self.batch_size
        if full:
            self._wake.set()
        return 1

    def add_record(self, record: Any) -> int:
        """Buffer a Faust record: ``add(type(record).__name__, record.asdict())``."""
        return self.add(type(record).__name__, record.asdict())

    # --- output -----------------------------------------------------------------------------------
    def flush(self) -> int:
        """Write everything buffered now, batch by batch; returns the points written.

        Stops at the first failed batch (kept for the next attempt; see ``stats["last_error"]``).
        """
        written = 0
        with self._write_lock:
            while True:
                with self._lock:
                    n = min(self.batch_size, len(self._buffer))
                    batch = [self._buffer.popleft() for _ in range(n)]
                if not batch:
                    return written
                try:
                    self.writer.write("\n".join(batch))
                except InfluxWriteError as exc:
                    self._failed(batch, exc)
                    return written
                with self._lock:
                    self._count("written", len(batch))
                    self._failures = 0
                    self._next_attempt = 0.0
                    self._last_write = time.time()
                written += len(batch)

    def _failed(self, batch: list[str], exc: InfluxWriteError) -> None:
        with self._lock:
            self._last_error = str(exc)
            if not exc.retryable:
                self._count("rejected", len(batch))
                log.error("InfluxDB refused %d points (not retried): %s", len(batch), exc)
                return
            self._buffer.extendleft(reversed(batch))
            self._count("retried", len(batch))
            self._failures += 1
            delay = min(self.backoff_max_s, self.backoff_s * 2 ** (self._failures - 1))
            self._next_attempt = time.monotonic() + delay
            dropped = self._trim()
            log.warning("InfluxDB write failed (%d in a row, %d points buffered, %d dropped so far); retry in "
                        "%.1f s: %s", self._failures, len(self._buffer), self._counts["dropped_overflow"],
                        delay, exc)
            if dropped:
                log.error("InfluxDB sink buffer full (%d points): dropped %d oldest points",
                          self.buffer_points, dropped)

    def _trim(self) -> int:
        """Drop the oldest points beyond the bound (lock held); returns how many."""
        excess = len(self._buffer) - self.buffer_points
        for _ in range(max(excess, 0)):
            self._buffer.popleft()
        if excess > 0:
            self._count("dropped_overflow", excess)
            if self._counts["dropped_overflow"] == excess:
                log.error("InfluxDB sink buffer full (%d points): dropping oldest points", self.buffer_points)
        return max(excess, 0)

    def _count(self, outcome: str, n: int) -> None:
        self._counts[outcome] += n
        if outcome != "queued":
            SINK_POINTS.labels(outcome=outcome).inc(n)

    # --- background flushing ----------------------------------------------------------------------
    def start(self) -> "InfluxSink":
        """Start the background flush thread (idempotent)."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="hpcguard-influx-sink", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                wait = max(self._next_attempt - time.monotonic(), 0.0) or self.flush_interval_s
            self._wake.wait(wait)
            self._wake.clear()
            if self._stop.is_set():
                break
            if time.monotonic() >= self._next_attempt:
                self.flush()

    def close(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """Stop the thread, retry (with backoff) until empty or ``timeout_s``; returns the final stats.

        Points still buffered at the timeout are counted as ``dropped_unsent`` and logged.
        """
        if self._closed:
            return self.stats
        self._closed = True
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        while True:
            self.flush()
            with self._lock:
                left = len(self._buffer)
                wait = self._next_attempt - time.monotonic()
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(max(0.01, min(wait, deadline - time.monotonic())))
        with self._lock:
            if left:
                self._buffer.clear()
                self._count("dropped_unsent", left)
                log.error("InfluxDB sink closed with %d unsent points (last error: %s)", left, self._last_error)
        self.writer.close()
        return self.stats

    @property
    def stats(self) -> dict[str, Any]:
        """Counters per outcome plus ``buffered``, ``consecutive_failures``, ``last_error``, ``last_write``."""
        with self._lock:
            return {**self._counts, "buffered": len(self._buffer), "consecutive_failures": self._failures,
                    "last_error": self._last_error, "last_write": self._last_write}

    def __enter__(self) -> "InfluxSink":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["InfluxSink", "InfluxWriteError", "LineProtocolError", "V1Writer", "V2Writer", "OUTCOMES", "SINK_TOPICS"]
