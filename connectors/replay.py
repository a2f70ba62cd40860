"""Replay recorded telemetry files into Kafka's raw topics, in time order.

Formats are detected per file (or forced): LDMS ``store_csv`` (header line or
``.HEADER`` altheader), FreeIPMI CSV, ``ipmitool sdr elist``, Telegraf
``ipmi_sensor`` line protocol, ``sacct --parsable2`` and CanarIO ``probes.csv``
(completed probe runs, published to ``<prefix>.probes`` as ``ProbeResult`` JSON at
their end time).  A job's batch script ``jobscripts/<job_id>.sh`` beside the sacct
file (in its directory or the one above, i.e. the recording directory) rides on the
job's ``submit`` envelope as ``"script"``; ``jobscripts/`` itself is not replayed.  A directory is walked recursively; ground-truth files
(``failures.csv``, ``anomalies.csv``, ``meta.json``, ``degradation.csv``) are skipped and any other unknown file is rejected
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
import math
import time as _time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from hpcguard.connectors.errors import ParseError, Rejected
from hpcguard.connectors.ipmi import decode_ipmi_envelope, detect_ipmi_format, read_ipmi_file
from hpcguard.connectors.ldms import LdmsDecoder, find_altheader, read_store_csv
from hpcguard.connectors.mapping import SensorMapping
from hpcguard.connectors.sacct import decode_slurm_envelope, job_events, read_sacct
from hpcguard.settings import KafkaSettings, TopicSettings

FILE_FORMATS = ("store_csv", "freeipmi", "ipmitool", "telegraf", "sacct", "probes")
_IPMI_NAMES = {"freeipmi": "freeipmi-csv", "ipmitool": "ipmitool-sdr", "telegraf": "telegraf-lp"}
GROUND_TRUTH = {"failures.csv", "anomalies.csv", "meta.json", "degradation.csv"}
PROBE_HEADER = "probe_id,probe_type,node,start,end,runtime_s"  # simulators/pfs.py PROBE_FIELDS


@dataclass
class RawMessage:
    """One message for a raw topic; ``kind`` is ``ldms:<schema>``, ``ipmi`` or ``slurm``."""

    topic: str
    key: str
    value: dict
    time: float
    source: str
    kind: str = ""


def detect_format(path: Path) -> str | None:
    """One of :data:`FILE_FORMATS` from a file's first lines, or ``None``."""
    if path.name.endswith(".HEADER") or ".HEADER." in path.name:
        return None
    try:
        with open(path, errors="replace") as fh:
            head = [line for _, line in zip(range(20), fh)]
    except OSError:
        return None
    if not head:
        return None
    first = head[0]
    if first.startswith("#Time,") or (not first.startswith("#") and find_altheader(path) is not None):
        return "store_csv"
    if first.startswith("JobID|"):
        return "sacct"
    if first.strip() == PROBE_HEADER:
        return "probes"
    ipmi = detect_ipmi_format(head)
    return {v: k for k, v in _IPMI_NAMES.items()}.get(ipmi) if ipmi else None


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


def _file_messages(f: Path, src: str, fmt: str, topics: TopicSettings) -> Iterator[RawMessage | Rejected]:
    try:
        if fmt == "store_csv":
            schema = f.name.split(".")[0]
            topic, kind = topics.ldms(schema), f"ldms:{schema}"
            for row in read_store_csv(f, source=src):
                if isinstance(row, Rejected):
                    yield row
                else:
                    yield RawMessage(topic, row["ProducerName"], row, row["timestamp"], src, kind)
        elif fmt == "probes":
            yield from _probe_messages(f, src, topics.name("probes"))
        elif fmt == "sacct":
            topic = topics.name("raw.slurm")
            events = []
            for rec in read_sacct(f, source=src):
                if isinstance(rec, Rejected):
                    yield rec
                else:
                    events.extend(job_events(rec))
            events.sort(key=lambda e: e["time"])  # rows are by job; events by time
            script_dirs = [d / "jobscripts" for d in (f.parent, f.parent.parent) if (d / "jobscripts").is_dir()]
            for env in events:
                job = env["line"].split("|", 1)[0]
                if env["event"] == "submit" and script_dirs:
                    script = _job_script(script_dirs, job)
                    if script is not None:
                        env = {**env, "script": script}
                yield RawMessage(topic, job, env, env["time"], env["source"], "slurm")
        else:
            topic = topics.name("raw.ipmi")
            for env in read_ipmi_file(f, _IPMI_NAMES[fmt], source=src):
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


def plan(paths: Sequence[str | Path], fmt: str | None = None) -> list[tuple[Path, str, str | None]]:
    """``(file, source, format or None)`` of every input file (ground truth left out)."""
    if fmt is not None and fmt not in FILE_FORMATS:
        raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FILE_FORMATS)})")
    out = []
    for f, src in _files(paths):
        if f.name in GROUND_TRUTH or f.name.endswith(".HEADER") or ".HEADER." in f.name:
            continue
        if f.parent.name == "jobscripts":  # batch scripts ride on their jobs' submit events
            continue
        out.append((f, src, fmt or detect_format(f)))
    return out


def iter_recorded(paths: Sequence[str | Path], fmt: str | None = None,
                  topics: TopicSettings | None = None) -> Iterator[RawMessage | Rejected]:
    """Raw messages of recorded files merged by record time (rejected records in between)."""
    topics = topics or TopicSettings()
    streams = []
    for i, (f, src, f_fmt) in enumerate(plan(paths, fmt)):
        if f_fmt is None:
            streams.append(iter([(float("-inf"), i, 0, Rejected(src, None, "unknown_format",
                                                                 "not a recognised telemetry format; skipped", ""))]))
            continue
        streams.append(_timed(_file_messages(f, src, f_fmt, topics), i))
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
            names.add(topics.ldms(f.name.split(".")[0]))
        elif fmt == "sacct":
            names.add(topics.name("raw.slurm"))
        elif fmt == "probes":
            names.add(topics.name("probes"))
        elif fmt is not None:
            names.add(topics.name("raw.ipmi"))
    return sorted(names)


def pace_delay(record_time: float, first_time: float, speed: float, elapsed_s: float) -> float:
    """Seconds to wait before publishing a record so that replay runs at ``speed``× real time.

    >>> pace_delay(160.0, 100.0, speed=60.0, elapsed_s=0.25)
    0.75
    """
    return (record_time - first_time) / speed - elapsed_s


def replay(paths: Sequence[str | Path], kafka: KafkaSettings, topics: TopicSettings, speed: float | None = None,
           progress: bool = True, fmt: str | None = None) -> dict[str, Any]:
    """Publish recorded files to Kafka; returns counts per topic and errors per kind.

    ``speed=None`` publishes as fast as possible; ``speed=X`` paces messages at X×
    real time by record time.  Rejected records go to ``<prefix>.dlq`` as
    ``DeadLetter`` JSON.
    """
    from kafka import KafkaProducer

    from hpcguard.connectors.kafka import ensure_topics, kafka_python_config

    if speed is not None and speed <= 0:
        raise ValueError("speed must be positive (or None for maximum speed)")
    planned = plan(paths, fmt)
    ensure_topics(kafka, _topics_for(planned, topics), topics.partitions, topics.replication)
    # retries with one request in flight: a transient broker error neither loses nor reorders records
    producer = KafkaProducer(**kafka_python_config(kafka), linger_ms=20, batch_size=256 * 1024,
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
    published: dict[str, int] = {}
    errors: dict[str, int] = {}
    t_first = None
    wall0 = _time.monotonic()
    bar = _progress(progress)
    try:
        for item in iter_recorded(paths, fmt, topics):
            if isinstance(item, Rejected):
                errors[item.kind] = errors.get(item.kind, 0) + 1
                letter = item.dead_letter(_time.time())
                producer.send(dlq, key=item.source.encode(), value=json.dumps(letter).encode()).add_errback(
                    on_error(dlq))
                published[dlq] = published.get(dlq, 0) + 1
                continue
            if speed is not None:
                t_first = item.time if t_first is None else t_first
                ahead = pace_delay(item.time, t_first, speed, _time.monotonic() - wall0)
                if ahead > 0:
                    _time.sleep(ahead)
            producer.send(item.topic, key=item.key.encode(), value=json.dumps(item.value).encode()).add_errback(
                on_error(item.topic))
            published[item.topic] = published.get(item.topic, 0) + 1
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
    return {"published": published, "undelivered": undelivered, "last_delivery_error": "".join(last_error),
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


def dry_run(paths: Sequence[str | Path], fmt: str | None = None, mapping: SensorMapping | None = None) -> dict:
    """Parse and decode everything without a broker; counts of records, samples and errors."""
    mapping = mapping or SensorMapping.load()
    ldms = LdmsDecoder(mapping)
    ipmi_stats: dict[str, int] = {}
    records: dict[str, int] = {}
    samples: dict[str, int] = {}
    errors: dict[str, int] = {}
    topics = TopicSettings()
    planned = plan(paths, fmt)
    started = _time.monotonic()
    for item in iter_recorded(paths, fmt, topics):
        if isinstance(item, Rejected):
            errors[item.kind] = errors.get(item.kind, 0) + 1
            continue
        kind = item.kind
        records[kind] = records.get(kind, 0) + 1
        try:
            if kind.startswith("ldms:"):
                produced = 0 if ldms.decode(kind[5:], item.value) is None else 1
            elif kind == "ipmi":
                produced = len(decode_ipmi_envelope(item.value, mapping, ipmi_stats))
            elif kind == "probes":
                produced = 1  # already checked by the reader
            else:
                decode_slurm_envelope(item.value)
                produced, kind = 1, "jobs"
        except ParseError as exc:
            errors[exc.kind] = errors.get(exc.kind, 0) + 1
            continue
        if produced:
            samples[kind] = samples.get(kind, 0) + produced
    return {"records": records, "samples": samples, "errors": errors, "files": len(planned),
            "counters": ldms.counter_stats(), "ipmi": ipmi_stats,
            "elapsed_s": round(_time.monotonic() - started, 3)}
