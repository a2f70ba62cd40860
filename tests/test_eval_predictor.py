"""A trained model's measured behaviour as the cluster simulator's predictor (issue 55 item 4)."""
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hpcguard.cli import app
from hpcguard.simulators.eval_predictor import emulate_eval_predictor, load_eval_predictor
from hpcguard.simulators.failures import FailureTrace, parse_predictor_spec, renewal_failures

LEADS = [2.5, 4.0, 7.5]        # minutes


def eval_json(tmp_path, warned=6, failures=8, episodes=3, node_days=50.0, leads=LEADS, by_family=None):
    online = {"failures": failures, "warned": warned, "warned_2min": warned, "false_alarm_episodes": episodes,
              "node_days": node_days, "median_lead_minutes": float(np.median(leads)) if leads else float("nan"),
              "warned_lead_minutes": leads,
              "by_family": by_family or {"fan": {"failures": 4, "caught": 4}, "psu": {"failures": 4, "caught": 2}}}
    path = tmp_path / "eval.json"
    path.write_text(json.dumps({"version": "hand-made", "online": online}))
    return path


def test_reads_rates_leads_and_families(tmp_path):
    m = load_eval_predictor(str(eval_json(tmp_path)))
    assert m.catch_rate == pytest.approx(0.75)
    assert m.family_rates == {"fan": 1.0, "psu": 0.5}
    assert m.false_alarms_per_node_day == pytest.approx(3 / 50.0)
    assert sorted(m.leads_s.tolist()) == [150.0, 240.0, 450.0]
    # failure probability of a warning: catches / (catches + false alarms) at the simulated failure rate
    assert m.precision_at(0.02) == pytest.approx(0.75 * 0.02 / (0.75 * 0.02 + 0.06))
    assert m.precision_at(0.0) == 0.0
    # several --data: the pooled evaluation's online figures
    pooled = tmp_path / "pooled.json"
    pooled.write_text(json.dumps({"pooled": json.loads(eval_json(tmp_path).read_text())}))
    assert load_eval_predictor(str(pooled)).catch_rate == pytest.approx(0.75)


def test_catch_rate_false_alarms_and_leads_on_a_large_trace(tmp_path):
    m = load_eval_predictor(str(eval_json(tmp_path)))
    nodes, horizon = 200, 200 * 86400.0
    fl = renewal_failures(np.random.default_rng(3), nodes, horizon, mtbf_h=24 * 20)
    n = len(fl)
    assert n > 1500
    p, precision = emulate_eval_predictor(np.random.default_rng(4), m, fl, nodes, horizon)
    caught = int((p.failure_index >= 0).sum())
    sd = (n * 0.75 * 0.25) ** 0.5
    assert abs(caught - 0.75 * n) < 4 * sd                      # binomial tolerance
    assert len(set(p.failure_index[p.failure_index >= 0].tolist())) == caught   # each failure warned at most once
    false = int((p.failure_index < 0).sum())
    expect = 0.06 * nodes * horizon / 86400.0                   # Poisson mean 2400
    assert abs(false - expect) < 4 * expect ** 0.5
    fa_nodes = p.node[p.failure_index < 0]
    assert fa_nodes.min() >= 0 and fa_nodes.max() < nodes and np.unique(fa_nodes).size > nodes * 0.9
    # leads come from the measured ones; a true warning points at its failure
    late = p.issued > 600.0
    assert set(np.round(p.lead_each[late], 6).tolist()) <= {150.0, 240.0, 450.0}
    tp = p.failure_index >= 0
    assert np.allclose(p.window_start[tp], fl.time[p.failure_index[tp]])
    assert np.allclose(p.issued[tp & late] + p.lead_each[tp & late], fl.time[p.failure_index[tp & late]])
    assert np.all(np.diff(p.issued) >= 0)
    lam = n / (nodes * horizon / 86400.0)
    assert precision == pytest.approx(0.75 * lam / (0.75 * lam + 0.06))


def test_family_rates_used_when_the_trace_knows_families(tmp_path):
    m = load_eval_predictor(str(eval_json(tmp_path, episodes=0)))
    k = 4000
    fam = np.array(["fan"] * (k // 2) + ["psu"] * (k // 2), dtype=object)
    fl = FailureTrace(time=np.linspace(1000.0, 1e7, k), node=np.arange(k) % 50, repair=np.zeros(k), family=fam)
    p, _ = emulate_eval_predictor(np.random.default_rng(0), m, fl, 50, 1.1e7)
    hit = p.failure_index[p.failure_index >= 0]
    assert (hit < k // 2).sum() == k // 2                        # fan: caught 4 of 4
    psu = int((hit >= k // 2).sum())
    assert abs(psu - k // 4) < 4 * (k / 2 * 0.25) ** 0.5        # psu: 2 of 4
    assert len(p) == len(hit)                                    # no false alarm at rate 0


def test_missing_and_garbled_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_eval_predictor(str(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        load_eval_predictor(str(bad))
    bad.write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match="online"):
        load_eval_predictor(str(bad))
    bad.write_text(json.dumps({"online": {"failures": 4, "warned_2min": "x", "node_days": 1,
                                          "false_alarm_episodes": 0}}))
    with pytest.raises(ValueError, match="warned_2min"):
        load_eval_predictor(str(bad))
    assert parse_predictor_spec("eval:some.json") == {"eval": "some.json"}
    assert parse_predictor_spec("precision=0.5,recall=0.4,lead=2m") == {"precision": 0.5, "recall": 0.4,
                                                                         "lead_s": 120.0}
    with pytest.raises(ValueError, match="eval:"):
        parse_predictor_spec("eval:")


def test_cli_accepts_eval_and_reports_bad_files(tmp_path):
    path = eval_json(tmp_path, episodes=1, node_days=100.0)
    runner = CliRunner()
    base = ["--nodes", "32", "--jobs", "120", "--failures", "exponential:mtbf=20d", "--seed", "2"]
    res = runner.invoke(app, ["simulate", "cluster", "--policy", "multilevel", "--predictor", f"eval:{path}",
                              *base, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["predictor"] == f"eval:{path}" and 0 < out["failure_probability"] < 1
    assert out["metrics"]
    res = runner.invoke(app, ["evaluate", "policies", "--policies", "multilevel", "--predictor", f"eval:{path}",
                              "--no-break-even", *base, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["break_even"] is False and set(out["results"]) == {"fcfs", "multilevel"}
    res = runner.invoke(app, ["simulate", "cluster", "--predictor", f"eval:{tmp_path / 'missing.json'}", *base])
    assert res.exit_code == 2 and "not found" in res.output
    (tmp_path / "garbled.json").write_text("[1, 2")
    res = runner.invoke(app, ["evaluate", "policies", "--predictor", f"eval:{tmp_path / 'garbled.json'}", *base])
    assert res.exit_code == 2 and "not JSON" in res.output
    # the emulated form keeps working
    res = runner.invoke(app, ["simulate", "cluster", "--policy", "multilevel", "--predictor",
                              "precision=0.7,recall=0.7,lead=5m", *base, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["failure_probability"] == pytest.approx(0.7)


def test_break_even_reaches_the_simulators_decisions(tmp_path):
    from hpcguard.models.policy import SiteCosts
    from hpcguard.simulators.cluster import ClusterSimulator, Costs, POLICIES
    from hpcguard.simulators.workload import synthetic_workload

    m = load_eval_predictor(str(eval_json(tmp_path, episodes=40, node_days=10.0)))    # 4 false alarms per node-day
    nodes, horizon = 32, 40 * 86400.0
    wl = synthetic_workload(np.random.default_rng(0), n_jobs=400, nodes=nodes)
    fl = renewal_failures(np.random.default_rng(1), nodes, horizon, mtbf_h=24 * 365)
    pred, p = emulate_eval_predictor(np.random.default_rng(2), m, fl, nodes, horizon)
    assert p < 0.01
    acts = {}
    for be in (True, False):
        sim = ClusterSimulator(wl, nodes, fl, POLICIES["multilevel"], costs=Costs(site=SiteCosts()),
                               predictions=pred, precision=p, break_even=be, horizon_s=horizon)
        sim.run()
        assert sim.decision.break_even is be
        acts[be] = len(sim.decisions)
    assert acts[True] < acts[False]


def test_no_failures_only_false_alarms(tmp_path):
    path = eval_json(tmp_path, episodes=20, node_days=10.0)
    res = CliRunner().invoke(app, ["simulate", "cluster", "--policy", "multilevel", "--predictor", f"eval:{path}",
                                   "--failures", "none", "--nodes", "16", "--jobs", "60", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["failure_probability"] == 0.0 and out["counts"]["true_predictions"] == 0
    assert out["counts"]["migrations"] == out["counts"]["safeguards"] == 0     # p = 0: nothing pays
