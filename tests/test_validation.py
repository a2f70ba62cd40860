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
