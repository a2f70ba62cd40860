"""Replay recorded telemetry files into Kafka's raw topics, in time order.

Formats are detected per file (or forced): LDMS ``store_csv`` (header line or
``.HEADER`` altheader), FreeIPMI (CSV or table), ``ipmitool sdr`` / ``sdr elist``
(with poll or timestamp lines), a ``.tar.xz`` of per-node ``ipmitool sdr`` logs
(``sdr-archive``, streamed, its polls merged in time order across nodes), Telegraf
``ipmi_sensor`` line protocol, ``sacct`` dumps (any header holding ``JobID`` or ``JobIDRaw``
and ``State``, e.g. ``--format=ALL``; settings ``[sacct]``) and CanarIO ``probes.csv`` (completed probe runs,
published to ``<prefix>.probes`` as ``ProbeResult`` JSON at their end time).  A job's
batch script ``jobscripts/<job_id>.sh`` beside the sacct file (in its directory or the
one above, i.e. the recording directory) rides on the job's ``submit`` envelope as
``"script"``; ``jobscripts/`` itself is not replayed.  A directory is walked
recursively; ground-truth files (``failures.csv``, ``anomalies.csv``, ``meta.json``,
``degradation.csv``) are skipped and any other unknown file is rejected
(``unknown_format``).  Messages of all files are merged by record time.

Example
-------
>>> import pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "loadavg.csv").write_text("#Time,Time_usec,ProducerName,component_id,job_id,load1min,load5min,load15min\\n"
...                                    "15.0,0,n001,1,0,0.5,0.4,0.3\\n")
>>> [(m.topic, m.key, m.value["load1min"]) for m in iter_recorded([d])]
[('ldms.loadavg', 'n001', 0.5)]
>>> dry_run([d])["samples"]
{'ldms:loadavg': 1}
"""
from __future__ import annotations

import heapq
import json
from collections import deque
import math
import time as _time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from hpcguard.connectors.coverage import SensorCoverage
from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.fasrc import (SdrLineCache, add_scan_coverage, buffer_archive_polls, iter_archive_logs,
                                       scan_sdr_log)
from hpcguard.connectors.file_formats import (  # noqa: F401  (detection re-exported: replay's API)
    FILE_FORMATS,
    IPMI_FORMATS,
    detect_format,
    is_sacct_header,
    is_store_csv_header,
)
from hpcguard.connectors.ipmi import IpmiInput, decode_ipmi_envelope, read_ipmi_file
from hpcguard.connectors.ldms import LdmsColumns, LdmsDecoder, base_schema, read_store_csv
from hpcguard.connectors.mapping import SensorMapping
from hpcguard.connectors.netdev import counter_columns, interface_traffic
from hpcguard.connectors.sacct import (SacctDialect, decode_slurm_envelope, job_events,
                                       progress_envelope, read_sacct)
from hpcguard.connectors.slurm_events import FORMAT as SLURM_EVENT_FORMAT
from hpcguard.connectors.slurm_events import decode_event_envelope, event_envelope, read_events
from hpcguard.models.grid import POLL_TOLERANCE_S, place_readings
from hpcguard.models.jobs import PROGRESS
from hpcguard.settings import KafkaSettings, TopicSettings

GROUND_TRUTH = {"failures.csv", "anomalies.csv", "meta.json", "degradation.csv"}


@dataclass
class RawMessage:
    """One message for a raw topic; ``kind`` is ``ldms:<schema>``, ``ipmi`` or ``slurm``."""

    topic: str
    key: str
    value: dict
    time: float
    source: str
    kind: str = ""


def _files(paths: Iterable[str | Path]) -> Iterator[tuple[Path, str]]:
    """``(file, display source)`` for every file under ``paths``; FileNotFoundError for a missing path."""
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise FileNotFoundError(f"no such file or directory: {p}")
        if p.is_dir():
            for f in sorted(x for x in p.rglob("*") if x.is_file()):
                yield f, str(f.relative_to(p))
        else:
            yield p, p.name


def ldms_topic(schema: str, topics: TopicSettings) -> str:
    """Topic for the rows of a ``store_csv`` file of ``schema``: the one a worker with ``topics`` subscribes to.

    A worker subscribes to ``topics.ldms_schemas``; an ``as_is`` schema name
    (``meminfo_8d2b8bd``) that is not listed there goes to its base schema's topic, whose
    decoder reads it (list the digest name in ``ldms_schemas`` to keep LDMS's own topic).

    >>> ldms_topic("meminfo_8d2b8bd", TopicSettings()), ldms_topic("loadavg", TopicSettings())
    ('ldms.meminfo', 'ldms.loadavg')
    >>> ldms_topic("meminfo_8d2b8bd", TopicSettings(ldms_schemas=("meminfo_8d2b8bd",)))
    'ldms.meminfo_8d2b8bd'
    """
    if schema not in topics.ldms_schemas:
        base = base_schema(schema, topics.ldms_schemas)
        if base in topics.ldms_schemas:
            return topics.ldms(base)
    return topics.ldms(schema)


def _file_messages(f: Path, src: str, fmt: str, topics: TopicSettings, ipmi: IpmiInput | None = None,
                   sacct: SacctDialect | None = None, limit: int | None = None) -> Iterator[RawMessage | Rejected]:
    try:
        if fmt == "store_csv":
            schema = f.name.split(".")[0]
            topic, kind = ldms_topic(schema, topics), f"ldms:{schema}"
            for row in read_store_csv(f, source=src):
                if isinstance(row, Rejected):
                    yield row
                else:
                    yield RawMessage(topic, row["ProducerName"], row, row["timestamp"], src, kind)
        elif fmt == "probes":
            yield from _probe_messages(f, src, topics.name("probes"))
        elif fmt == "sacctmgr-event":  # Slurm's node events, at their start (the jobs agent labels failures)
            topic = topics.name("raw.slurm")
            records = list(read_events(f, source=src))
            yield from (r for r in records if isinstance(r, Rejected))
            for rec in sorted((r for r in records if not isinstance(r, Rejected)), key=lambda r: (r["start"], r["node"])):
                env = event_envelope(rec)
                yield RawMessage(topic, rec["node"], env, env["time"], env["source"], "slurm")
        elif fmt == "sdr-archive":  # per-node logs, buffered compactly and merged in time order across nodes
            topic = topics.name("raw.ipmi")
            for env in buffer_archive_polls(f, src, ipmi, limit).in_time_order():
                if isinstance(env, Rejected):
                    yield env
                else:
                    yield RawMessage(topic, env["host"], env, env["time"], env["source"], "ipmi")
        elif fmt == "sacct":
            topic = topics.name("raw.slurm")
            events = []
            for rec in read_sacct(f, source=src, dialect=sacct):
                if isinstance(rec, Rejected):
                    yield rec
                else:
                    events.extend((env, rec["job_id"]) for env in job_events(rec))
            events.sort(key=lambda e: e[0]["time"])  # rows are by job; events by time
            script_dirs = [d / "jobscripts" for d in (f.parent, f.parent.parent) if (d / "jobscripts").is_dir()]
            for env, job in events:
                if env["event"] == "submit" and script_dirs:
                    script = _job_script(script_dirs, job)
                    if script is not None:
                        env = {**env, "script": script}
                yield RawMessage(topic, job, env, env["time"], env["source"], "slurm")
        else:
            topic = topics.name("raw.ipmi")
            for env in read_ipmi_file(f, IPMI_FORMATS[fmt], source=src, options=ipmi):
                if isinstance(env, Rejected):
                    yield env
                else:
                    yield RawMessage(topic, env["host"], env, env["time"], env["source"], "ipmi")
    except ParseError as exc:
        yield exc.rejected(exc.reason[:200], source=src)
    except (OSError, UnicodeDecodeError) as exc:
        yield Rejected(src, None, "unreadable", str(exc), "")


MAX_SCRIPT_BYTES = 64 * 1024  # PRIONN reads 64 lines × 64 characters; a longer script is cut here


def _job_script(dirs: list[Path], job_id: str) -> str | None:
    """Text of ``<dir>/<job_id>.sh`` in the first of ``dirs`` that has it (cut at :data:`MAX_SCRIPT_BYTES`)."""
    if not job_id or "/" in job_id or job_id.startswith("."):
        return None
    for d in dirs:
        path = d / f"{job_id}.sh"
        if path.is_file():
            with open(path, "rb") as fh:
                return fh.read(MAX_SCRIPT_BYTES).decode("utf-8", errors="replace")
    return None


def _probe_messages(f: Path, src: str, topic: str) -> Iterator[RawMessage | Rejected]:
    """``ProbeResult``-shaped dicts of a ``probes.csv``, in order of their end time."""
    import csv

    good: list[RawMessage] = []
    with open(f, newline="") as fh:
        reader = csv.reader(fh)
        next(reader, None)
        for line, row in enumerate(reader, start=2):
            try:
                if len(row) != 6:
                    raise ValueError(f"expected 6 fields, got {len(row)}")
                start, end, runtime = (float(x) for x in row[3:6])
                if not (math.isfinite(start) and math.isfinite(end) and end >= start and runtime > 0):
                    raise ValueError("start/end/runtime_s must be finite with end >= start and runtime_s > 0")
            except ValueError as exc:
                yield Rejected(src, line, "bad_probe", str(exc), ",".join(row))
                continue
            value = {"probe_id": row[0], "probe_type": row[1], "node": row[2], "start": start, "end": end,
                     "runtime_s": runtime, "v": 1}
            good.append(RawMessage(topic, row[0], value, end, src, "probes"))
    good.sort(key=lambda m: m.time)
    yield from good


def plan(paths: Sequence[str | Path], fmt: str | None = None,
         sacct: SacctDialect | None = None) -> list[tuple[Path, str, str | None]]:
    """``(file, source, format or None)`` of every input file (ground truth left out).

    ``sacct`` (default: the ``[sacct]`` settings) gives the delimiter sacct headers are detected by.
    """
    sacct = sacct or SacctDialect.from_settings()
    if fmt is not None and fmt not in FILE_FORMATS:
        raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FILE_FORMATS)})")
    out = []
    for f, src in _files(paths):
        if f.name in GROUND_TRUTH or f.name.endswith(".HEADER") or ".HEADER." in f.name:
            continue
        if f.parent.name == "jobscripts":  # batch scripts ride on their jobs' submit events
            continue
        out.append((f, src, fmt or detect_format(f, sacct)))
    return out


def iter_recorded(paths: Sequence[str | Path], fmt: str | None = None, topics: TopicSettings | None = None,
                  ipmi: IpmiInput | None = None, sacct: SacctDialect | None = None,
                  limit: int | None = None) -> Iterator[RawMessage | Rejected]:
    """Raw messages of recorded files merged by record time (rejected records in between).

    ``sacct``: the dialect of the sacct dumps (default: the ``[sacct]`` settings);
    ``limit``: read only the first N per-node logs of each archive.
    """
    topics = topics or TopicSettings()
    sacct = sacct or SacctDialect.from_settings()
    streams = []
    for i, (f, src, f_fmt) in enumerate(plan(paths, fmt, sacct)):
        if f_fmt is None:
            empty = f.stat().st_size == 0
            streams.append(iter([(float("-inf"), i, 0, Rejected(
                src, None, "empty_file" if empty else "unknown_format",
                "the file is empty; nothing to replay" if empty else "not a recognised telemetry format; skipped",
                ""))]))
            continue
        streams.append(_timed(_file_messages(f, src, f_fmt, topics, ipmi, sacct, limit), i))
    for _, _, _, item in heapq.merge(*streams):
        yield item


def _timed(items: Iterator[RawMessage | Rejected], file_index: int) -> Iterator[tuple]:
    """``(time, file, seq, item)``; a rejected record takes the time of the record before it."""
    last = float("-inf")
    for seq, item in enumerate(items):
        if isinstance(item, RawMessage):
            last = item.time
        yield (last, file_index, seq, item)


def _topics_for(planned: list[tuple[Path, str, str | None]], topics: TopicSettings) -> list[str]:
    names = {topics.name("dlq")}
    for f, _, fmt in planned:
        if fmt == "store_csv":
            names.add(ldms_topic(f.name.split(".")[0], topics))
        elif fmt in ("sacct", "sacctmgr-event"):
            names.add(topics.name("raw.slurm"))
        elif fmt == "probes":
            names.add(topics.name("probes"))
        elif fmt is not None:
            names.add(topics.name("raw.ipmi"))
    return sorted(names)


#: bytes of sent-but-unacknowledged records before replay waits for the oldest (backpressure)
MAX_IN_FLIGHT_BYTES = 8 * 2**20
DELIVERY_WAIT_S = 120.0
#: record-time seconds between the replay's job-progress markers on ``raw.slurm`` (the node grid's step)
JOB_PROGRESS_S = 15.0


def with_job_progress(items: Iterable[RawMessage | Rejected], topic: str,
                      every_s: float = JOB_PROGRESS_S) -> Iterator[RawMessage | Rejected]:
    """``items`` (in time order) with a job-progress marker for ``topic`` (``raw.slurm``) whenever
    the record time moved on by ``every_s``, and one at the end.  A marker at ``t`` goes out just
    before the first record after ``t``: every record, so every job event, up to ``t`` is out by then.

    >>> msgs = [RawMessage("raw.ipmi", "n1", {}, t, "f", "ipmi") for t in (0.0, 10.0, 15.0, 15.0, 40.0)]
    >>> [(m.topic, m.time) for m in with_job_progress(msgs, "raw.slurm") if m.topic == "raw.slurm"]
    [('raw.slurm', 0.0), ('raw.slurm', 10.0), ('raw.slurm', 15.0), ('raw.slurm', 40.0)]
    """
    last, due = None, -math.inf
    for item in items:
        if isinstance(item, RawMessage):
            if last is not None and item.time > last and item.time >= due:
                yield RawMessage(topic, "", progress_envelope(last, "replay"), last, "replay", "slurm")
                due = (math.floor(item.time / every_s) + 1) * every_s
            last = item.time if last is None else max(last, item.time)
        yield item
    if last is not None:
        yield RawMessage(topic, "", progress_envelope(last, "replay"), last, "replay", "slurm")


def pace_delay(record_time: float, first_time: float, speed: float, elapsed_s: float) -> float:
    """Seconds to wait before publishing a record so that replay runs at ``speed``× real time.

    >>> pace_delay(160.0, 100.0, speed=60.0, elapsed_s=0.25)
    0.75
    """
    return (record_time - first_time) / speed - elapsed_s


def replay(paths: Sequence[str | Path], kafka: KafkaSettings, topics: TopicSettings, speed: float | None = None,
           progress: bool = True, fmt: str | None = None, ipmi: IpmiInput | None = None,
           sacct: SacctDialect | None = None, limit: int | None = None) -> dict[str, Any]:
    """Publish recorded files to Kafka; returns counts per topic and errors per kind.

    ``speed=None`` publishes as fast as possible; ``speed=X`` paces messages at X×
    real time by record time, from the first telemetry record on (Slurm job events
    before it are published at once).  Rejected records go to ``<prefix>.dlq`` as
    ``DeadLetter`` JSON.  Sending waits for the broker while ``MAX_IN_FLIGHT_BYTES`` are
    unacknowledged, so a slow broker slows the replay instead of expiring batches; records
    the broker still refused are reported in ``undelivered`` (``hpcguard replay`` exits 1).

    With Slurm files among the inputs, the replay also publishes a job-progress marker
    (:func:`~hpcguard.connectors.sacct.progress_envelope`) on ``raw.slurm`` whenever its record
    time has moved on by ``JOB_PROGRESS_S``, and once at the end: the records go out in time
    order, so every job event up to the previous record's time is out by then.  The job
    stream's watermark follows them, so a decision's wait for the jobs at its sample time ends
    as soon as the jobs are known, not when the next job event happens to come.
    """
    from kafka import KafkaProducer

    from hpcguard.connectors.kafka import ensure_topics, kafka_python_config

    if speed is not None and speed <= 0:
        raise ValueError("speed must be positive (or None for maximum speed)")
    planned = plan(paths, fmt, sacct)
    ensure_topics(kafka, _topics_for(planned, topics), topics.partitions, topics.replication)
    # retries with one request in flight: a transient broker error neither loses nor reorders records
    producer = KafkaProducer(**kafka_python_config(kafka), linger_ms=kafka.replay_linger_ms, batch_size=256 * 1024,
                             max_request_size=4 * 1024 * 1024, acks=1, retries=10,
                             max_in_flight_requests_per_connection=1)
    undelivered: dict[str, int] = {}
    last_error: list[str] = []

    def on_error(topic: str):
        def errback(exc: Exception) -> None:
            undelivered[topic] = undelivered.get(topic, 0) + 1
            last_error[:] = [f"{type(exc).__name__}: {exc}"]
        return errback

    dlq = topics.name("dlq")
    # why: unbounded sends queue faster than a slow broker drains; batches older than the producer's
    # delivery timeout then expire undelivered.  Waiting for the oldest sends keeps the queue short.
    in_flight: deque = deque()
    in_flight_bytes = 0

    def send(topic: str, key: str, value: dict) -> None:
        nonlocal in_flight_bytes
        data = json.dumps(value).encode()
        in_flight.append((producer.send(topic, key=key.encode(), value=data).add_errback(on_error(topic)),
                          len(data)))
        in_flight_bytes += len(data)
        while in_flight_bytes > MAX_IN_FLIGHT_BYTES:
            future, size = in_flight.popleft()
            in_flight_bytes -= size
            try:
                future.get(timeout=DELIVERY_WAIT_S)
            except Exception:  # noqa: BLE001 — counted by the errback, reported as undelivered
                pass

    published: dict[str, int] = {}
    errors: dict[str, int] = {}
    t_first = None
    telemetry = any(f_fmt not in (None, "sacct") for _, _, f_fmt in planned)  # else job events set the pace
    markers = 0  # job-progress markers among the raw.slurm records
    items = iter_recorded(paths, fmt, topics, ipmi, sacct, limit)
    if any(f_fmt == "sacct" for _, _, f_fmt in planned):
        items = with_job_progress(items, topics.name("raw.slurm"))
    wall0 = _time.monotonic()
    bar = _progress(progress)
    try:
        for item in items:
            if isinstance(item, Rejected):
                errors[item.kind] = errors.get(item.kind, 0) + 1
                send(dlq, item.source, item.dead_letter(_time.time()))
                published[dlq] = published.get(dlq, 0) + 1
                continue
            if speed is not None:
                if t_first is None and (item.kind != "slurm" or not telemetry):
                    # the clock starts at the first telemetry record: job events before it (running jobs
                    # submitted hours earlier) go out at once instead of idling through their history
                    t_first, pace0 = item.time, _time.monotonic()
                if t_first is not None:
                    ahead = pace_delay(item.time, t_first, speed, _time.monotonic() - pace0)
                    if ahead > 0:
                        _time.sleep(ahead)
            send(item.topic, item.key, item.value)
            published[item.topic] = published.get(item.topic, 0) + 1
            markers += item.kind == "slurm" and item.value.get("event") == PROGRESS
            if bar is not None and sum(published.values()) % 2000 == 0:
                bar[0].update(bar[1], completed=sum(published.values()))
        producer.flush()
    finally:
        producer.close()
        if bar is not None:
            bar[0].update(bar[1], completed=sum(published.values()))
            bar[0].stop()
    elapsed = _time.monotonic() - wall0
    for topic, n in undelivered.items():  # report what the broker refused, never count it as sent
        published[topic] -= n
    total = sum(published.values())
    return {"published": published, "job_progress_markers": markers, "undelivered": undelivered,
            "last_delivery_error": "".join(last_error),
            "errors": errors, "files": len(planned), "messages": total,
            "elapsed_s": round(elapsed, 3), "messages_per_s": round(total / elapsed, 1) if elapsed > 0 else None}


def _progress(enabled: bool):
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    prog = Progress(SpinnerColumn(), TextColumn("replay {task.completed:,} messages"), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=False)
    prog.start()
    return prog, prog.add_task("replay", total=None)


def _add_netdev_coverage(f: Path, mapping: SensorMapping, interfaces: tuple[str, ...], max_gap_factor: float,
                         coverage: SensorCoverage) -> None:
    """Which interfaces of a ``procnetdev`` file feed bytes_in/bytes_out (:mod:`~hpcguard.connectors.netdev`),
    into ``coverage``; other files, and rows the row reader refused (already counted), add nothing."""
    from hpcguard.connectors.recorded import read_store_csv_arrays  # recorded imports this module

    spec = mapping.ldms.get(base_schema(f.name.split(".")[0], mapping.ldms))
    net = counter_columns(spec)
    if net is None:
        return
    try:
        times, names, columns = read_store_csv_arrays(f, interfaces, {})
    except ParseError:
        return
    coverage.add_interface_traffic(*interface_traffic(times, names, columns, max_gap_factor * spec.period_s, net),
                                   interfaces)


def dry_run(paths: Sequence[str | Path], fmt: str | None = None, mapping: SensorMapping | None = None,
            limit: int | None = None, progress=None, ipmi: IpmiInput | None = None,
            sacct: SacctDialect | None = None, columns: LdmsColumns | None = None, grid_s: float = 15.0,
            poll_tolerance_s: float = POLL_TOLERANCE_S) -> dict:
    """Parse and decode everything without a broker; counts of records, samples, errors and IPMI coverage.

    ``coverage`` covers the IPMI canonical sensors (one node-step per poll), grouped
    by BMC family (``sensors.toml`` ``[families]``), and, in ``netdev``, the interfaces of
    ``procnetdev`` files that feed bytes_in/bytes_out; archives of per-node ``ipmitool sdr``
    logs are scanned with :func:`~hpcguard.connectors.fasrc.scan_sdr_log`, ``limit``
    files each (their ``records`` count every poll, answered or not; elsewhere a poll
    that printed nothing makes no record).  ``progress(n_files)`` is called after every
    archive member.  ``columns``: the ``[ldms]`` settings of LDMS rows (default: the environment's).
    ``coverage.polls`` says how the worker's grid (``grid_s``, ``poll_tolerance_s``) would place
    the IPMI polls: moved to the next step (jitter), or merged into a step an earlier poll took.
    """
    mapping = mapping or SensorMapping.load()
    ldms = LdmsDecoder(mapping, columns=columns)
    coverage = SensorCoverage(sensors=tuple(mapping.ipmi), families=mapping.family_of)
    ipmi_stats: dict[str, int] = {}
    records: dict[str, int] = {}
    samples: dict[str, int] = {}
    errors: dict[str, int] = {}
    topics = TopicSettings()
    planned = plan(paths, fmt, sacct)
    started = _time.monotonic()
    sensor_lines = 0
    archives = [(f, src) for f, src, f_fmt in planned if f_fmt == "sdr-archive"]
    ipmi = ipmi or IpmiInput()
    cache = SdrLineCache(mapping, ipmi.time_line)
    node_ids: dict[str, int] = {}
    poll_nodes: list[np.ndarray] = []  # node id and time of every poll with a value, for the grid's placement
    poll_times: list[np.ndarray] = []
    for f, src in archives:
        for member, node, text in iter_archive_logs(f, limit):
            scan = scan_sdr_log(text, node, cache, f"{src}:{member}")
            add_scan_coverage(scan, cache, coverage)
            sensor_lines += scan.lines
            for r in scan.rejected:
                errors[r.kind] = errors.get(r.kind, 0) + 1
            for k, n in scan.stats.items():
                if k != "used":
                    ipmi_stats[k] = ipmi_stats.get(k, 0) + n
            records["ipmi"] = records.get("ipmi", 0) + scan.times.size
            polled = np.unique(scan.poll)
            produced = int(polled.size)
            if produced:
                samples["ipmi"] = samples.get("ipmi", 0) + produced
                hosts, inv = np.unique(np.asarray(scan.hosts)[polled], return_inverse=True)
                poll_nodes.append(np.array([node_ids.setdefault(h, len(node_ids)) for h in hosts.tolist()],
                                           np.int64)[inv])
                poll_times.append(scan.times[polled])
            if progress is not None:
                progress(1)
    rest = [f for f, _, f_fmt in planned if f_fmt != "sdr-archive"]
    for item in iter_recorded(rest, fmt, topics, ipmi, sacct) if rest else ():
        if isinstance(item, Rejected):
            errors[item.kind] = errors.get(item.kind, 0) + 1
            continue
        kind = item.kind
        records[kind] = records.get(kind, 0) + 1
        try:
            if kind.startswith("ldms:"):
                produced = 0 if ldms.decode(kind[5:], item.value) is None else 1
            elif kind == "ipmi":
                polls = decode_ipmi_envelope(item.value, mapping, ipmi_stats, coverage)
                produced = len(polls)
                sensor_lines += item.value["text"].count("\n")
                if polls:
                    poll_nodes.append(np.array([node_ids.setdefault(p["node"], len(node_ids)) for p in polls]))
                    poll_times.append(np.array([p["time"] for p in polls], float))
            elif kind == "probes":
                produced = 1  # already checked by the reader
            elif item.value.get("format") == SLURM_EVENT_FORMAT:
                decode_event_envelope(item.value)
                produced, kind = 1, "node_events"
            else:
                decode_slurm_envelope(item.value)
                produced, kind = 1, "jobs"
        except ParseError as exc:
            errors[exc.kind] = errors.get(exc.kind, 0) + 1
            continue
        if produced:
            samples[kind] = samples.get(kind, 0) + produced
    for f, _, f_fmt in planned:
        if f_fmt == "store_csv":
            _add_netdev_coverage(f, mapping, ldms.columns.netdev_interfaces, ldms.max_gap_factor, coverage)
    if poll_times:  # per node: polls the grid would move to the next step (jitter) or merge
        _, counts = place_readings(np.concatenate(poll_nodes), np.concatenate(poll_times), grid_s,
                                   poll_tolerance_s, len(node_ids))
        for node, i in node_ids.items():
            coverage.add_polls(node, "ipmi", *counts[i].tolist())
    elapsed = _time.monotonic() - started
    report = coverage.report()
    return {"records": records, "samples": samples, "errors": errors, "files": len(planned),
            "counters": ldms.counter_stats(), "ipmi": ipmi_stats, "sensor_lines": sensor_lines,
            "sensor_lines_per_s": round(sensor_lines / elapsed, 1) if elapsed > 0 else None,
            "mapping_digest": mapping.digest,
            "coverage": report, "coverage_warnings": coverage.warnings(), "elapsed_s": round(elapsed, 3)}
