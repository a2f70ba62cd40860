"""The temporal job join (models/jobs.py): answers by event time, whatever the arrival order."""
import json
import random

import pytest

from hpcguard.connectors.replay import RawMessage, with_job_progress
from hpcguard.connectors.sacct import decode_slurm_envelope, progress_envelope
from hpcguard.connectors.validation import DoorLimits, ValidationError, check_record
from hpcguard.models.jobs import JobTimeline

EVENTS = [
    {"job_id": "4086", "event": "submit", "time": 0.0, "num_nodes": 2, "time_limit_s": 7200},
    {"job_id": "4086", "event": "start", "time": 100.0, "nodes": ["n008", "n009"]},
    {"job_id": "4100", "event": "submit", "time": 50.0, "num_nodes": 1},
    {"job_id": "4086", "event": "end", "time": 3700.0, "nodes": ["n008", "n009"]},
    {"job_id": "4100", "event": "start", "time": 3700.0, "nodes": ["n008"]},
    {"job_id": "4200", "event": "submit", "time": 60.0, "num_nodes": 4},
    {"job_id": "4300", "event": "submit", "time": 70.0},
    {"job_id": "4300", "event": "end", "time": 80.0},  # cancelled while pending
]


def answers(tl):
    return ([(j or {}).get("job_id") for j in (tl.job_at("n008", t) for t in (99, 100, 1000, 3699.9, 3700, 9999))],
            [j["job_id"] for j in tl.queued_at(90.0)], [j["job_id"] for j in tl.queued_at(5000.0)],
            sorted(tl.busy_nodes_at(1000.0)), tl.watermark)


def test_job_at_is_the_run_containing_the_time_in_any_arrival_order():
    expected = answers(JobTimeline().extend(EVENTS))
    assert expected[0] == [None, "4086", "4086", "4086", "4100", "4100"]
    assert expected[1] == ["4086", "4100", "4200"]  # 4300 was cancelled at 80; submit order
    assert expected[2] == ["4200"]
    assert expected[3] == ["n008", "n009"]
    rng = random.Random(3)
    for _ in range(20):
        shuffled = EVENTS[:]
        rng.shuffle(shuffled)
        assert answers(JobTimeline().extend(shuffled)) == expected


def test_answers_before_the_watermark_are_final():
    """Events later than t never change job_at(t): what the decision agent relies on."""
    tl = JobTimeline()
    for e in sorted(EVENTS, key=lambda e: e["time"]):
        if tl.final_at(1000.0):
            assert tl.job_at("n008", 1000.0)["job_id"] == "4086"
        tl.add(e)
    assert tl.final_at(1000.0) and not tl.final_at(1000.0, lateness_s=3000.0)


def test_state_round_trips_through_json_and_eviction_bounds_it():
    tl = JobTimeline(retention_s=1000.0).extend(EVENTS)
    back = JobTimeline.from_state(json.loads(json.dumps(tl.to_state())))
    assert answers(back) == answers(tl)
    back.add({"job_id": "9", "event": "submit", "time": 10_000.0})
    assert back.evict() == 1  # 4086 ended at 3700, more than 1000 s before the watermark
    assert back.job_at("n009", 1000.0) is None and back.job_at("n008", 9999.0)["job_id"] == "4100"


def test_bad_event_time_is_refused():
    import pytest

    with pytest.raises(ValueError, match="not finite"):
        JobTimeline().add({"job_id": "1", "event": "start", "time": float("nan"), "nodes": ["n1"]})


def test_a_progress_marker_moves_the_watermark_through_the_door_and_adds_no_job():
    """A replay's raw progress envelope → normalize's JobProgress → the timeline's watermark (and nothing else)."""
    now = 1_700_000_100.0
    raw = check_record("slurm", json.loads(json.dumps(progress_envelope(1_700_000_000.0, "replay"))), DoorLimits(), now)
    event = check_record("JobEvent", {**decode_slurm_envelope(raw), "v": 1}, DoorLimits(), now)
    tl = JobTimeline()
    tl.add({"job_id": "7", "event": "start", "time": 1_699_999_000.0, "nodes": ["n1"]})
    tl.add(event)
    assert tl.watermark == 1_700_000_000.0 and tl.to_state()["jobs"].keys() == {"7"}
    for bad in ({**event, "job_id": "8"}, {**event, "nodes": ["n1"]}, {**event, "time": "soon"}):
        with pytest.raises(ValidationError):
            check_record("JobEvent", bad, DoorLimits(), now)
    # the replay's markers: time order, and each after every record up to its time
    rng = random.Random(1)
    times = sorted(round(rng.uniform(0, 300)) for _ in range(200))  # whole seconds: ties too
    msgs = [RawMessage("raw.slurm" if i % 3 == 0 else "raw.ipmi", str(i), {}, t, "f", "slurm" if i % 3 == 0 else "ipmi")
            for i, t in enumerate(times)]
    out = list(with_job_progress(msgs, "raw.slurm", every_s=15.0))
    marks = [(i, m.time) for i, m in enumerate(out) if m.key == ""]
    assert [t for _, t in marks] == sorted(t for _, t in marks) and marks[-1] == (len(out) - 1, msgs[-1].time)
    assert all(m.time <= t for i, t in marks for m in out[:i]) and all(m.time > t for i, t in marks[:-1] for m in out[i + 1:])
    assert 15 <= len(marks) <= 21 and [m for m in out if m.key != ""] == msgs
