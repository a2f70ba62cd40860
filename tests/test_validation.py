"""Strict validation: hostile values never reach a scheduler command."""
import pytest

from hpcguard.connectors.validation import (ValidationError, validate_action, validate_job_id, validate_node,
                                            validate_nodes, validate_partition, validate_reason, validate_signal,
                                            validate_user)

HOSTILE_NODES = ["n1;touch pwned", "$(reboot)", "n1\nn2", "-n1", "n" * 64, "n1 n2", "`id`", "n[1-4]", "n1&&x",
                 "n1|cat", "", "n1'", 'n1"', "n1>x", "ü1"]
HOSTILE_JOBS = ["42;rm -rf /", "$(id)", "-1", "42\n", "", "42 43", "0x2a", "1" * 11, "42_", "42_$(x)"]
HOSTILE_REASONS = ["fan\nfailing", "$(touch pwned)", "a;b", "State=RESUME", "x" * 129, "`id`", " leading", "a|b",
                   "a>b", "-x"]


@pytest.mark.parametrize("value", HOSTILE_NODES)
def test_hostile_node_names_are_refused(value):
    with pytest.raises(ValidationError) as err:
        validate_node(value)
    assert err.value.field == "nodes"


@pytest.mark.parametrize("value", HOSTILE_JOBS + [True, -3, None, 4.2])
def test_hostile_job_ids_are_refused(value):
    with pytest.raises(ValidationError):
        validate_job_id(value)


@pytest.mark.parametrize("value", HOSTILE_REASONS)
def test_hostile_reasons_are_refused(value):
    with pytest.raises(ValidationError):
        validate_reason(value)


def test_valid_values_pass_unchanged():
    assert validate_job_id("4242") == "4242"
    assert validate_job_id(17) == "17"
    assert validate_job_id("1234_7") == "1234_7"
    assert validate_node("gpu-01.rack3") == "gpu-01.rack3"
    assert validate_nodes(["n1", "n2", "n1"]) == ["n1", "n2"]
    assert validate_partition("debug") == "debug"
    assert validate_user("alice.b") == "alice.b"
    assert validate_reason("fan failing: lead 5 min, p=0.9".replace("=", " ")) == "fan failing: lead 5 min, p 0.9"


@pytest.mark.parametrize("value,expected", [("USR1", "USR1"), ("SIGUSR2", "USR2"), ("term", "TERM"), (10, "10"),
                                            ("64", "64")])
def test_signals_normalised(value, expected):
    assert validate_signal(value) == expected


@pytest.mark.parametrize("value", ["USR3", "USR1;x", "65", "0", "", "SIG", "-9"])
def test_bad_signals_refused(value):
    with pytest.raises(ValidationError):
        validate_signal(value)


def test_nodes_must_be_a_list_not_a_string():
    with pytest.raises(ValidationError, match="list"):
        validate_nodes("n1,n2")


@pytest.mark.parametrize("action,field", [
    ({"kind": "drain", "nodes": ["n1"]}, "action_id"),
    ({"action_id": "a", "kind": "reboot", "nodes": ["n1"]}, "kind"),
    ({"action_id": "a", "kind": "checkpoint"}, "job_id"),
    ({"action_id": "a", "kind": "drain", "nodes": []}, "nodes"),
    ({"action_id": "a", "kind": "drain", "nodes": ["n1"], "reason": {"text": "x\ny"}}, "reason"),
    ({"action_id": "a", "kind": "drain", "nodes": ["n1"], "reason": "free text"}, "reason"),
    ({"action_id": "a", "kind": "reschedule", "job_id": "4", "reason": {"hold": "yes"}}, "reason.hold"),
    ({"action_id": "a", "kind": "drain", "nodes": ["n1"], "deadline": float("nan")}, "deadline"),
    ({"action_id": "a;b", "kind": "drain", "nodes": ["n1"]}, "action_id"),
    ({"action_id": "a", "kind": "drain", "nodes": ["n1"], "source": "x y"}, "source"),
])
def test_validate_action_names_the_bad_field(action, field):
    with pytest.raises(ValidationError) as err:
        validate_action(action)
    assert err.value.field == field


def test_validate_action_defaults_reason_from_source_and_kind():
    va = validate_action({"action_id": "act-1", "kind": "migrate", "job_id": 42, "nodes": ["n3"],
                          "source": "failure-ensemble", "reason": {"lead_minutes": 5.0}, "deadline": 1.7e9})
    assert (va.job_id, va.nodes, va.reason_text, va.deadline) == ("42", ("n3",), "failure-ensemble migrate", 1.7e9)


# -- the door: safe_loads, check_record, NodeInventory -------------------------------------
import json  # noqa: E402
import math  # noqa: E402

from hpcguard.connectors.validation import (DoorLimits, NodeInventory, check_not_ahead, check_record,  # noqa: E402
                                            json_depth, require_samples, safe_loads)
from hpcguard.settings import Settings  # noqa: E402

NOW = 1679690000.0
LIMITS = DoorLimits.from_settings(Settings().door)
SAMPLE = {"node": "n001", "time": 1679682808.0, "source": "ipmi", "values": {"cpu_temp": 51.0}, "v": 1}
PREDICTION = {"node": "n001", "time": 1679682800.0, "model": "m", "model_version": "x", "failure_probability": 0.9,
              "warn": True, "lead_minutes": 5, "sample_time": 1679682800, "v": 1}
JOB = {"job_id": "4242", "event": "start", "time": 1679682800.0, "nodes": ["n001", "n002"], "num_nodes": 2,
       "user": "alice", "partition": "batch", "v": 1}
PROBE = {"probe_id": "probe.1", "probe_type": "ior-write", "start": 1679682800.0, "end": 1679682860.0,
         "runtime_s": 60.0, "node": "n001"}
ACTION = {"action_id": "act-1", "kind": "migrate", "source": "failure-ensemble", "reason": {"lead_minutes": 5.0},
          "time": 1679682900.0, "job_id": "4242", "nodes": ["n001"], "deadline": 1679683100.0}
ACK = {"action_id": "act-1", "status": "applied", "adapter": "dry-run", "time": 1679682901.0, "kind": "migrate",
       "job_id": "4242", "nodes": ["n001"], "detail": "ok", "output": "line1\nline2"}
LDMS = {"timestamp": 1679682808.0, "ProducerName": "n001", "component_id": 1, "job_id": 0, "read_bytes": 1234,
        "write_bytes": -5, "dev_name": "eth0"}
VALID = {"NodeSample": SAMPLE, "NodePrediction": PREDICTION, "JobEvent": JOB, "ProbeResult": PROBE,
         "Action": ACTION, "ActionAck": ACK, "ldms": LDMS}


@pytest.mark.parametrize("kind", sorted(VALID))
def test_valid_records_pass_the_door(kind):
    out = check_record(kind, json.loads(json.dumps(VALID[kind])), LIMITS, now=NOW)
    assert set(out) <= set(VALID[kind]) and all(out[k] == VALID[kind][k] for k in out)


HUGE = "n" * 100_000
HOSTILE = [
    # (kind, field changes, expected error kind, field named in the error)
    ("NodePrediction", {"node": 42}, "bad_id", "node"),  # issue 14 item 1: crashed the worker
    ("NodePrediction", {"time": 1}, "bad_time", "time"),
    ("NodePrediction", {"time": "1679682800"}, "bad_type", "time"),
    ("NodePrediction", {"time": math.nan}, "not_finite", "time"),
    ("NodePrediction", {"time": math.inf}, "not_finite", "time"),
    ("NodePrediction", {"time": -math.inf}, "not_finite", "time"),
    ("NodePrediction", {"time": 1e308}, "bad_time", "time"),
    ("NodePrediction", {"time": -5.0}, "bad_time", "time"),
    ("NodePrediction", {"time": NOW + 86400 * 365 * 50}, "bad_time", "time"),
    ("NodePrediction", {"failure_probability": 1.5}, "out_of_range", "failure_probability"),
    ("NodePrediction", {"warn": "yes"}, "bad_type", "warn"),
    ("NodePrediction", {"lead_minutes": -1}, "out_of_range", "lead_minutes"),
    ("NodePrediction", {"detail": {"x": math.nan}}, "not_finite", "detail"),
    ("NodePrediction", {"extra": 1}, "unknown_field", "extra"),
    ("NodePrediction", {"v": 2}, "out_of_range", "v"),
    ("NodeSample", {"node": HUGE}, "bad_id", "node"),
    ("NodeSample", {"node": "n1\x00"}, "bad_id", "node"),
    ("NodeSample", {"node": "nöde1"}, "bad_id", "node"),
    ("NodeSample", {"node": "n1;touch /tmp/pwned"}, "bad_id", "node"),
    ("NodeSample", {"node": "$(reboot)"}, "bad_id", "node"),
    ("NodeSample", {"values": {}}, "no_values", "values"),
    ("NodeSample", {"values": {"cpu_temp": math.nan}}, "not_finite", "values.cpu_temp"),
    ("NodeSample", {"values": {"cpu_temp": 1e308}}, "out_of_range", "values.cpu_temp"),
    ("NodeSample", {"values": {"cpu_temp": "51"}}, "bad_type", "values.cpu_temp"),
    ("NodeSample", {"values": {"cpu_temp": True}}, "bad_type", "values.cpu_temp"),
    ("NodeSample", {"values": [51.0]}, "bad_type", "values"),
    ("NodeSample", {"job_id": "42;rm -rf /"}, "bad_id", "job_id"),
    ("NodeSample", {"source": "ipmi\x00"}, "bad_value", "source"),
    ("NodeSample", {"source": "x" * 1000}, "too_large", "source"),
    ("JobEvent", {"job_id": "$(id)"}, "bad_id", "job_id"),
    ("JobEvent", {"job_id": HUGE}, "bad_id", "job_id"),
    ("JobEvent", {"nodes": ["n1", "n2|cat"]}, "bad_id", "nodes"),
    ("JobEvent", {"nodes": "n1,n2"}, "bad_type", "nodes"),
    ("JobEvent", {"event": "explode"}, "bad_value", "event"),
    ("JobEvent", {"num_nodes": -1}, "out_of_range", "num_nodes"),
    ("JobEvent", {"user": "Robert'); DROP"}, "bad_id", "user"),
    ("JobEvent", {"time_limit_s": math.inf}, "not_finite", "time_limit_s"),
    ("ProbeResult", {"runtime_s": -3.0}, "out_of_range", "runtime_s"),
    ("ProbeResult", {"end": 1679682700.0}, "bad_time", "end"),
    ("ProbeResult", {"probe_id": "p;x"}, "bad_id", "probe_id"),
    ("Action", {"kind": "reboot"}, "bad_value", "kind"),
    ("Action", {"action_id": "a b"}, "bad_id", "action_id"),
    ("Action", {"deadline": 1e308}, "bad_time", "deadline"),
    ("Action", {"reason": "text"}, "bad_type", "reason"),
    ("ActionAck", {"status": "exploded"}, "bad_value", "status"),
    ("ActionAck", {"output": "a\x00b"}, "bad_value", "output"),
    ("ldms", {"read_bytes": math.nan, "write_bytes": None}, "no_values", "row"),  # all-NaN row
    ("ldms", {"ProducerName": "n1`id`"}, "bad_id", "ProducerName"),
    ("ldms", {"timestamp": -1.0}, "bad_time", "timestamp"),
    ("ldms", {"read_bytes": {"x": 1}}, "bad_type", "read_bytes"),
    ("ldms", {"read_bytes": 1e300}, "out_of_range", "read_bytes"),
    ("ldms", {"write_bytes": 10 ** 400}, "out_of_range", "write_bytes"),  # beyond the float range
]


@pytest.mark.parametrize("kind,change,error_kind,field_name", HOSTILE,
                         ids=[f"{k}-{next(iter(c))}-{e}-{i}" for i, (k, c, e, _) in enumerate(HOSTILE)])
def test_hostile_records_are_refused_with_kind_and_reason(kind, change, error_kind, field_name):
    data = {**VALID[kind], **change}
    with pytest.raises(ValidationError) as err:
        check_record(kind, data, LIMITS, now=NOW)
    assert (err.value.kind, err.value.field) == (error_kind, field_name)
    assert err.value.reason.startswith(field_name) and len(err.value.reason) < 400


def test_ldms_out_of_range_names_the_field_and_value_that_failed():
    # issue 58 item 4: a meminfo row with MemTotal -5e20 was refused "beyond ±2^64 (3.82929e+07)", the row's
    # largest value instead of the one that failed
    row = {"timestamp": 1679682808.0, "ProducerName": "n001", "component_id": 1, "MemTotal": -5e20,
           "MemFree": 38292900, "MemAvailable": 1000}
    with pytest.raises(ValidationError) as err:
        check_record("ldms", row, LIMITS, now=NOW)
    assert (err.value.kind, err.value.field) == ("out_of_range", "MemTotal")
    assert err.value.reason == "MemTotal: -5e+20 is beyond ±2^64"


def test_missing_required_field_is_named():
    with pytest.raises(ValidationError) as err:
        check_record("NodeSample", {k: v for k, v in SAMPLE.items() if k != "time"}, LIMITS, now=NOW)
    assert (err.value.kind, err.value.field) == ("missing_field", "time")


def test_non_object_record_is_refused():
    with pytest.raises(ValidationError) as err:
        check_record("NodeSample", [SAMPLE], LIMITS, now=NOW)
    assert err.value.kind == "bad_type"


def test_time_ahead_of_wall_clock_within_skew_passes_and_beyond_fails():
    assert check_record("NodeSample", {**SAMPLE, "time": NOW + 299}, LIMITS, now=NOW)["time"] == NOW + 299
    with pytest.raises(ValidationError, match="ahead of the wall clock"):
        check_record("NodeSample", {**SAMPLE, "time": NOW + 301}, LIMITS, now=NOW)


def test_watermark_check():
    assert check_not_ahead(1000.0, None, LIMITS) == 1000.0
    with pytest.raises(ValidationError) as err:
        check_not_ahead(1301.0, 1000.0, LIMITS)
    assert err.value.kind == "bad_time"


@pytest.mark.parametrize("raw,kind", [
    (b"[" * 10_000 + b"]" * 10_000, "too_deep"),
    (b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "too_deep"),
    (b"[" * 40 + b"]" * 40, "too_deep"),  # parses, but deeper than max_depth
    (b"x" * (LIMITS.max_bytes + 1), "too_large"),
    (b'{"node": "n1"', "bad_json"),
    (b"\xff\xfe{}", "bad_json"),
    (b"1" * 5000, "bad_json"),  # over Python's integer-digits limit
    (12, "bad_type"),
])
def test_safe_loads_refuses_with_reason(raw, kind):
    with pytest.raises(ValidationError) as err:
        safe_loads(raw, max_bytes=LIMITS.max_bytes, max_depth=LIMITS.max_depth)
    assert err.value.kind == kind and err.value.reason


def test_safe_loads_accepts_records_and_moderate_nesting():
    assert safe_loads(json.dumps(SAMPLE).encode(), max_bytes=4096, max_depth=3) == SAMPLE
    assert safe_loads("[" * 32 + "]" * 32, max_bytes=4096, max_depth=32) is not None
    assert json_depth([[[]]]) == 3 and json_depth(5) == 0


def test_require_samples_refuses_an_envelope_without_readings():
    assert require_samples([SAMPLE], "x") == [SAMPLE]
    with pytest.raises(ValidationError) as err:
        require_samples([], "IPMI envelope")
    assert err.value.kind == "no_values"


def test_inventory_is_bounded_under_20000_fake_ids():
    inv = NodeInventory(max_nodes=64)
    real = [f"n{i:03d}" for i in range(32)]
    assert all(inv.admit(n) for n in real)
    admitted = sum(inv.admit(f"fake{i:05d}") for i in range(20_000))
    assert admitted == 32 and len(inv) == 64 and inv.refused == 20_000 - 32
    assert all(inv.admit(n) for n in real)  # real nodes stay admitted
    assert "quarantine" in inv.reason("fake19999") and "door.nodes" in inv.reason("fake19999")


def test_fake_names_on_sample_topics_cannot_lock_out_a_node_slurm_names():
    """Issue 58 item 2: 4,100 invented names on a sample topic filled the 4,096-node inventory, and every real node
    not seen yet was refused from then on.  Sample-only names are quarantined (bounded); a node a job record names
    is admitted whatever the quarantine holds, before or after the flood, and leaves the quarantine."""
    inv = NodeInventory()  # the default configuration: no door.nodes, max_nodes 4096
    assert inv.admit("n0001")  # a real node whose samples came before any job record: quarantined, processed
    flood = sum(inv.admit(f"fake{i:05d}") for i in range(4_100))
    assert flood == 4_095 and len(inv.quarantined) == 4_096 and inv.refused == 5
    assert not inv.admit("n0002")  # sample-only and the quarantine is full: refused, the reason says what to do
    assert "door.nodes" in inv.reason("n0002") and "job record" in inv.reason("n0002")
    assert inv.name(["n0001", "n0002", "n0002", "x;y"]) == 2  # a job record names them (x;y is no node name)
    assert inv.admit("n0002") and inv.admit("n0001") and "n0001" not in inv.quarantined
    assert inv.admit("n0003") and not inv.admit("n0004")  # n0001's place in the quarantine went to the next name
    named_first = NodeInventory(max_nodes=4)  # named before any sample: never enters the quarantine
    named_first.name(["n9"])
    assert all(named_first.admit(f"fake{i}") for i in range(4)) and named_first.admit("n9")
    assert named_first.named == {"n9"} and len(named_first) == 5


def test_slurm_named_nodes_are_bounded_too_and_a_configured_inventory_learns_nothing():
    inv = NodeInventory(max_nodes=3)
    assert inv.name([f"j{i}" for i in range(5)]) == 3 and inv.unnamed == 2
    assert inv.admit("j4") and "j4" in inv.quarantined  # beyond the named bound: a sample-only name
    fixed = NodeInventory(hosts="n[1-2]")
    assert fixed.name(["n3"]) == 0 and not fixed.admit("n3") and fixed.named == set()
    assert NodeInventory(pattern=r"n\d+").name(["gpu1", "n7"]) == 1  # the site's node rule holds for Slurm names


def test_inventory_from_hostlist_admits_only_listed_nodes():
    s = Settings.load(env={"HPCGUARD_DOOR__NODES": "n[001-004]"})
    inv = NodeInventory.from_settings(s.door)
    assert [inv.admit(n) for n in ("n001", "n004", "n005", "x;y")] == [True, True, False, False]
    assert len(inv) == 4 and "not in the configured inventory" in inv.reason("n005")


def test_inventory_pattern_from_settings():
    inv = NodeInventory.from_settings(Settings.load(env={"HPCGUARD_DOOR__NODE_PATTERN": r"n\d{3}"}).door)
    assert inv.admit("n001") and not inv.admit("gpu01") and inv.refused == 1
