"""Through the real broker: the node agent loads a failure-ensemble model directory,
evaluates due nodes in batches and publishes each network's probability, the vote,
the lead time and the model version; the job's UC for its node count is in the action."""
import numpy as np
import pytest
import torch

from _failure_data import GRID, synthetic_grid
from _pipeline import WorkerProcess
from hpcguard.connectors.model_store import save_model
from hpcguard.models.failure.dataset import build_events
from hpcguard.models.failure.training import train_ensemble
from hpcguard.models.features import CANONICAL_SENSORS
from hpcguard.models.metrics import uc_probability

pytestmark = pytest.mark.broker
torch.set_num_threads(1)
T0 = 1_700_000_000.0


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    v, fn, ft = synthetic_grid(seed=3)
    ev = build_events(v, 1_000_000.0, GRID, fn, ft, ok_ratio=10, seed=0)
    cal = build_events(v, 1_000_000.0, GRID, fn, ft, max_ok=1500, seed=5)
    cal = cal.subset(np.flatnonzero(cal.labels == 0))
    ens, _ = train_ensemble(ev, seed=0, calibration=cal, mc_splits=2, max_epochs=150)
    ens.version = "failure-ensemble-test"
    out = tmp_path_factory.mktemp("ensemble")
    save_model(ens, out, {"metrics": {"lstm": {"fpr": 2e-4}}})
    return str(out)


def test_ensemble_agent_predicts_in_batches_and_warns(kafka_settings, tmp_path, model_dir):
    rng = np.random.default_rng(7)
    steps, fail_step = 100, 90
    values = rng.normal(50.0, 1.0, size=(2, steps, 10))
    values[0, fail_step - 40:fail_step, 0] += 4.0 * np.linspace(0, 1, 40)  # the precursor the nets learned
    feed = [(node, {"node": node, "time": T0 + GRID * k, "source": "ipmi", "v": 1,
                    "values": dict(zip(CANONICAL_SENSORS, map(float, values[i, k])))})
            for k in range(fail_step) for i, node in enumerate(("n1", "n2"))]
    with WorkerProcess(kafka_settings, tmp_path, model_dir, roles=["windows", "jobs", "decide", "adapter"],
                       env={"HPCGUARD_WORKER__GRID_SOURCES": "ipmi"}) as w:
        w.produce(w.topics.jobs, [("7", {"job_id": "7", "event": "start", "time": T0, "nodes": ["n1", "n9"],
                                         "num_nodes": 2, "v": 1}),
                                  # the job source's progress marker: no more job events until the failure, so
                                  # the decisions need not wait for the job stream (worker.job_wait_s)
                                  ("", {"event": "progress", "time": T0 + GRID * fail_step, "v": 1})])
        w.wait_for(w.topics.node_jobs, lambda r: len(r) >= 2)
        w.produce(w.topics.samples_ipmi, feed)
        preds = w.wait_for(w.topics.predictions, lambda r: sum(p["node"] == "n2" for p in r) >= 60)
        actions = w.wait_for(w.topics.actions, lambda r: len(r) >= 1)

    assert {p["model"] for p in preds} == {"failure-ensemble"}
    assert {p["model_version"] for p in preds} == {"failure-ensemble-test"}
    assert all(len(p["network_probabilities"]) == 6 and p["vote"] for p in preds)
    warned = [p for p in preds if p["warn"]]
    assert warned and {p["node"] for p in warned} == {"n1"}
    assert all(2 <= p["lead_minutes"] <= 7 for p in warned)
    assert min(p["sample_time"] for p in warned) < T0 + GRID * fail_step  # before the failure
    a = actions[0]
    assert a["job_id"] == "7" and a["kind"] in ("migrate", "checkpoint")
    assert a["reason"]["uc"] == pytest.approx(float(uc_probability(2e-4, 2)))
