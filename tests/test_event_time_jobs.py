"""The temporal job join (models/jobs.py): answers by event time, whatever the arrival order."""
import json
import random

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
