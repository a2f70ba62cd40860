"""Safety governor and exactly-once ledger, without Slurm (command/simulator/dry-run adapters)."""
import json
import os
import stat
import threading

import pytest

from hpcguard.connectors.adapters import CommandAdapter, DryRunAdapter, SimulatorAdapter, make_adapter
from hpcguard.connectors.governor import Governor, GovernorConfig, Ledger
from hpcguard.connectors.validation import validate_action
from hpcguard.settings import Settings

NO_LIMITS = dict(job_cooldown_s=0.0, node_cooldown_s=0.0, max_drained_fraction=1.0, total_nodes=100)


class Clock:
    def __init__(self, t=1_000_000.0):
        self.t = t

    def __call__(self):
        return self.t


def site_tool(tmp_path, exit_code=0, sleep_s=0.0):
    """A tiny site executable (POSIX sh) that logs its argv, one line per run, and its stdin."""
    log = tmp_path / "runs.txt"
    exe = tmp_path / f"site-tool-{exit_code}"
    exe.write_text(f"""#!/bin/sh
sleep {sleep_s}
echo "$*" >> {log}
cat >> {log}.stdin
echo >> {log}.stdin
echo "site tool done"
exit {exit_code}
""")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(exe), log


def runs(log):
    return log.read_text().splitlines() if log.exists() else []


def command_governor(tmp_path, config=None, clock=None, exit_code=0, sleep_s=0.0, ledger="ledger.sqlite"):
    exe, log = site_tool(tmp_path, exit_code, sleep_s)
    adapter = CommandAdapter({k: [exe] for k in ("checkpoint", "migrate", "reschedule", "delay", "release", "drain",
                                                 "resume")})
    gov = Governor(adapter, config or GovernorConfig(**NO_LIMITS), tmp_path / ledger, clock=clock or Clock())
    return gov, log


def drain(action_id, *nodes):
    return {"action_id": action_id, "kind": "drain", "nodes": list(nodes), "source": "policy",
            "reason": {"text": "predicted fan failure"}}


def checkpoint(action_id, job):
    return {"action_id": action_id, "kind": "checkpoint", "job_id": job, "source": "failure-ensemble",
            "reason": {"lead_minutes": 4}}


def test_command_adapter_passes_validated_fields_as_argv_and_json(tmp_path):
    gov, log = command_governor(tmp_path)
    ack = gov.apply(drain("a1", "n1", "n2"))
    assert ack.status == "applied" and "site tool done" in ack.output
    assert runs(log) == ["--action-id a1 --kind drain --nodes n1,n2 --reason predicted fan failure"]
    assert json.loads((tmp_path / "runs.txt.stdin").read_text())["nodes"] == ["n1", "n2"]


def test_duplicate_is_not_executed_again_also_after_restart(tmp_path):
    gov, log = command_governor(tmp_path)
    assert gov.apply(checkpoint("act-7", "42")).status == "applied"
    second = gov.apply(checkpoint("act-7", "42"))
    assert second.status == "duplicate" and "already applied" in second.detail
    gov.close()
    fresh, _ = command_governor(tmp_path)  # a restarted worker on the same ledger file
    assert fresh.apply(checkpoint("act-7", "42")).status == "duplicate"
    assert len(runs(log)) == 1


@pytest.mark.parametrize("action", [
    drain("h1", "n1;touch pwned"),
    drain("h2", "$(touch pwned)"),
    drain("h3", "n1\nn2"),
    drain("h4", "n" * 200),
    checkpoint("h5", "42;touch pwned"),
    checkpoint("h6", "$(id)"),
    {"action_id": "h7", "kind": "drain", "nodes": ["n1"], "reason": {"text": "x\n$(touch pwned)"}},
    {"action_id": "h8;touch pwned", "kind": "drain", "nodes": ["n1"]},
    {"action_id": "h9", "kind": "rm -rf", "nodes": ["n1"]},
    ["not", "an", "object"],
])
def test_hostile_values_are_refused_and_nothing_runs(tmp_path, action):
    gov, log = command_governor(tmp_path)
    ack = gov.apply(action)
    assert ack.status == "refused" and "invalid action" in ack.detail and "nothing was executed" in ack.detail
    assert runs(log) == []
    assert not (tmp_path / "pwned").exists()


def test_rate_limit_per_kind_refuses_then_recovers_after_window(tmp_path):
    clock = Clock()
    cfg = GovernorConfig(**{**NO_LIMITS, "rate_limits": {"checkpoint": (2, 600.0)}})
    gov, log = command_governor(tmp_path, cfg, clock)
    assert [gov.apply(checkpoint(f"c{i}", str(i))).status for i in range(3)] == ["applied", "applied", "refused"]
    assert "rate limit for checkpoint" in gov.apply(checkpoint("c9", "9")).detail
    assert gov.apply(drain("d1", "n1")).status == "applied"  # other kinds unaffected
    clock.t += 601
    assert gov.apply(checkpoint("c3", "3")).status == "applied"
    assert len(runs(log)) == 4


def test_refused_action_is_answered_from_the_ledger_until_an_operator_retries(tmp_path):
    clock = Clock()
    cfg = GovernorConfig(**{**NO_LIMITS, "rate_limits": {"checkpoint": (1, 60.0)}})
    gov, log = command_governor(tmp_path, cfg, clock)
    gov.apply(checkpoint("c1", "1"))
    assert gov.apply(checkpoint("c2", "2")).status == "refused"
    clock.t += 61  # the limit would allow it now, but a redelivery is not a new decision
    again = gov.apply(checkpoint("c2", "2"))
    assert again.status == "duplicate" and again.detail.startswith("already refused") and "rate limit" in again.detail
    gov.ledger.resolve("c2", "retry", clock.t)
    assert gov.apply(checkpoint("c2", "2")).status == "applied"
    assert gov.ledger.get("c2")["attempts"] == 2 and len(runs(log)) == 2


def test_drain_ceiling_counts_nodes_drained_by_hpcguard(tmp_path):
    cfg = GovernorConfig(**{**NO_LIMITS, "total_nodes": 10, "max_drained_fraction": 0.2})
    gov, log = command_governor(tmp_path, cfg)
    assert gov.apply(drain("d1", "n1", "n2")).status == "applied"
    ack = gov.apply(drain("d2", "n3"))
    assert ack.status == "refused" and "drain ceiling: 3 of 10" in ack.detail
    assert gov.apply({"action_id": "m1", "kind": "migrate", "job_id": "5", "nodes": ["n4"]}).status == "refused"
    assert gov.apply({"action_id": "r1", "kind": "resume", "nodes": ["n1"]}).status == "applied"
    assert gov.apply(drain("d3", "n3")).status == "applied"
    assert gov.ledger.drained_nodes() == {"n2", "n3"}


def test_checkpoint_then_drain_of_the_same_node_both_apply(tmp_path):
    """The decision policy emits checkpoint(job on n2) then drain(n2): the node cool-down must not block it."""
    gov, log = command_governor(tmp_path, GovernorConfig(total_nodes=100))  # default cool-downs
    assert gov.apply({**checkpoint("c1", "42"), "nodes": ["n2"]}).status == "applied"
    assert gov.apply(drain("d1", "n2")).status == "applied"


def test_dry_run_adapter_is_exempt_from_the_drain_ceiling(tmp_path):
    gov = Governor(DryRunAdapter(str(tmp_path / "audit.jsonl")), GovernorConfig(), tmp_path / "l.sqlite")
    assert gov.apply(drain("d1", "n1")).status == "would_apply"
    assert gov.ledger.get("d1")["status"] == "would_apply" and gov.ledger.drained_nodes() == set()


def test_dry_run_adapter_says_what_it_would_run(tmp_path):
    audit = tmp_path / "audit.jsonl"
    adapter = DryRunAdapter(str(audit), checkpoint_signal="USR2", migrate_grace_s=5)
    ack = adapter.apply({**checkpoint("c1", "4086"), "nodes": ["n1"]})
    assert (ack.status, ack.detail) == ("would_apply", "dry-run: would run: scancel --signal=USR2 --batch 4086")
    mig = adapter.apply({"action_id": "m1", "kind": "migrate", "job_id": "4085", "nodes": ["n9"],
                         "reason": {"text": "fan"}})
    assert mig.detail == ("dry-run: would run: scontrol update NodeName=n9 State=DRAIN 'Reason=hpcguard m1: fan'; "
                          "scancel --signal=USR2 --batch 4085; scontrol requeue 4085 (the last 5 s after the signal)")
    bad = adapter.apply(drain("d1", "n1;touch pwned"))  # validation still applies: nothing is planned
    assert bad.status == "refused" and bad.detail.startswith("invalid action:")
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["ack"]["status"], r["would_apply"]) for r in records] == [
        ("would_apply", True), ("would_apply", True), ("refused", False)]
    assert records[0]["command"] == [["scancel", "--signal=USR2", "--batch", "4086"]] and records[2]["command"] == []
    assert adapter.verify(checkpoint("c1", "4086"), 0.0).status == "would_apply"
    assert adapter.verify(checkpoint("c2", "4086"), 0.0).status == "not_applied"


def test_dry_run_plan_follows_the_adapter_settings(tmp_path):
    settings = Settings().with_overrides(adapter={"kind": "dry-run", "audit_log": str(tmp_path / "audit.jsonl"),
                                                  "checkpoint_signal": "SIGUSR2", "signal_scope": "full"})
    adapter = make_adapter("dry-run", settings)
    assert adapter.apply(checkpoint("c1", "7")).detail == "dry-run: would run: scancel --signal=USR2 --full 7"
    assert make_adapter("dry-run", settings, signal_scope="steps").plan(checkpoint("c1", "7")) == [
        ["scancel", "--signal=USR2", "7"]]


def test_would_apply_is_final_and_counts_against_no_limit(tmp_path):
    """A would_apply row is never run again by itself (a redelivery is a duplicate); an operator may retry it."""
    audit = tmp_path / "audit.jsonl"
    cfg = GovernorConfig(**{**NO_LIMITS, "rate_limits": {"checkpoint": (1, 3600.0)}, "job_cooldown_s": 3600.0})
    gov = Governor(DryRunAdapter(str(audit)), cfg, tmp_path / "l.sqlite", clock=Clock())
    assert gov.apply(checkpoint("c1", "42"), source="actions:0:1").status == "would_apply"
    again = gov.apply(checkpoint("c1", "42"))
    assert again.status == "duplicate" and again.detail.startswith("already would_apply")
    ack, delivered = gov.redelivery("c1", "actions:0:1")
    assert (ack.status, delivered) == ("would_apply", False)
    assert gov.apply(checkpoint("c2", "42")).status == "would_apply"  # nothing ran: no rate limit, no cool-down
    assert len(audit.read_text().splitlines()) == 2  # each id planned once
    row = gov.ledger.resolve("c1", "retry", 1_000_010.0)
    assert row["status"] == "retry" and gov.apply(checkpoint("c1", "42")).status == "would_apply"


def test_drain_ceiling_needs_a_node_count(tmp_path):
    cfg = GovernorConfig(**{**NO_LIMITS, "total_nodes": None})
    gov, _ = command_governor(tmp_path, cfg)
    assert "total node count is unknown" in gov.apply(drain("d1", "n1")).detail
    sim = Governor(SimulatorAdapter(total_nodes=4), cfg, tmp_path / "sim.sqlite")
    assert sim.apply(drain("d1", "n1")).status == "applied"  # the adapter knows the size


def test_job_and_node_cooldown(tmp_path):
    clock = Clock()
    cfg = GovernorConfig(**{**NO_LIMITS, "job_cooldown_s": 300.0, "node_cooldown_s": 900.0})
    gov, log = command_governor(tmp_path, cfg, clock)
    assert gov.apply(checkpoint("c1", "42")).status == "applied"
    ack = gov.apply({"action_id": "r1", "kind": "reschedule", "job_id": "42"})
    assert ack.status == "refused" and "job 42 is cooling down" in ack.detail
    assert gov.apply(checkpoint("c2", "43")).status == "applied"  # another job is fine
    assert gov.apply(drain("d1", "n1")).status == "applied"
    assert gov.apply({"action_id": "u1", "kind": "resume", "nodes": ["n1"]}).status == "applied"  # resume: not disruptive
    assert "node n1 is cooling down" in gov.apply(drain("d2", "n1")).detail
    assert gov.apply({**checkpoint("c3", "44"), "nodes": ["n1"]}).status == "applied"  # a job action on n1 is fine
    clock.t += 301
    assert gov.apply({"action_id": "r2", "kind": "reschedule", "job_id": "42"}).status == "applied"
    assert gov.apply(drain("d3", "n1")).status == "refused"
    clock.t += 600
    assert gov.apply(drain("d4", "n1")).status == "applied"


def test_allow_and_deny_lists_use_the_adapters_job_info(tmp_path):
    jobs = {"1": {"partition": "debug", "user": "alice"}, "2": {"partition": "gpu", "user": "bob"}}
    cfg = GovernorConfig(**NO_LIMITS, allow_partitions=("debug",), deny_users=("carol",), deny_jobs=("3",))
    gov = Governor(SimulatorAdapter(total_nodes=8, jobs=jobs), cfg, tmp_path / "l.sqlite")
    assert gov.apply(checkpoint("a", "1")).status == "applied"
    assert "partition 'gpu' of job 2 is not on the allow list" in gov.apply(checkpoint("b", "2")).detail
    assert "job 3 is on the deny list" in gov.apply(checkpoint("c", "3")).detail
    assert "partition of job 4 is unknown" in gov.apply(checkpoint("d", "4")).detail
    jobs["5"] = {"partition": "debug", "user": "carol"}
    gov.adapter.jobs.update(jobs)
    assert "user 'carol' of job 5 is on the deny list" in gov.apply(checkpoint("e", "5")).detail
    # without job_info, the action's own reason.partition/user is used
    plain, _ = command_governor(tmp_path, cfg)
    assert plain.apply({**checkpoint("f", "6"), "reason": {"partition": "debug", "user": "dave"}}).status == "applied"
    assert plain.apply({**checkpoint("g", "7"), "reason": {"partition": "gpu"}}).status == "refused"


def test_dry_run_checks_limits_but_executes_nothing(tmp_path):
    exe, log = site_tool(tmp_path)
    adapter = CommandAdapter({"drain": [exe]})
    dry = Governor(adapter, GovernorConfig(**{**NO_LIMITS, "dry_run": True}), tmp_path / "l.sqlite")
    ack = dry.apply(drain("d1", "n1"))
    assert ack.status == "skipped" and "dry-run" in ack.detail
    assert dry.apply(drain("d2", "n1;x")).status == "refused"
    assert runs(log) == []
    dry.close()
    real = Governor(adapter, GovernorConfig(**NO_LIMITS), tmp_path / "l.sqlite")
    assert real.apply(drain("d1", "n1")).status == "applied"  # a dry run does not consume the id
    assert len(runs(log)) == 1


def test_failed_action_is_retried_only_after_an_operator_says_so(tmp_path):
    gov, log = command_governor(tmp_path, exit_code=1)
    ack = gov.apply(drain("d1", "n1"))
    assert ack.status == "failed" and "exited 1" in ack.detail
    gov.close()
    good, _ = command_governor(tmp_path, exit_code=0)
    again = good.apply(drain("d1", "n1"))
    assert again.status == "duplicate" and again.detail.startswith("already failed")
    good.ledger.resolve("d1", "retry", 0.0, note="site tool fixed")
    assert good.apply(drain("d1", "n1")).status == "applied"
    assert good.ledger.get("d1")["attempts"] == 2


def test_interrupted_attempt_is_never_executed_twice(tmp_path):
    gov, log = command_governor(tmp_path)
    gov.ledger.claim(validate_action(drain("d1", "n1")), 0.0, "otherhost:1:x", str)  # a worker died after claiming
    gov.close()
    fresh, _ = command_governor(tmp_path)
    ack = fresh.apply(drain("d1", "n1"))
    assert ack.status == "duplicate" and "executing since" in ack.detail and "not executed twice" in ack.detail
    assert runs(log) == []


def test_concurrent_workers_execute_an_id_once(tmp_path):
    exe, log = site_tool(tmp_path, sleep_s=0.3)
    acks = []

    def worker():
        gov = Governor(CommandAdapter({"drain": [exe]}), GovernorConfig(**NO_LIMITS), tmp_path / "shared.sqlite")
        acks.append(gov.apply(drain("d1", "n1")).status)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(runs(log)) == 1
    assert sorted(acks)[0] == "applied" and acks.count("applied") == 1


def test_command_adapter_exit_codes_and_missing_kind(tmp_path):
    exe, log = site_tool(tmp_path, exit_code=3)
    adapter = CommandAdapter({"drain": [exe]})
    assert adapter.apply(drain("d1", "n1")).status == "skipped"
    assert "no command configured" in adapter.apply(checkpoint("c1", "1")).detail
    with pytest.raises(ValueError, match="absolute path"):
        CommandAdapter({"drain": ["site-drain"]})
    with pytest.raises(ValueError, match="unknown action kind"):
        CommandAdapter({"reboot": [exe]})


def test_config_validation_and_toml(tmp_path):
    with pytest.raises(ValueError, match="max_drained_fraction"):
        GovernorConfig(max_drained_fraction=1.5)
    with pytest.raises(ValueError):
        GovernorConfig(allow_partitions=("debug;rm",))
    with pytest.raises(ValueError, match="unknown action kind"):
        GovernorConfig(rate_limits={"reboot": (1, 60)})
    path = tmp_path / "gov.toml"
    path.write_text('[governor]\ndry_run = true\nmax_drained_fraction = 0.05\nallow_users = ["alice"]\n'
                    '[governor.rate_limits]\ndrain = [3, 600]\n')
    cfg = GovernorConfig.load(path)
    assert (cfg.dry_run, cfg.max_drained_fraction, cfg.allow_users, cfg.rate_limits) == (
        True, 0.05, ("alice",), {"drain": (3, 600.0)})
    path.write_text("max_drained = 0.1\n")
    with pytest.raises(ValueError, match="unknown keys max_drained"):
        GovernorConfig.load(path)


def test_from_settings_and_make_adapter(tmp_path):
    settings = Settings().with_overrides(adapter={"kind": "dry-run", "audit_log": str(tmp_path / "audit.jsonl"),
                                                  "ledger": str(tmp_path / "l.sqlite")})
    gov = Governor.from_settings(settings, config=GovernorConfig(**NO_LIMITS))
    assert isinstance(gov.adapter, DryRunAdapter)
    assert gov.apply(drain("d1", "n1")).status == "would_apply"
    assert json.loads((tmp_path / "audit.jsonl").read_text())["action"]["action_id"] == "d1"
    assert os.path.exists(tmp_path / "l.sqlite")
    assert make_adapter("simulator", total_nodes=3).node_count() == 3
    with pytest.raises(ValueError, match="unknown adapter"):
        make_adapter("flux")


def test_ledger_survives_reopen(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    va = validate_action(drain("d1", "n1"))
    assert ledger.claim(va, 1.0, "h:1:x", str) == ("claimed", "")
    assert ledger.claim(va, 2.0, "h:2:y", str)[0] == "duplicate"
    ledger.close()
    assert Ledger(tmp_path / "l.sqlite").get("d1")["status"] == "executing"


def test_limits_count_actions_in_flight(tmp_path):
    """Two threads draining different nodes at once cannot both pass a one-node ceiling."""
    exe, log = site_tool(tmp_path, sleep_s=0.5)
    gov = Governor(CommandAdapter({"drain": [exe]}), GovernorConfig(**{**NO_LIMITS, "total_nodes": 10,
                                                                        "max_drained_fraction": 0.1}),
                   tmp_path / "l.sqlite")
    acks = []
    threads = [threading.Thread(target=lambda n=n: acks.append(gov.apply(drain(f"d{n}", f"n{n}")).status))
               for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(acks) == ["applied", "refused"] and len(runs(log)) == 1
