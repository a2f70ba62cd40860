"""Line protocol: escaping, field types, timestamps, record kinds (no server; see test_influx.py)."""
from __future__ import annotations

import math

import pytest

from hpcguard.connectors.lineprotocol import (KINDS, SCHEMA, LineProtocolError, SampleDownsampler, escape_key,
                                              format_field, format_line, measurement_fields, time_ns, to_line)

T = 1_679_682_808.001751

RECORDS = {
    "NodeSample": {"node": "n001", "time": T, "source": "ipmi", "values": {"cpu_temp": 50.0, "bytes_in": 7}},
    "NodePrediction": {"node": "n001", "time": T, "model": "m", "model_version": "1", "failure_probability": 0.5,
                       "warn": False, "lead_minutes": 3, "network_probabilities": [0.1] * 6},
    "IoDegradation": {"system": "s", "window_start": T - 60, "window_end": T, "model": "knn",
                      "features": {"read_min": 1.0}, "degraded": True, "probability": 0.9},
    "Action": {"action_id": "a", "kind": "drain", "source": "policy", "time": T, "reason": {"x": 1},
               "nodes": ["n1"]},
    "ActionAck": {"action_id": "a", "status": "applied", "adapter": "dry-run", "time": T},
    "ProbeResult": {"probe_id": "p", "probe_type": "ior", "start": T - 5, "end": T, "runtime_s": 5},
}


def _split(line: str) -> tuple[str, dict[str, str], dict[str, str], int]:
    """Tiny parser for lines without escapes (enough to check structure)."""
    head, fields, ts = line.split(" ")
    measurement, *tags = head.split(",")
    return (measurement, dict(t.split("=", 1) for t in tags),
            dict(f.split("=", 1) for f in fields.split(",")), int(ts))


def test_kinds_cover_every_point_record():
    from hpcguard.streams import records

    for kind in KINDS:
        assert isinstance(getattr(records, kind), type)
    assert set(RECORDS) == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_writes_only_schema_names(kind):
    measurement, tags, fields, ts = _split(to_line(kind, RECORDS[kind]))
    schema = SCHEMA[kind]
    assert measurement == schema.measurement
    assert set(tags) <= set(schema.tags) and set(fields) <= set(schema.fields)
    assert ts == 1_679_682_808_001_751_000


def test_numbers_are_floats_bools_are_bools_strings_quoted():
    _, _, fields, _ = _split(to_line("NodePrediction", RECORDS["NodePrediction"]))
    assert fields["lead_minutes"] == "3.0" and fields["warn"] == "false" and fields["p5"] == "0.1"
    _, tags, fields, _ = _split(to_line("Action", RECORDS["Action"]))
    assert fields["action_id"] == '"a"' and fields["node_count"] == "1.0" and "job_id" not in tags


def test_escaping():
    assert escape_key("a,b=c d") == "a\\,b\\=c\\ d"
    assert escape_key("back\\slash") == "back\\\\slash"
    assert escape_key("x\ny") == "x\\ny"
    assert format_field('q"\\') == '"q\\"\\\\"'
    assert format_field(1e300) == "1e+300"


def test_non_finite_and_none_fields_are_left_out():
    assert format_field(float("nan")) is None and format_field(math.inf) is None and format_field(None) is None
    line = format_line("m", {"t": "v"}, {"a": float("nan"), "b": 2.5}, 1)
    assert line == "m,t=v b=2.5 1"
    with pytest.raises(LineProtocolError, match="no finite field"):
        format_line("m", {}, {"a": float("nan")}, 1)


def test_tags_sorted_and_empty_tags_omitted():
    assert format_line("m", {"z": "1", "a": "2", "e": ""}, {"f": 1.0}, 5) == "m,a=2,z=1 f=1.0 5"


def test_time_is_exact_to_the_microsecond():
    assert time_ns(T) == 1_679_682_808_001_751_000
    assert time_ns(0.000001) == 1000
    with pytest.raises(LineProtocolError):
        time_ns(float("nan"))


@pytest.mark.parametrize("kind,record,message", [
    ("Nope", {}, "unknown record kind"),
    ("NodeSample", {"node": "n", "time": 1.0, "source": "s"}, "lacks 'values'"),
    ("NodeSample", {"node": "n", "time": 1.0, "source": "s", "values": {"x": "hot"}}, "must be a number"),
    ("NodeSample", {"node": "n", "time": "later", "source": "s", "values": {"x": 1.0}}, "bad time"),
    ("NodeSample", {"node": ["n"], "time": 1.0, "source": "s", "values": {"x": 1.0}}, "must be a string"),
    ("NodePrediction", {**RECORDS["NodePrediction"], "network_probabilities": [0.1] * 7}, "at most 6"),
    ("ProbeResult", "not a dict", "must be a mapping"),
])
def test_bad_records_raise_clear_errors(kind, record, message):
    with pytest.raises(LineProtocolError, match=message):
        to_line(kind, record)


def test_measurement_fields_derived_from_schema():
    mf = measurement_fields()
    assert set(mf) == {s.measurement for s in SCHEMA.values()}
    assert "cpu_temp" in mf["node_sample"]["fields"] and "read_median" in mf["io_window"]["fields"]


def test_downsampler():
    d = SampleDownsampler(30)
    kept = [t for t in range(0, 120, 15) if d.keep("n", "ipmi", t)]
    assert kept == [0, 30, 60, 90]
    assert d.keep("other", "ipmi", 15)  # per node
    assert d.keep("n", "ipmi", 10)  # time went backwards (replay restart): keep
    with pytest.raises(ValueError):
        SampleDownsampler(-1)


def test_sink_topics_cover_every_kind():
    from hpcguard.connectors.influx import SINK_TOPICS
    from hpcguard.streams.topics import CANONICAL

    assert set(SINK_TOPICS) <= set(CANONICAL)
    assert set(SINK_TOPICS.values()) == set(KINDS)
