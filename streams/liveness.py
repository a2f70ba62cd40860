"""Stall detection: a worker that stops consuming while the broker has data for it says so and exits.

Why it exists: the Faust/aiokafka stack can stop making progress without an error, and a
worker that hangs quietly loses a site's warnings.  This module watches for the upstream
behaviours seen in the field, each with the check that catches it:

- a consumer that stops reading while its partitions hold records, nothing logged
  ("consumers slowly die over time": https://github.com/faust-streaming/faust/issues/175,
  https://github.com/faust-streaming/faust/issues/640): the position check;
- offsets that are never committed again while the stream reads on: Faust commits only up
  to the first gap in its acknowledged offsets, and a redelivery, a compacted topic or a
  recovery race leaves a gap for good (https://github.com/faust-streaming/faust/issues/606,
  https://github.com/faust-streaming/faust/issues/596, regression
  https://github.com/faust-streaming/faust/issues/378): the committed-offset and group checks;
- a table recovery that never ends, e.g. with ``auto.offset.reset=latest`` when changelog
  segments are deleted during recovery (https://github.com/faust-streaming/faust/issues/651):
  the recovery check;
- a rebalance that hangs or leaves a partition to no live member, e.g. more workers than
  partitions (https://github.com/robinhood/faust/issues/134): the group check, which reads
  the group's committed offsets of every partition, not only the worker's own;
- aiokafka's group coordinator logging failed commits forever after a broker restart lost
  the topics (tansu creates no topic on a Metadata request): the commit-error count;
- broker queries that never return (some of tansu's ListOffsets answers hang clients;
  kafka-python calls block without end by default): a clock per query and ``CALL_TIMEOUT_MS``;
  and tansu's listed end offsets, short of the last record batch: the backlog is read from a
  fetch's high watermark (:meth:`BrokerCommits.backlog`).

Exiting and restarting from the committed offsets re-delivers records; that is safe because
actions are idempotent and keyed, with the governor's ledger giving exactly-once effects.
The worker does not use Faust's ``processing_guarantee="exactly_once"`` (duplicates and
crashes on rebalance: https://github.com/faust-streaming/faust/issues/323,
https://github.com/faust-streaming/faust/issues/517,
https://github.com/faust-streaming/faust/issues/177; tansu has no transactions either).  A
worker that cannot start at all (aiokafka 0.13 with a Faust older than its fix:
https://github.com/faust-streaming/faust/issues/672) fails at start with the client's error,
not here: upgrade faust-streaming and aiokafka together.

A worker's consumer is *stalled* when, for ``stall_after_s`` seconds (settings ``[liveness]``):

- assigned input partitions have records beyond the worker's read positions (end offset >
  position) and no position has moved;
- or offset commits keep failing (``max_commit_errors`` errors logged by aiokafka's group
  coordinator, e.g. ``UnknownTopicOrPartitionError`` after a broker restart lost its topics)
  with no progress in between;
- or a partition's committed offset has not moved while its stream read past it (an
  acknowledgement that never comes, e.g. Faust's gap handling after a redelivery: offsets
  would stay uncommitted for good); not while a table recovery runs, which holds the streams
  back and then seeks them to the committed offsets (the recovery check bounds it; a hole that
  a rebalance left in the acknowledged offsets is filled first, ``streams.worker.fill_lost_head``);
- or the broker has not answered an end-offset query;
- or, for ``2 × stall_after_s``, the *group* has not committed a partition of the topics the
  streams read while records follow its committed offset, whichever member owns it, or none
  (:meth:`ProgressWatch.observe_group`, probed by :meth:`BrokerCommits.backlog`); the batch
  readers' own groups (``<app_id>-ldms``, ``app.hpc.batch_groups``) are probed the same way;
- or, for ``2 × stall_after_s``, a table recovery (which holds every input back) has not moved
  its changelog offsets (:meth:`ProgressWatch.observe_recovery`);
- or, for ``2 × stall_after_s``, one of the broker-side checks (the committed offsets, the
  group's backlog) could not look: its queries kept failing, or one has not returned
  (:meth:`ProgressWatch.observe_query`, a clock per query).  A check that cannot see the
  group's commits would otherwise pass a stuck group silently; a liveness check that raises
  counts the same way (the timer goes on, and a check that keeps failing is a stall, reason
  ``check``).

On a stall the worker logs it (CRITICAL, with the partitions and the reason; then where each
pending asyncio task waits, :func:`task_stacks`), sets
``hpcguard_consumer_stalled`` to 1 and counts ``hpcguard_consumer_stalls_total{reason}`` in
``/metrics``, then (``on_stall = "exit"``) stops and exits with status 75 (``EX_TEMPFAIL``) so
its supervisor (systemd ``Restart=on-failure``, Kubernetes, compose ``restart:``) starts it
again; the new worker resumes from the committed offsets.  ``on_stall = "log"`` only reports.
``hpcguard_consumer_lag{topic,partition}`` is updated on every check.

Registering it (once, in ``create_app`` after the app and its tables exist)::

    from hpcguard.streams import liveness
    liveness.install(app, pipeline.settings.liveness)

``install`` adds one Faust timer (``app.timer(check_every_s)``) and a logging handler on
aiokafka's group coordinator, and returns the :class:`ProgressWatch` it feeds.  Each
answered end-offset query is also a sign of life for the windows agent's
:class:`StreamClock` (``app.hpc.stream_clock``), the idleness clock that stands still
while the stream cannot move.  Changelog
partitions of tables and paused partitions are not watched (nothing reads them as a stream).

Example
-------
>>> w = ProgressWatch(stall_after_s=60, max_commit_errors=3)
>>> w.observe(0.0, positions={"t/0": 10}, ends={"t/0": 50})
>>> w.observe(30.0, positions={"t/0": 10}, ends={"t/0": 60})
>>> w.observe(61.0, positions={"t/0": 10}, ends={"t/0": 70})
'no progress for 61 s while the broker holds 60 more records on t/0'
>>> w.observe(62.0, positions={"t/0": 11}, ends={"t/0": 70}) is None
True
"""
from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time
from typing import Any, Hashable, Mapping

from hpcguard.streams.metrics import COMMIT_ERRORS, CONSUMER_LAG, STALLED, STALLS

log = logging.getLogger("hpcguard.liveness")

EX_TEMPFAIL = 75  # sysexits.h: temporary failure, try again (what a supervisor should restart on)
COMMIT_LOGGER = "aiokafka.consumer.group_coordinator"
QUERY_TIMEOUT_S = 30.0
CALL_TIMEOUT_MS = 10_000  # one kafka-python call of a broker query (theirs block without end by default)


class StreamWait:
    """A bounded wait for another stream's clock to pass an event time (a join across topics).

    ``until(t)`` returns True once ``clock() >= t``; False when the wait gave up: ``wait_s`` wall
    seconds went by without the clock moving, counted in ``timeouts`` and logged once per stall.
    ``moving()`` True (records of that stream not read yet, e.g. a loaded worker) counts as
    moving.  The first wait starts the clock, so a stream not heard from yet is waited for once.

    >>> from prometheus_client import CollectorRegistry, Counter
    >>> registry = CollectorRegistry()
    >>> gave_up = Counter("gave_up", "waits that ran out", registry=registry)
    >>> probe_time = [100.0]
    >>> wait = StreamWait("probe stream", lambda: probe_time[0], 0.2, gave_up)
    >>> asyncio.run(wait.until(60.0))  # the clock has passed it
    True
    >>> asyncio.run(wait.until(160.0)), registry.get_sample_value("gave_up_total")  # stands still for 0.2 s: judged without it
    (False, 1.0)
    >>> asyncio.run(wait.until(170.0))  # still no move: not waited for again
    False
    >>> probe_time[0] = 180.0
    >>> asyncio.run(wait.until(170.0))
    True
    """

    def __init__(self, stream: str, clock, wait_s: float, timeouts, moving=lambda: False) -> None:
        self.stream, self.clock, self.wait_s, self.timeouts, self.moving = stream, clock, wait_s, timeouts, moving
        self.mark: float | None = None  # the clock seen last
        self.moved = 0.0  # the wall time it last moved
        self.logged = False  # this stall was logged

    async def until(self, t: float) -> bool:
        while True:
            mark, now = self.clock(), time.monotonic()
            if mark >= t:
                return True
            if mark != self.mark or self.moving():
                self.mark, self.moved, self.logged = mark, now, False
            if now - self.moved >= self.wait_s:
                self.timeouts.inc()
                if not self.logged:  # once per stall, not once per record
                    self.logged = True
                    log.warning("%s %s for %.0f s: what is at event time %.0f and after is decided without "
                                "waiting for it (worker.job_wait_s)", self.stream, "not heard from" if mark ==
                                -math.inf else f"stood still at {mark:.0f}", self.wait_s, t)
                return False
            await asyncio.sleep(0.05)


class ProgressWatch:
    """Per-partition progress bookkeeping; ``observe`` returns why the consumer is stalled, or ``None``.

    Pure bookkeeping (no Kafka): the timer feeds it read positions and end offsets, the
    log handler feeds it commit errors.
    """

    def __init__(self, stall_after_s: float, max_commit_errors: int):
        self.stall_after_s = float(stall_after_s)
        self.max_commit_errors = int(max_commit_errors)
        self.positions: dict[Hashable, int | None] = {}
        self.commit_errors = 0  # failed commits since the last progress
        self.last_progress: float | None = None  # last move, or last time there was nothing to read
        self.last_moved: float | None = None  # last time a read position moved
        self.broker_silent_since: float | None = None
        self.commits: dict[Hashable, tuple[int | None, float]] = {}  # committed offset, since when
        self.group: dict[Hashable, tuple[int | None, float]] = {}  # the group's committed offset, since when
        self.recovery: tuple[Any, float] | None = None  # a running table recovery's offsets, since when
        self.blind_since: dict[str, float] = {}  # broker-side query → failing since
        self.cause = ""  # progress | commit | group | recovery | broker | check: what the last stall verdict was about

    def commit_failed(self) -> None:
        self.commit_errors += 1

    def broker_silent(self, now: float) -> str | None:
        """The end-offset query failed or timed out at ``now``."""
        if self.broker_silent_since is None:
            self.broker_silent_since = now
        silent = now - self.broker_silent_since
        if silent >= self.stall_after_s:
            self.cause = "broker"
            return f"the broker has not answered an end-offset query for {silent:.0f} s"
        return self._commit_verdict(now)

    def observe(self, now: float, positions: Mapping[Hashable, int | None], ends: Mapping[Hashable, int]) -> str | None:
        """Record read positions and end offsets at ``now``; the stall reason, if stalled.

        Progress is judged over all partitions together: one consumer delivers every
        partition through one loop, so a partition waiting behind a busy one (backpressure)
        is not a stall while any partition moves.
        """
        self.broker_silent_since = None
        if self.last_progress is None:
            self.last_progress = self.last_moved = now
        waiting = {}
        for tp, end in ends.items():
            pos = positions.get(tp)
            if tp in self.positions and pos != self.positions[tp]:
                self.commit_errors, self.last_progress, self.last_moved = 0, now, now
            self.positions[tp] = pos
            if end > (pos or 0):
                waiting[tp] = end - (pos or 0)
        for tp in set(self.positions) - set(ends):  # revoked partitions
            self.positions.pop(tp, None)
        if not waiting:
            self.last_progress = now  # nothing to read is not a stall
        idle = now - self.last_progress
        if waiting and idle >= self.stall_after_s:
            names = ", ".join(str(tp) for tp in list(waiting)[:5]) + (" ..." if len(waiting) > 5 else "")
            self.cause = "progress"
            return (f"no progress for {idle:.0f} s while the broker holds {sum(waiting.values())} more records "
                    f"on {names}")
        return self._commit_verdict(now)

    def observe_commits(self, now: float, committed: Mapping[Hashable, int | None],
                        last_read: Mapping[Hashable, int | None]) -> str | None:
        """The stall reason when a partition's committed offset stood still for ``stall_after_s``
        while its stream read past it (an acknowledgement that never comes: offsets would
        stay uncommitted forever, and every restart would redeliver from there).

        ``last_read`` is the offset of the last record read.  Why a stall needs it beyond the
        committed offset (two records unacknowledged, not one): faust sets its read offset to
        the committed offset when it seeks, so right after a restart "last read = committed"
        means nothing was read yet.

        >>> w = ProgressWatch(stall_after_s=60, max_commit_errors=50)
        >>> w.observe_commits(0, {"p0": 540}, {"p0": 899}) is None
        True
        >>> w.observe_commits(61, {"p0": 540}, {"p0": 1172})
        'offsets of p0 not committed past 540 for 61 s though its stream read offset 1172'
        >>> w.observe_commits(62, {"p0": 1173}, {"p0": 1172}) is None
        True
        >>> w.observe_commits(200, {"p0": 1173}, {"p0": 1173}) is None  # just restarted: seek set read = committed
        True
        """
        for tp, read in last_read.items():
            done = committed.get(tp)
            behind = read is not None and done is not None and read > done
            last = self.commits.get(tp)
            if last is None or last[0] != done or not behind:
                self.commits[tp] = (done, now)
                continue
            if now - last[1] >= self.stall_after_s:
                self.cause = "commit"
                return (f"offsets of {tp} not committed past {done} for {now - last[1]:.0f} s though its stream "
                        f"read offset {read}")
        for tp in set(self.commits) - set(last_read):  # revoked partitions
            self.commits.pop(tp, None)
        return None

    def observe_group(self, now: float, backlog: Mapping[Hashable, tuple[int | None, int]],
                      assigned: set | frozenset = frozenset()) -> str | None:
        """The stall reason when the *group* has not committed a partition for ``2 × stall_after_s``
        while records follow its committed offset, whichever member owns it, or none.

        ``backlog``: every partition of the topics the worker's streams read →
        (the group's committed offset, records after it, by the partition's true end).  Why
        beyond the worker's own partitions: a partition that a rebalance assigned to no live
        member is read by nobody, and no member's own check sees it.  Why twice the stall time:
        a partition another live worker owns is that worker's to report first.

        >>> w = ProgressWatch(stall_after_s=60, max_commit_errors=50)
        >>> w.observe_group(0, {"p0": (75, 3)}) is None
        True
        >>> w.observe_group(100, {"p0": (75, 3)}) is None   # within 2 × 60 s
        True
        >>> w.observe_group(121, {"p0": (75, 3)})
        'the group has not committed p0 past 75 for 121 s though 3 records follow (a partition of no member here)'
        >>> w.observe_group(122, {"p0": (78, 0)}) is None   # committed to the end
        True
        """
        verdict = None
        for tp, (done, waiting) in backlog.items():
            last = self.group.get(tp)
            if last is None or last[0] != done or waiting <= 0:
                self.group[tp] = (done, now)
                continue
            if verdict is None and now - last[1] >= 2 * self.stall_after_s:
                self.cause = "group"
                owner = "assigned to this worker" if tp in assigned else "a partition of no member here"
                verdict = (f"the group has not committed {tp} past {done} for {now - last[1]:.0f} s though "
                           f"{waiting} records follow ({owner})")
        for tp in set(self.group) - set(backlog):
            self.group.pop(tp, None)
        return verdict

    def forget_commits(self) -> None:
        """Start the partitions' commit clocks anew (a table recovery holds the streams back on purpose)."""
        self.commits.clear()

    def forget_group(self) -> None:
        """Start the group's clocks anew (a table recovery pauses every input on purpose)."""
        self.group.clear()

    def observe_recovery(self, now: float, offsets: Mapping[Hashable, int] | None) -> str | None:
        """The stall reason when a table recovery has read no changelog record for ``2 × stall_after_s``.

        ``offsets``: the recovery's changelog read offsets while one runs, else ``None``.  A
        recovery pauses every input partition and the group check stands aside for it, so one
        that never ends would hold the worker silently.

        >>> w = ProgressWatch(stall_after_s=60, max_commit_errors=50)
        >>> w.observe_recovery(0, {"cl/0": 5}) is None
        True
        >>> w.observe_recovery(100, {"cl/0": 9}) is None          # it reads on
        True
        >>> w.observe_recovery(221, {"cl/0": 9})
        'a table recovery has read no changelog record for 121 s (offsets cl/0: 9)'
        >>> w.observe_recovery(222, None) is None                 # it ended
        True
        """
        if offsets is None:
            self.recovery = None
            return None
        key = tuple(sorted((str(tp), int(o)) for tp, o in offsets.items()))
        if self.recovery is None or self.recovery[0] != key:
            self.recovery = (key, now)
            return None
        if now - self.recovery[1] >= 2 * self.stall_after_s:
            self.cause = "recovery"
            shown = ", ".join(f"{tp}: {o}" for tp, o in key[:5]) + (" ..." if len(key) > 5 else "")
            return f"a table recovery has read no changelog record for {now - self.recovery[1]:.0f} s (offsets {shown})"
        return None

    def observe_query(self, now: float, query: str, looked: bool, why: str = "", cause: str = "broker") -> str | None:
        """The stall reason when ``query`` could not look for ``2 × stall_after_s``.

        ``looked``: it answered; ``why`` says what went wrong when it did not (an error, a query
        that has not returned).  Each query has its own clock: the committed offsets are read
        every check and the group's backlog every few, and an answer of one says nothing of
        the other (a backlog query that always fails would otherwise never count as blind).
        ``cause`` is the stall's reason label (``broker`` for the broker-side queries, ``check``
        for the liveness check itself).

        >>> w = ProgressWatch(stall_after_s=60, max_commit_errors=50)
        >>> w.observe_query(0, "the group's backlog query", False, "TimeoutError()") is None
        True
        >>> w.observe_query(100, "the committed-offset query", True) is None   # another query's answer
        True
        >>> w.observe_query(121, "the group's backlog query", False, "TimeoutError()")
        "the group's backlog query could not look for 121 s (last: TimeoutError())"
        >>> w.observe_query(122, "the group's backlog query", True) is None
        True
        """
        if looked:
            self.blind_since.pop(query, None)
            return None
        since = self.blind_since.setdefault(query, now)
        if now - since >= 2 * self.stall_after_s:
            self.cause = cause
            return f"{query} could not look for {now - since:.0f} s (last: {why})"
        return None

    def _commit_verdict(self, now: float) -> str | None:
        if self.last_moved is None:
            self.last_progress = self.last_moved = now
        if self.commit_errors >= self.max_commit_errors and now - self.last_moved >= self.stall_after_s:
            self.cause = "commit"
            return (f"{self.commit_errors} offset commits failed without progress for "
                    f"{now - self.last_moved:.0f} s")
        return None


class StreamClock:
    """Processing time for idleness that stands still while the stream cannot move.

    A source is idle when it is quiet *while the stream moves*.  When nothing arrives at
    all (broker down or frozen, consumer cut off), no source may go idle, or the samples
    that arrive after the outage would be late.  The clock follows ``clock`` only while a
    sign of life is at most ``fresh_s`` old: a record arrived (:meth:`heard`) or the broker
    answered the liveness check (``install`` attaches it).  With ``fresh_s=None`` (no
    liveness check, e.g. Faust's test context) it simply follows ``clock``.

    >>> t = [0.0]
    >>> c = StreamClock(lambda: t[0], fresh_s=10)
    >>> c.heard(); t[0] = 5.0; c()
    5.0
    >>> t[0] = 100.0; c()     # nothing heard since 0: only 10 s of it count
    10.0
    >>> c.heard(); t[0] = 103.0; c()
    13.0
    """

    def __init__(self, clock: Any = time.monotonic, fresh_s: float | None = None):
        self.clock = clock
        self.fresh_s = fresh_s
        self._last: float | None = None  # clock reading at the last call
        self._value = 0.0
        self._heard = 0.0

    def __call__(self) -> float:
        now = self.clock()
        if self._last is None:
            self._last = self._value = self._heard = now
        upto = now if self.fresh_s is None else min(now, self._heard + self.fresh_s)
        self._value += max(0.0, upto - self._last)
        self._last = now
        return self._value

    def heard(self) -> None:
        """A sign of life now: the clock moves again from here."""
        self()
        self._heard = self.clock()


class _CommitErrorCounter(logging.Handler):
    """Counts aiokafka's ``OffsetCommit failed ...`` log records into the watch."""

    def __init__(self, watch: ProgressWatch):
        super().__init__(logging.WARNING)
        self.watch = watch

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("OffsetCommit failed"):
            self.watch.commit_failed()
            COMMIT_ERRORS.inc()


def _watched(app: Any) -> list:
    """Assigned partitions the worker's streams read (no changelogs, nothing paused)."""
    consumer = app.consumer
    changelogs = app.tables.changelog_topics
    paused = getattr(consumer, "_paused_partitions", set())
    return sorted((tp for tp in consumer.assignment() if tp.topic not in changelogs and tp not in paused),
                  key=lambda tp: (tp.topic, tp.partition))


def _consumer_view(app: Any) -> str:
    """What this worker's consumer holds, for the log: partitions not in its streams' flow, read offsets,
    faust's acknowledgement bookkeeping (faust keeps no public accessors for them)."""
    try:
        return _consumer_state(app)
    except Exception as exc:  # noqa: BLE001 — a log line must not fail the check
        return f"consumer not known ({exc!r})"


def _consumer_state(app: Any) -> str:
    consumer = app.consumer
    changelogs = app.tables.changelog_topics
    assigned = [tp for tp in consumer.assignment() if tp.topic not in changelogs]
    paused = sorted(f"{tp.topic}/{tp.partition}" for tp in assigned if tp in consumer._paused_partitions)
    active = consumer._active_partitions
    inactive = sorted(f"{tp.topic}/{tp.partition}" for tp in assigned if active is not None and tp not in active)
    reads = {f"{tp.topic}/{tp.partition}": (consumer._read_offset.get(tp), consumer._committed_offset.get(tp))
             for tp in assigned}
    # faust's ack bookkeeping: an offset listed twice in _acked (e.g. acked and also filled in from a gap)
    # makes each commit advance one offset only (a crawl, not a standstill)
    acks = {}
    for tp in assigned:
        acked, gaps = list(consumer._acked.get(tp) or ()), consumer._gap.get(tp)
        if acked or gaps:
            spans = sorted((iv.begin, iv.end) for iv in gaps) if gaps else []
            acks[f"{tp.topic}/{tp.partition}"] = (len(acked), len(acked) - len(set(acked)),
                                                  (min(acked), max(acked)) if acked else None, spans[:3])
    return (f"assigned {len(assigned)}, paused {paused or 'none'}, not fetched {inactive or 'none'}, "
            f"generation {getattr(app, 'consumer_generation_id', '?')}, flow {consumer.flow_active}, "
            f"(read, faust committed) {reads}, (acked, listed twice, range, gaps) {acks or 'none'}")


def _read_topics(app: Any) -> list[str]:
    """The topics the worker's streams read and commit (faust's conductor), without the tables' changelogs."""
    changelogs, conductor = app.tables.changelog_topics, app.topics
    return sorted(t for t in conductor._topic_name_index  # no public accessor for the subscribed names
                  if t not in changelogs and conductor.acks_enabled_for(t))


def _positions(app: Any, tps: list) -> dict:
    """Next offset each partition's stream will read (faust's read offset + 1, else the committed one).

    Right after a seek faust's read offset is the committed offset itself, so until the first
    record arrives this is one past the true position: a single unread record then is not
    counted as waiting (the next one is).
    """
    consumer = app.consumer
    out = {}
    for tp in tps:
        read = consumer._read_offset.get(tp)  # faust keeps no public accessor for it
        out[tp] = read + 1 if read is not None else consumer._committed_offset.get(tp)
    return out


def backlogged(app: Any, topics: tuple[str, ...] | set[str], unknown_end: bool = True) -> set[str]:
    """The ``topics`` with records this worker has not read yet (a consumer backlog, not silent sources).

    Errs on the side of a backlog, which only delays idleness: a partition whose end is not
    known yet (unless ``unknown_end`` is False: then only a known end counts), and one where
    faust's read offset equals the committed offset (right after a seek that means nothing was
    read yet), count as behind while any record lies at or after it.
    """
    try:
        consumer = app.consumer
        behind = set()
        for tp in consumer.assignment():
            if tp.topic not in topics:
                continue
            high, read = consumer.highwater(tp), consumer._read_offset.get(tp)  # no public accessor for the latter
            if high is None:
                if unknown_end:
                    behind.add(tp.topic)
            elif read is None or read == consumer._committed_offset.get(tp):
                if high > (read or 0):
                    behind.add(tp.topic)
            elif high > read + 1:
                behind.add(tp.topic)
        return behind
    except Exception:  # noqa: BLE001 — no consumer yet (start-up, test context): no backlog known
        return set()


def task_stacks(limit: int = 5) -> str:
    """Where each pending asyncio task waits: its await chain, innermost ``limit`` frames.

    Logged with a stall: an agent blocked on an await shows the line it waits on.
    (``Task.get_stack`` gives one frame of a suspended coroutine; the chain is walked here.)

    >>> async def nap(): await asyncio.sleep(5)
    >>> async def main():
    ...     t = asyncio.create_task(nap(), name="napper"); await asyncio.sleep(0)
    ...     line = next(ln for ln in task_stacks().splitlines() if "napper" in ln); t.cancel()
    ...     print(line.split(": ", 1)[1].split(" <- ")[0].split(" ")[1], "<-", line.rsplit(" ", 1)[1])
    >>> asyncio.run(main())
    sleep <- nap
    """
    lines = []
    for task in sorted(asyncio.all_tasks(), key=lambda t: t.get_name()):
        chain, obj = [], task.get_coro()
        while obj is not None and len(chain) < 50:
            frame = getattr(obj, "cr_frame", None) or getattr(obj, "gi_frame", None) or getattr(obj, "ag_frame", None)
            if frame is None:
                break
            chain.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} {frame.f_code.co_name}")
            obj = getattr(obj, "cr_await", None) or getattr(obj, "gi_yieldfrom", None) or getattr(obj, "ag_await", None)
        if chain:
            lines.append(f"  {task.get_name()}: " + " <- ".join(reversed(chain[-limit:])))
    return "\n".join(lines)


def _stop_and_exit(app: Any, grace_s: float) -> None:
    """Exit 75 after trying a clean stop; a daemon timer makes sure even a hung stop ends."""
    timer = threading.Timer(grace_s, os._exit, (EX_TEMPFAIL,))
    timer.daemon = True
    timer.start()

    async def stop() -> None:
        try:
            await app.stop()
        finally:
            logging.shutdown()
            os._exit(EX_TEMPFAIL)

    # why a loose task: stopping the app cancels its timers, including the one that found the stall
    asyncio.get_running_loop().create_task(stop())


class BrokerCommits:
    """The group's committed offsets as the broker stores them (kafka-python, off the event loop).

    Why not faust's own record of them: faust notes an offset as committed even when the
    commit failed (a ``CommitFailedError`` "already rebalanced" is swallowed), so a worker
    whose commits all fail believes it is up to date while every restart would redeliver
    from far behind.  One OffsetFetch per partition and check, on a consumer that never
    joins the group (it is assigned partitions by hand for :meth:`backlog`'s fetches).
    """

    def __init__(self, kafka: Any, group_id: str):
        self.kafka, self.group_id = kafka, group_id
        self._consumer = None

    def read(self, tps: list) -> dict:
        """``{tp: committed offset or None}``; raises on broker errors (the caller falls back)."""
        from kafka import TopicPartition

        consumer = self._ensure()
        try:
            return {tp: consumer.committed(TopicPartition(tp.topic, tp.partition), timeout_ms=CALL_TIMEOUT_MS)
                    for tp in tps}
        except Exception:
            self.close()  # a broken connection: a fresh consumer next time
            raise

    def backlog(self, topics: list[str], wait_s: float = 2.0) -> dict:
        """``{(topic, partition): (committed offset or None, records after it)}`` for every partition
        of ``topics``; raises on broker errors.

        The records after the committed offset come from a fetch at that offset (its response
        carries the true high watermark; tansu lists end offsets short of the last record batch),
        or from the listed end offset for a partition whose fetch did not answer within ``wait_s``.
        """
        from kafka import TopicPartition

        consumer = self._ensure()
        try:
            consumer.topics()  # why: fresh metadata, so new topics and partitions are seen
            tps = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
            committed = self.read(tps)
            consumer.assign(tps)
            for tp in tps:
                if committed[tp] is None:
                    consumer.seek_to_beginning(tp)
                else:
                    consumer.seek(tp, committed[tp])
            starts = {tp: consumer.position(tp, timeout_ms=CALL_TIMEOUT_MS) for tp in tps}
            deadline = time.monotonic() + wait_s
            highs: dict = {}
            while len(highs) < len(tps) and time.monotonic() < deadline:
                consumer.poll(timeout_ms=200, max_records=1)
                highs = {tp: h for tp in tps if (h := consumer.highwater(tp)) is not None}
            missing = [tp for tp in tps if tp not in highs]
            if missing:  # no fetch answered in time: the listed end (short of the last batch on tansu), not nothing
                highs.update(consumer.end_offsets(missing, timeout_ms=CALL_TIMEOUT_MS))
            return {(tp.topic, tp.partition): (committed[tp], max(0, highs[tp] - starts[tp])) for tp in tps}
        except Exception:
            self.close()
            raise

    def _ensure(self) -> Any:
        from kafka import KafkaConsumer

        from hpcguard.connectors.kafka import kafka_python_config

        if self._consumer is None:
            # small fetches: a backlog probe needs one record batch's high watermark, not the records
            self._consumer = KafkaConsumer(**kafka_python_config(self.kafka), group_id=self.group_id,
                                           enable_auto_commit=False, max_partition_fetch_bytes=1024,
                                           fetch_max_bytes=64 * 1024)
        return self._consumer

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except Exception:  # noqa: BLE001 — closing a broken consumer
                pass


def install(app: Any, settings: Any) -> ProgressWatch:
    """Register the stall check on ``app`` with ``Settings().liveness``; returns its watch."""
    watch = ProgressWatch(settings.stall_after_s, settings.max_commit_errors)
    logging.getLogger(COMMIT_LOGGER).addHandler(_CommitErrorCounter(watch))
    reported = False
    stream_clock = getattr(getattr(app, "hpc", None), "stream_clock", None)  # the windows agent's idleness clock
    if stream_clock is not None:
        stream_clock.fresh_s = 2 * settings.check_every_s

    hpc_settings = getattr(getattr(app, "hpc", None), "settings", None)
    broker_commits = BrokerCommits(hpc_settings.kafka, app.conf.id) if hpc_settings is not None else None
    batch_commits: dict[str, BrokerCommits] = {}  # the batch readers' groups (app.hpc.batch_groups), probed alike

    querying: list[float] = []  # when the broker query running in the executor started (empty: none runs)
    group_checked = [-float("inf")]  # when the group's backlog was last probed
    group_every_s = max(settings.check_every_s, settings.stall_after_s / 4)
    aside_since: list[float] = []  # when the group check began to stand aside for a table recovery
    warned: set = set()  # (partition, committed offset) whose standstill was logged
    verdicts: list[str] = []  # this check's stall verdicts from queries that could not look

    def _run_then_release(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        finally:
            querying.clear()

    def looked(query: str, answered: bool, why: str = "", cause: str = "broker") -> str | None:
        """Feed ``query``'s outcome to the watch (warn once when it starts failing); its stall verdict."""
        if not answered and query not in watch.blind_since:
            log.warning("%s cannot look (%s): a stall if that lasts %.0f s", query, why, 2 * settings.stall_after_s)
        return watch.observe_query(time.monotonic(), query, answered, why, cause)

    def could_not_look(query: str, why: str) -> None:
        """``query`` failed: its stall verdict, once it is one, joins this check's."""
        verdict = looked(query, False, why)
        if verdict is not None:
            verdicts.append(verdict)

    async def broker_query(query: str, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in the executor, one at a time (kafka-python's consumer is not thread-safe); its
        answer, or ``None`` when it failed or another query runs (blind once that one ran past its timeout)."""
        if querying:
            running = time.monotonic() - querying[0]
            if running > QUERY_TIMEOUT_S:
                could_not_look(query, f"a broker query has not returned for {running:.0f} s")
            return None
        querying.append(time.monotonic())
        try:
            result = await asyncio.wait_for(asyncio.shield(asyncio.get_running_loop().run_in_executor(
                None, _run_then_release, fn, *args)), timeout=QUERY_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 — an unreachable broker is the end-offset query's to report
            log.debug("%s failed: %r", query, exc)
            could_not_look(query, repr(exc))
            return None
        looked(query, True)
        return result

    async def committed_offsets(tps: list) -> dict | None:
        """The broker's committed offsets of ``tps``; ``None`` when the broker did not say.

        Never faust's own record in its place: faust notes failed commits as done, and a
        check fed its view whenever a query fails would restart the commit clock each time."""
        if broker_commits is None:  # no broker settings (faust's test context): faust's record is all there is
            return {tp: app.consumer._committed_offset.get(tp) for tp in tps}
        if not tps:
            return {}
        return await broker_query("the committed-offset query", broker_commits.read, tps)

    def recovery_offsets() -> dict | None:
        """The running table recovery's changelog read offsets; ``None`` when none runs."""
        if not getattr(app, "in_recovery", False):
            return None
        recovery = getattr(getattr(app, "tables", None), "recovery", None)
        return dict(getattr(recovery, "active_offsets", None) or {})

    async def group_verdict(now: float) -> str | None:
        """Every ``group_every_s``: the group's backlog on every partition of the topics the streams read."""
        if broker_commits is None or now - group_checked[0] < group_every_s:
            return None
        if getattr(app, "in_recovery", False):
            aside_since[:] = aside_since or [now]
            if now - aside_since[0] >= settings.stall_after_s and "aside" not in warned:
                warned.add("aside")
                log.warning("the group check has stood aside for a table recovery for %.0f s (offsets %s); %s",
                            now - aside_since[0], recovery_offsets(), _consumer_view(app))
            else:
                log.info("group check stands aside: a table recovery runs")
            watch.forget_group()  # a table recovery holds every input back on purpose (observe_recovery bounds it)
            return None
        aside_since.clear()
        warned.discard("aside")
        group_checked[0] = now
        topics = _read_topics(app)
        backlog = await broker_query("the group's backlog query", broker_commits.backlog, topics)
        if backlog is None:
            log.info("group check: no answer (%d topics)", len(topics))
            return None
        mine = {(tp.topic, tp.partition) for tp in app.consumer.assignment()}
        # the batch readers' groups (the LDMS rows, streams/plumbing.consume_batches) commit on their own: a
        # reader whose group stopped committing after a broker restart would otherwise pass unseen
        for group, (batch_topics, consumer) in sorted(getattr(app.hpc, "batch_groups", {}).items()):
            probe = batch_commits.setdefault(group, BrokerCommits(hpc_settings.kafka, group))
            theirs = await broker_query(f"the {group} group's backlog query", probe.backlog, batch_topics)
            if theirs is None:
                continue
            backlog = {**backlog, **theirs}
            mine |= {(tp.topic, tp.partition) for tp in (consumer.assignment() if consumer is not None else ())}
        named = {f"{t}/{p}": v for (t, p), v in backlog.items()}
        if log.isEnabledFor(logging.INFO):
            log.info("group check: %d topics, behind %s; %s", len(topics),
                     {tp: v for tp, v in named.items() if v[1] > 0} or "none", _consumer_view(app))
        verdict = watch.observe_group(now, named, {f"{t}/{p}" for t, p in mine})
        # half way to a verdict: once per partition and committed offset, what this worker holds (the evidence
        # for a standstill that ends in no verdict, or in one)
        for tp, (done, since) in watch.group.items():
            if now - since >= settings.stall_after_s and (tp, done) not in warned:
                warned.add((tp, done))
                log.warning("the group has not committed %s past %s for %.0f s (%s records follow); %s", tp, done,
                            now - since, named.get(tp, (None, "?"))[1], _consumer_view(app))
        return verdict

    async def verdict_now() -> str | None:
        verdicts.clear()
        now = time.monotonic()
        tps = _watched(app)
        try:
            # why the generous timeout: the query shares the consumer's thread with fetches and commits
            ends = await asyncio.wait_for(app.consumer.highwaters(*tps), timeout=QUERY_TIMEOUT_S) if tps else {}
        except Exception as exc:  # a frozen or restarted broker: timeouts, connection errors, unknown topics
            log.warning("end-offset query failed: %r", exc)
            return watch.broker_silent(now)
        if stream_clock is not None:
            stream_clock.heard()  # the broker answers: quiet sources are quiet, not cut off
        positions = _positions(app, tps)
        for tp in tps:
            CONSUMER_LAG.labels(tp.topic, str(tp.partition)).set(max(0, ends.get(tp, 0) - (positions[tp] or 0)))
        verdict = watch.observe(now, positions, ends)
        committed = await committed_offsets(tps)
        if getattr(app, "in_recovery", False):
            # a table recovery holds the streams back on purpose and seeks them to the committed offsets when it
            # ends: no commit is due until then (observe_recovery bounds the recovery itself)
            watch.forget_commits()
        elif verdict is None and committed is not None:  # no answer says nothing of the commits: their clock goes on
            verdict = watch.observe_commits(now, committed, {tp: app.consumer._read_offset.get(tp) for tp in tps})
        verdict = verdict or await group_verdict(now) or watch.observe_recovery(now, recovery_offsets())
        return verdict or next(iter(verdicts), None)

    started: list[bool] = []

    async def check_liveness() -> None:
        nonlocal reported
        if not started:  # evidence in the log that the timer runs (faust starts it once the first recovery ended)
            started.append(True)
            log.info("liveness check started (every %.0f s, stall after %.0f s)", settings.check_every_s,
                     settings.stall_after_s)
        try:
            verdict = await verdict_now()
            looked("the liveness check", True)
        except Exception as exc:  # noqa: BLE001 — a check that raises must not end the timer (nothing would watch)
            verdict = looked("the liveness check", False, repr(exc), cause="check")
        if verdict is None:
            if reported:
                log.warning("consumer progresses again")
            STALLED.set(0)
            reported = False
            return
        if not reported:
            STALLS.labels(watch.cause).inc()
        STALLED.set(1)
        reported = True
        if settings.on_stall == "exit":
            log.critical("consumer stalled: %s; exiting with status %d for the supervisor to restart the worker",
                         verdict, EX_TEMPFAIL)
            log.error("pending tasks at the stall:\n%s", task_stacks())
            _stop_and_exit(app, settings.exit_grace_s)
        else:
            log.error("consumer stalled: %s", verdict)

    app.timer(settings.check_every_s, name="hpcguard.liveness")(check_liveness)
    return watch
