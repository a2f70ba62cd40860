"""The door's fast paths (orjson, cached row shapes, the common NodeSample shape) accept and
refuse exactly what the full checks do, with the same result or the same error kind and reason;
the batch normalizer dead-letters each bad row once and goes on."""
import itertools
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from hpcguard.connectors.ldms import LdmsDecoder
from hpcguard.connectors.validation import (DoorLimits, ValidationError, _check_ldms_row, _check_schema,
                                            check_record, json_depth, safe_loads)
from hpcguard.streams.agents_normalize import normalize_ldms_rows
from hpcguard.streams.plumbing import Plumbing, encode

LIMITS = DoorLimits()
NOW = 1679690000.0
T0 = 1679682808.0
HOSTILE = [None, True, False, 0, -1, 1, 2 ** 63, 2 ** 64, 2 ** 64 + 1, -(2 ** 64) - 1, 2 ** 70, 10 ** 400, 1.5,
           1e15, 1e15 + 1, -1e16, 1e308, math.nan, math.inf, -math.inf, "", "n1", "x" * 300, "a\x00b", "4242",
           "12_3", "1;2", [], [1], {}, {"a": 1}, T0, NOW + 301.0, 946684799.0]


def _outcome(fn, *args):
    try:
        return ("ok", fn(*args))
    except ValidationError as err:
        return ("refused", err.kind, err.reason)


def _same(kind_check, full_check, record):
    fast, full = _outcome(kind_check, record), _outcome(full_check, record)
    assert repr(fast) == repr(full), record  # repr: NaN == NaN, and key order counts
    return fast[0]


def test_node_sample_fast_path_matches_the_full_check():
    base = {"node": "n001", "time": T0, "source": "ldms:lustre_client",
            "values": {"io_read_bytes": 1.5e8, "io_write_bytes": 3}, "job_id": "4026", "ingest_time": T0 + 1, "v": 1}
    variants = [base, {k: v for k, v in base.items() if k not in ("job_id", "ingest_time", "v")},
                {**base, "extra": 1}, {**base, "values": {"io read": 1.0}}, {**base, "values": {"a": 1, "b": None}},
                {**base, "values": {f"m{i}": 1.0 for i in range(LIMITS.max_list + 1)}}]
    for field in base:
        variants += [{**base, field: value} for value in HOSTILE]
        variants.append({k: v for k, v in base.items() if k != field})
    variants += [{**base, "values": {"io_read_bytes": value}} for value in HOSTILE]
    outcomes = {_same(lambda r: check_record("NodeSample", r, LIMITS, NOW),
                      lambda r: _check_schema("NodeSample", r, LIMITS, NOW), r) for r in variants}
    assert outcomes == {"ok", "refused"}


def test_ldms_row_fast_path_matches_the_full_check():
    base = {"timestamp": T0, "ProducerName": "n001", "component_id": 1, "job_id": 4026,
            "read_bytes": 15081616960933, "write_bytes": 4109450360608}
    variants = [base, {**base, "dev_name": "eth0"}, {**base, "bad name": 1}, {**base, "producer": "n002"},
                {**base, "instance": "n001/lustre"}, {k: v for k, v in base.items() if k != "ProducerName"},
                {**base, "read_bytes": None, "write_bytes": None}]
    for field in base:
        variants += [{**base, field: value} for value in HOSTILE]
    outcomes = {_same(lambda r: check_record("ldms", r, LIMITS, NOW), lambda r: _check_ldms_row(r, LIMITS, NOW), r)
                for r in variants}
    assert outcomes == {"ok", "refused"}


RAW = [b'{"a": 1}', b'{"a": 18446744073709551615}', b'{"a": 18446744073709551616}', b'{"a": -9223372036854775809}',
       b'{"a": 100000000000000000000000}', b'{"a": NaN}', b'{"a": Infinity}', b'{"a": -Infinity}', b'{"a": 1e400}',
       b'{"a": 1, "a": 2}', b'{"a": "\\ud800"}', b'\xff\xfe{\x00}\x00', '{"a": 1}'.encode("utf-16"),
       b'\x00\xffnot json{', b"", b"[1, 2, 3]", b"[" * 33 + b"]" * 33, b"[" * 32 + b"]" * 32, b"[" * 1100 + b"]" * 1100,
       b'{"a":' * 40 + b"1" + b"}" * 40, b'{"a": 0.1, "b": -0.0, "c": 1E-7, "d": "caf\\u00e9"}', b"  {}  ", b"{} x"]


def _stdlib(raw: bytes):
    """What the door read before orjson: the stdlib, then the depth bound."""
    try:
        value = json.loads(raw)
    except RecursionError:
        return ("refused", "too_deep")
    except (ValueError, TypeError):
        return ("refused", "bad_json")
    return ("refused", "too_deep") if json_depth(value) > LIMITS.max_depth else ("ok", value)


@pytest.mark.parametrize("raw", RAW)
def test_bounded_json_reads_what_the_stdlib_reads(raw):
    try:
        got = ("ok", safe_loads(raw, max_bytes=LIMITS.max_bytes, max_depth=LIMITS.max_depth))
    except ValidationError as err:
        got = ("refused", err.kind)
    want = _stdlib(raw)
    assert repr(got) == repr(want)  # repr: same types too (an int stays an int, NaN stays NaN)


def test_encode_writes_what_the_stdlib_reads_back_the_same():
    rng = np.random.default_rng(3)
    records = [{"node": f"n{i:03d}", "time": T0 + float(x), "values": {"io": float(y), "tiny": float(y) * 1e-9},
                "job_id": None if i % 3 else str(i), "nodes": ["n1", "n2"], "v": 1}
               for i, (x, y) in enumerate(rng.random((200, 2)))]
    for rec in records:
        assert json.loads(encode(rec)) == rec
    assert json.loads(encode({"p": np.float64(0.5), 3: "int key"})) == {"p": 0.5, "3": "int key"}  # stdlib fallback
    assert encode({"p": math.nan, "q": None}) == b'{"p":NaN,"q":null}'  # the next door refuses it as not finite
    assert encode({"d": [{"x": -math.inf}]}) == b'{"d":[{"x":-Infinity}]}'


class Rec(SimpleNamespace):
    pass


def test_batch_normalizer_dead_letters_each_bad_row_once_and_goes_on():
    box: list = []
    door = Plumbing(dlq="dlq", limits=LIMITS, outbox=box)
    route = {"ldms.lustre_client": ("lustre_client", "samples.io", "scratch"),
             "ldms.meminfo": ("meminfo", "samples.os", None)}
    rows = [{"timestamp": T0 + k, "ProducerName": "n1", "component_id": 1, "job_id": 7,
             "read_bytes": 1000 * k * k, "write_bytes": 500 * k} for k in range(4)]
    values = [json.dumps(r).encode() for r in rows]
    values[2:2] = [b"{broken", b"[" * 10_000 + b"]" * 10_000, json.dumps({**rows[0], "ProducerName": "n1;reboot"}).encode()]
    records = [Rec(topic="ldms.lustre_client", offset=i, value=v, timestamp=1_700_000_000_000 + i)
               for i, v in enumerate(values)]
    records.append(Rec(topic="ldms.meminfo", offset=0, timestamp=1_700_000_000_500, value=json.dumps(
        {"timestamp": T0, "ProducerName": "n2", "MemTotal": 1000, "MemFree": 100, "MemAvailable": 250}).encode()))
    normalize_ldms_rows(records, door, LdmsDecoder(), route)

    dead = [(v["offset"], v["error_kind"]) for t, _, v in box if t == "dlq"]
    assert dead == [(2, "bad_json"), (3, "too_deep"), (4, "bad_id")]
    # one NodeSamples record per output key: the file system's, and node n2's
    assert [(t, k, len(v["samples"])) for t, k, v in box if t != "dlq"] == [("samples.io", "scratch", 3),
                                                                             ("samples.os", "n2", 1)]
    io = [(k, s["values"]["io_read_bytes"], s["ingest_time"]) for t, k, v in box if t == "samples.io"
          for s in v["samples"]]
    # counters → rates between consecutive good rows; keyed by the file system; ingest time in seconds
    assert io == [("scratch", 1000.0, 1_700_000_000.001), ("scratch", 3000.0, 1_700_000_000.005),
                  ("scratch", 5000.0, 1_700_000_000.006)]
    assert [(k, s["values"]) for t, k, v in box if t == "samples.os" for s in v["samples"]] == [
        ("n2", {"mem_usage": 75.0})]
    assert len(box) == 5 and not any(isinstance(v, (bytes, str)) for v in itertools.chain(box))
