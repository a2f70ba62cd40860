"""Stall detection (streams/liveness.py): the bookkeeping that decides a consumer is stuck."""
import logging

import pytest

from hpcguard.streams.liveness import COMMIT_LOGGER, ProgressWatch, _CommitErrorCounter


def test_no_stall_while_any_partition_moves():
    w = ProgressWatch(stall_after_s=60, max_commit_errors=10)
    for t in range(0, 300, 10):  # "a" is held back behind "b" (backpressure), "b" keeps moving
        assert w.observe(float(t), {"a": 0, "b": t}, {"a": 6, "b": 1000}) is None


def test_stall_when_nothing_moves_while_data_waits():
    w = ProgressWatch(stall_after_s=60, max_commit_errors=10)
    assert w.observe(0.0, {"a": 5, "b": 7}, {"a": 6, "b": 7}) is None
    assert w.observe(59.0, {"a": 5, "b": 7}, {"a": 9, "b": 7}) is None
    reason = w.observe(60.0, {"a": 5, "b": 7}, {"a": 9, "b": 7})
    assert reason.startswith("no progress for 60 s") and "4 more records" in reason and w.cause == "progress"
    assert w.observe(61.0, {"a": 6, "b": 7}, {"a": 9, "b": 7}) is None  # it moved again


def test_idle_consumer_with_nothing_to_read_is_not_stalled():
    w = ProgressWatch(stall_after_s=60, max_commit_errors=10)
    for t in range(0, 600, 30):
        assert w.observe(float(t), {"a": 9}, {"a": 9}) is None


def test_repeated_commit_errors_without_progress_stall():
    w = ProgressWatch(stall_after_s=60, max_commit_errors=5)
    handler = _CommitErrorCounter(w)
    logger = logging.getLogger(COMMIT_LOGGER)
    logger.addHandler(handler)
    try:
        assert w.observe(0.0, {"a": 9}, {"a": 9}) is None
        for _ in range(5):
            logger.error("OffsetCommit failed for group %s on partition %s with offset %s: %s", "g", "tp", 9,
                         "UnknownTopicOrPartitionError")
        logger.error("Heartbeat failed: %r", "x")  # not a commit error
        assert w.commit_errors == 5
        assert w.observe(30.0, {"a": 9}, {"a": 9}) is None  # not yet long enough
        reason = w.observe(61.0, {"a": 9}, {"a": 9})
        assert reason.startswith("5 offset commits failed") and w.cause == "commit"
    finally:
        logger.removeHandler(handler)


def test_progress_resets_commit_errors():
    w = ProgressWatch(stall_after_s=60, max_commit_errors=2)
    w.observe(0.0, {"a": 1}, {"a": 5})
    w.commit_failed()
    w.commit_failed()
    assert w.observe(30.0, {"a": 2}, {"a": 5}) is None and w.commit_errors == 0


def test_silent_broker_stalls_after_the_limit_and_an_answer_resets_it():
    w = ProgressWatch(stall_after_s=60, max_commit_errors=10)
    assert w.broker_silent(0.0) is None
    assert w.broker_silent(59.0) is None
    assert "has not answered" in w.broker_silent(60.0) and w.cause == "broker"
    assert w.observe(61.0, {"a": 1}, {"a": 1}) is None
    assert w.broker_silent(62.0) is None  # the silence starts again


@pytest.mark.broker
def test_committed_offsets_are_read_from_the_broker_not_from_faust(kafka_bootstrap):
    """faust records an offset as committed even when the commit failed; the check asks the broker."""
    import uuid
    from collections import namedtuple

    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    from hpcguard.connectors.kafka import ensure_topics
    from hpcguard.settings import KafkaSettings
    from hpcguard.streams.liveness import BrokerCommits

    k = KafkaSettings(bootstrap=kafka_bootstrap)
    topic, group = f"liveness-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    ensure_topics(k, [topic])
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(5):
        producer.send(topic, b"%d" % i)
    producer.flush()
    producer.close()
    TP = namedtuple("TP", "topic partition")  # faust's TP has the same two fields
    reader = BrokerCommits(k, group)
    try:
        assert reader.read([TP(topic, 0)]) == {TP(topic, 0): None}  # nothing committed yet
        member = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False)
        member.assign([TopicPartition(topic, 0)])
        member.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1)})
        member.close()
        assert reader.read([TP(topic, 0)]) == {TP(topic, 0): 3}
    finally:
        reader.close()


@pytest.mark.broker
def test_group_backlog_counts_records_after_the_committed_offset_to_the_true_end(kafka_bootstrap):
    """Six records sent as one batch are counted to the fetch's high watermark, after the group's offset."""
    import uuid

    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    from hpcguard.connectors.kafka import ensure_topics
    from hpcguard.settings import KafkaSettings
    from hpcguard.streams.liveness import BrokerCommits

    k = KafkaSettings(bootstrap=kafka_bootstrap)
    topic, group = f"backlog-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    ensure_topics(k, [topic])
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=200)
    for i in range(6):
        producer.send(topic, b"%d" % i, partition=0)
    producer.flush()
    producer.close()
    reader = BrokerCommits(k, group)
    try:
        assert reader.backlog([topic]) == {(topic, 0): (None, 6)}  # nothing committed: all six wait
        member = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False)
        member.assign([TopicPartition(topic, 0)])
        member.commit({TopicPartition(topic, 0): OffsetAndMetadata(4, "", -1)})
        member.close()
        assert reader.backlog([topic]) == {(topic, 0): (4, 2)}
        member = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False)
        member.assign([TopicPartition(topic, 0)])
        member.commit({TopicPartition(topic, 0): OffsetAndMetadata(6, "", -1)})
        member.close()
        assert reader.backlog([topic]) == {(topic, 0): (6, 0)}
        assert reader.read([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 6}  # same consumer, still reads
    finally:
        reader.close()


class _FakeConsumer:
    """What the check reads of faust's consumer: nothing assigned (a recovery pauses every input)."""

    _read_offset: dict = {}
    _committed_offset: dict = {}

    def assignment(self):
        return set()

    async def highwaters(self, *tps):
        return {}


def _installed_check(monkeypatch, hpc=None, **app_fields):
    """The liveness check ``install`` registers on an app, with a 0.1 s stall time, reporting (not exiting)."""
    from types import SimpleNamespace

    from hpcguard.settings import LivenessSettings
    from hpcguard.streams import liveness

    monkeypatch.setattr(liveness, "QUERY_TIMEOUT_S", 0.05)
    timers = []
    conductor = SimpleNamespace(_topic_name_index={"raw.ipmi": None}, acks_enabled_for=lambda t: True)
    consumer = app_fields.pop("consumer", None) or _FakeConsumer()
    app = SimpleNamespace(conf=SimpleNamespace(id="app-test"), consumer=consumer, topics=conductor,
                          timer=lambda every, name: timers.append, hpc=hpc, **app_fields)
    app.tables = SimpleNamespace(changelog_topics=set(), recovery=app_fields.get("recovery"))
    liveness.install(app, LivenessSettings(check_every_s=0.01, stall_after_s=0.1, on_stall="log"))
    timers[0].app = app  # a test may change what the app says (in_recovery) between checks
    return timers[0]


def _run_checks(check, seconds: float, then=lambda: None, until=lambda: False) -> None:
    """Run ``check`` every 0.03 s for ``seconds`` or until ``until()``, then ``then()`` (still inside the
    event loop)."""
    import asyncio
    import time

    async def loop():
        try:
            end = time.monotonic() + seconds
            while time.monotonic() < end and not until():
                await check()
                await asyncio.sleep(0.03)
        finally:
            then()

    asyncio.run(loop())


def test_a_table_recovery_that_reads_nothing_is_a_stall(monkeypatch, caplog):
    """A recovery pauses every input and the group check stands aside for it: one that never ends is reported."""
    from types import SimpleNamespace

    recovery = SimpleNamespace(active_offsets={"node-grids-changelog/0": 17})
    check = _installed_check(monkeypatch, in_recovery=True, recovery=recovery)
    with caplog.at_level(logging.ERROR, logger="hpcguard.liveness"):
        _run_checks(check, 0.5)
    stalls = [r.getMessage() for r in caplog.records if "consumer stalled" in r.getMessage()]
    assert stalls and "a table recovery has read no changelog record" in stalls[0], stalls


def test_a_broker_query_that_never_returns_is_a_stall(monkeypatch, caplog):
    """kafka-python's calls can wait without end: a check that cannot see the group's commits says so."""
    import threading
    from types import SimpleNamespace

    from hpcguard.settings import KafkaSettings
    from hpcguard.streams.liveness import BrokerCommits

    release = threading.Event()
    monkeypatch.setattr(BrokerCommits, "backlog", lambda self, topics: release.wait(10))
    check = _installed_check(monkeypatch, hpc=SimpleNamespace(settings=SimpleNamespace(
        kafka=KafkaSettings(bootstrap="127.0.0.1:9"))), in_recovery=False)
    with caplog.at_level(logging.WARNING, logger="hpcguard.liveness"):
        _run_checks(check, 0.6, then=release.set)  # the hung call returns before the loop's executor shuts down
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("the group's backlog query cannot look") for m in messages), \
        messages
    stalls = [m for m in messages if "consumer stalled" in m]
    assert stalls and "the group's backlog query could not look" in stalls[0], messages


class _ReadAhead(_FakeConsumer):
    """faust read raw.ipmi to offset 1172 and believes it committed all of it (a swallowed commit failure)."""

    def __init__(self):
        from faust.types import TP

        self.tp = TP("raw.ipmi", 0)
        self._read_offset, self._committed_offset, self._paused_partitions = {self.tp: 1172}, {self.tp: 1173}, set()

    def assignment(self):
        return {self.tp}

    async def highwaters(self, *tps):
        return {tp: 1173 for tp in tps}


def _broker(monkeypatch, read, backlog):
    from types import SimpleNamespace

    from hpcguard.settings import KafkaSettings
    from hpcguard.streams.liveness import BrokerCommits

    monkeypatch.setattr(BrokerCommits, "read", lambda self, tps: read(tps))
    monkeypatch.setattr(BrokerCommits, "backlog", lambda self, topics: backlog(topics))
    return SimpleNamespace(settings=SimpleNamespace(kafka=KafkaSettings(bootstrap="127.0.0.1:9")))


def _refused(*_):
    raise ConnectionError("refused")


def test_a_commit_stuck_at_the_broker_is_a_stall_though_every_other_query_fails(monkeypatch, caplog):
    """The broker holds 421 while faust read to 1172 and believes it committed: a query that fails in
    between says nothing of the commits (faust's own record must not stand in and restart the clock)."""
    calls = []

    def read(tps):
        calls.append(1)
        if len(calls) % 2:
            raise ConnectionError("refused")
        return {tp: 421 for tp in tps}

    check = _installed_check(monkeypatch, hpc=_broker(monkeypatch, read, _refused), in_recovery=False,
                             consumer=_ReadAhead())
    commit_stall = "consumer stalled: offsets of TP(topic='raw.ipmi', partition=0) not committed past 421"

    def stalls():
        return [r.getMessage() for r in caplog.records if "consumer stalled" in r.getMessage()]

    # Which verdict comes first depends on the machine's speed (the failing backlog query is blind
    # after 2 × the stall time, the commits after 1 × counted from their first answer, and a loaded
    # executor can time a read out): the commit stall must come, whatever else does.
    with caplog.at_level(logging.ERROR, logger="hpcguard.liveness"):
        _run_checks(check, 10.0, until=lambda: any(m.startswith(commit_stall) for m in stalls()))
    assert len(calls) > 4 and any(m.startswith(commit_stall) for m in stalls()), stalls()


def test_a_commit_that_waits_for_a_moving_table_recovery_is_no_stall(monkeypatch, caplog):
    """A recovery holds the streams back and then seeks them to the committed offsets: the commit clock
    stands aside while it reads on (the CI stall exit of 2026-12-07: predictions.node/0 committed at 3,
    read to 1066, during a recovery), and runs again once it ended."""
    class Moving:  # a recovery that reads its changelog on
        n = 0

        @property
        def active_offsets(self):
            self.n += 1
            return {"node-grids-changelog/0": self.n}

    hpc = _broker(monkeypatch, lambda tps: {tp: 421 for tp in tps}, lambda topics: {})
    check = _installed_check(monkeypatch, hpc=hpc, in_recovery=True, recovery=Moving(), consumer=_ReadAhead())

    def stalls():
        return [r.getMessage() for r in caplog.records if "consumer stalled" in r.getMessage()]

    with caplog.at_level(logging.ERROR, logger="hpcguard.liveness"):
        _run_checks(check, 0.6)
        assert stalls() == [], stalls()
        check.app.in_recovery = False  # the recovery ended and the commit still does not move: a stall
        _run_checks(check, 10.0, until=lambda: bool(stalls()))
    assert stalls() and "not committed past 421" in stalls()[0], stalls()


def test_a_group_backlog_query_that_always_fails_is_blind_though_the_commits_answer(monkeypatch, caplog):
    """The group's backlog is probed every few checks: the committed-offset reads answering in between do
    not make a backlog query that never answers look."""
    check = _installed_check(monkeypatch, hpc=_broker(monkeypatch, lambda tps: {tp: 1173 for tp in tps}, _refused),
                             in_recovery=False, consumer=_ReadAhead())
    with caplog.at_level(logging.ERROR, logger="hpcguard.liveness"):
        _run_checks(check, 0.5)
    stalls = [r.getMessage() for r in caplog.records if "consumer stalled" in r.getMessage()]
    assert stalls and "the group's backlog query could not look" in stalls[0] \
        and "(last: ConnectionError('refused'))" in stalls[0], stalls


def test_a_liveness_check_that_raises_goes_on_and_becomes_a_stall(monkeypatch, caplog):
    """A bug in the check must not end its timer silently: the worker would run unwatched."""
    class Broken(_FakeConsumer):
        def assignment(self):
            raise KeyError("no assignment yet")

    check = _installed_check(monkeypatch, consumer=Broken())
    with caplog.at_level(logging.WARNING, logger="hpcguard.liveness"):
        _run_checks(check, 0.5)
    messages = [r.getMessage() for r in caplog.records]
    assert sum(m.startswith("the liveness check cannot look (KeyError") for m in messages) == 1, messages
    stalls = [m for m in messages if "consumer stalled" in m]
    assert stalls and "the liveness check could not look" in stalls[0] \
        and "(last: KeyError('no assignment yet'))" in stalls[0], messages


def test_a_batch_readers_group_that_stopped_committing_is_a_stall(monkeypatch, caplog):
    """The LDMS rows are read by a group of their own (``<app_id>-ldms``, outside Faust): after a broker
    restart it stopped committing while 16,972 rows waited, and the Faust group's commits hid it."""
    from types import SimpleNamespace

    from hpcguard.settings import KafkaSettings
    from hpcguard.streams.liveness import BrokerCommits

    def backlog(self, topics):
        if self.group_id == "app-test-ldms":
            return {("ldms.lustre_client", 0): (500, 16972)}
        return {(t, 0): (1173, 0) for t in topics}  # Faust's group: committed to the end

    monkeypatch.setattr(BrokerCommits, "read", lambda self, tps: {tp: 1173 for tp in tps})
    monkeypatch.setattr(BrokerCommits, "backlog", backlog)
    hpc = SimpleNamespace(settings=SimpleNamespace(kafka=KafkaSettings(bootstrap="127.0.0.1:9")),
                          batch_groups={"app-test-ldms": (["ldms.lustre_client"], None)})
    check = _installed_check(monkeypatch, hpc=hpc, in_recovery=False, consumer=_ReadAhead())
    with caplog.at_level(logging.ERROR, logger="hpcguard.liveness"):
        _run_checks(check, 5.0, until=lambda: any("consumer stalled" in r.getMessage() for r in caplog.records))
    stalls = [r.getMessage() for r in caplog.records if "consumer stalled" in r.getMessage()]
    assert stalls and "ldms.lustre_client/0 past 500" in stalls[0] and "16972 records follow" in stalls[0], stalls
