"""Archive replay benchmark (not a test): time-ordered buffering of a FASRC archive, and the worker check.

    .venv/bin/python benchmarks/bench_archive_replay.py [--archive A] [--limit N] [--worker] [--timeout S]
        [--out benchmarks/results/archive_replay.json]

Buffering (``connectors.fasrc.buffer_archive_polls``, what ``hpcguard replay`` does before
publishing an archive in time order): polls, sensor lines, distinct lines, bytes held by
the buffer, CPU seconds, peak resident memory of this process, and the time to walk the
polls in time order.  With ``--worker``: an embedded broker, ``hpcguard worker --role
normalize`` and ``hpcguard replay ARCHIVE --limit N``; the worker's ``samples.ipmi`` and
dead letters are counted against ``hpcguard replay --dry-run``'s canonical samples.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "fasrc-ipmi" / "ipmi-2025-06-03.tar.xz"


def buffering(archive: str, limit: int | None) -> dict:
    from hpcguard.connectors.fasrc import buffer_archive_polls

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    wall, cpu = time.perf_counter(), time.process_time()
    polls = buffer_archive_polls(archive, Path(archive).name, limit=limit)
    buffer_cpu = time.process_time() - cpu
    buffer_wall = time.perf_counter() - wall
    arrays = sum(a.nbytes for a in (polls.ids, polls.offsets, polls.times, polls.host, polls.member,
                                    polls.first_line))
    cpu = time.process_time()
    n = sum(1 for _ in polls.in_time_order())
    return {"archive": archive, "limit": limit, "logs": len(polls.members), "polls": len(polls),
            "sensor_lines": int(polls.ids.size), "distinct_lines": len(polls.lines),
            "buffer_array_mb": round(arrays / 2**20, 1),
            "bytes_per_sensor_line": round(arrays / max(polls.ids.size, 1), 2),
            "buffer_cpu_s": round(buffer_cpu, 1), "buffer_wall_s": round(buffer_wall, 1),
            "ordered_envelopes": n, "order_cpu_s": round(time.process_time() - cpu, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "rss_before_mb": round(rss0 / 1024, 1)}


def _count(bootstrap: str, topic: str, idle_s: float = 5.0) -> tuple[int, dict]:
    """Records of ``topic`` from the start, and dead-letter kinds when it is the DLQ."""
    from kafka import KafkaConsumer

    # why: kafka-python checks CRCs in pure Python; counting 350 k dead letters took minutes
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None,
                      check_crcs=False, consumer_timeout_ms=int(idle_s * 1000))
    n, kinds = 0, {}
    for m in c:
        n += 1
        if topic.endswith(".dlq"):
            k = json.loads(m.value).get("error_kind")
            kinds[k] = kinds.get(k, 0) + 1
    c.close()
    return n, kinds


def through_worker(archive: str, limit: int | None, timeout_s: float = 3600.0) -> dict:
    from hpcguard.connectors.broker import EmbeddedBroker
    from hpcguard.connectors.kafka import ensure_topics
    from hpcguard.connectors.replay import dry_run
    from hpcguard.settings import KafkaSettings, TopicSettings
    from hpcguard.streams.topics import TopicNames

    dry = dry_run([archive], limit=limit)
    expected = dry["samples"].get("ipmi", 0)
    prefix = "bench"
    names = TopicNames.from_settings(TopicSettings(prefix=prefix))
    out = {"dry_run_samples": expected, "dry_run_errors": dry["errors"]}
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        k = KafkaSettings(bootstrap=broker.bootstrap)
        ensure_topics(k, names.all(), 1)
        log = open(Path(tmp, "worker.log"), "wb")
        worker = subprocess.Popen([sys.executable, "-m", "hpcguard", "worker", "--bootstrap", broker.bootstrap,
                                   "--prefix", prefix, "--role", "normalize", "--data-dir", str(Path(tmp, "state")),
                                   "--app-id", "bench-archive", "--audit-log", str(Path(tmp, "audit.jsonl"))],
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                  env={**os.environ, "HPCGUARD_ADAPTER__LEDGER": str(Path(tmp, "ledger.sqlite"))})
        try:
            argv = [sys.executable, "-m", "hpcguard", "replay", archive, "--bootstrap", broker.bootstrap,
                    "--prefix", prefix, "--json"] + (["--limit", str(limit)] if limit else [])
            t0 = time.perf_counter()
            run = subprocess.run(argv, capture_output=True, text=True, check=True)
            report = json.loads(run.stdout)
            out.update(replay_published=report["published"], replay_errors=report["errors"],
                       replay_wall_s=round(time.perf_counter() - t0, 1),
                       replay_messages_per_s=report["messages_per_s"])
            deadline = time.monotonic() + timeout_s
            samples, seen, still_since = 0, None, time.monotonic()
            while time.monotonic() < deadline and samples < expected:
                samples, _ = _count(broker.bootstrap, names.samples_ipmi, idle_s=2.0)
                now = (samples, _count(broker.bootstrap, names.dlq, idle_s=2.0)[0])
                if now != seen:
                    seen, still_since = now, time.monotonic()
                elif time.monotonic() - still_since > 180:
                    break  # the worker stopped producing: report what it made
                if worker.poll() is not None:
                    raise RuntimeError(f"worker exited {worker.returncode}: {Path(tmp, 'worker.log').read_text()[-2000:]}")
            out["worker_wall_s"] = round(time.perf_counter() - t0, 1)
            dead, kinds = _count(broker.bootstrap, names.dlq)
            out.update(worker_samples=samples, dead_letters=dead, dead_letter_kinds=kinds,
                       samples_match=samples == expected)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
            log.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archive", default=str(ARCHIVE))
    ap.add_argument("--limit", type=int, default=None, help="first N per-node logs (default: the whole archive)")
    ap.add_argument("--worker", action="store_true", help="also replay through a worker and count its samples")
    ap.add_argument("--timeout", type=float, default=3600.0,
                    help="seconds to wait for the worker's samples after the replay (default 3600)")
    ap.add_argument("--out", default="benchmarks/results/archive_replay.json")
    args = ap.parse_args()
    result = {"buffering": buffering(args.archive, args.limit)}
    if args.worker:
        result["worker"] = through_worker(args.archive, args.limit, args.timeout)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
