"""A hole at the head of Faust's acknowledged offsets (lost in a rebalance) is filled, so commits go on."""
from collections import defaultdict
from types import SimpleNamespace

from intervaltree import IntervalTree

from hpcguard.streams import worker


def _consumer(committed: int, acked: range, read: int, in_flight=()):
    c = SimpleNamespace(_acked=defaultdict(list), _acked_index=defaultdict(set), _gap=defaultdict(IntervalTree),
                        _committed_offset=defaultdict(lambda: None), _read_offset={"t": read},
                        _unacked_messages=list(in_flight))
    c._committed_offset["t"] = committed
    c._acked["t"].extend(acked)
    c._acked_index["t"].update(acked)
    return c


def _commits(new_offset, c, monkeypatch, steps=(0.0, 5.0, 11.0)):
    out = []
    for now in steps:
        monkeypatch.setattr(worker.time, "monotonic", lambda now=now: now)
        out.append(new_offset(c, "t"))
    return out


def test_faust_alone_never_commits_past_a_lost_head(monkeypatch):
    # predictions.node/0 after a kill -9: committed 3, offsets 3 and 4 read, their acknowledgements lost
    assert _commits(worker._faust_new_offset(), _consumer(3, range(5, 1067), 1066), monkeypatch) == [None] * 3


def test_a_lost_head_is_filled_after_it_stood(monkeypatch):
    c = _consumer(3, range(5, 1067), 1066)
    assert _commits(worker._new_offset_filling_gaps_once, c, monkeypatch) == [None, None, 1067]


def test_a_head_in_flight_or_not_read_yet_waits(monkeypatch):
    in_flight = _consumer(3, range(5, 1067), 1066, [SimpleNamespace(tp="t", offset=4)])
    assert _commits(worker._new_offset_filling_gaps_once, in_flight, monkeypatch,
                    steps=(0.0, 30.0, 60.0)) == [None] * 3
    behind = _consumer(3, range(5, 1067), 3)  # read offset set back by a seek: records 3.. come again
    assert _commits(worker._new_offset_filling_gaps_once, behind, monkeypatch,
                    steps=(0.0, 30.0, 60.0)) == [None] * 3
