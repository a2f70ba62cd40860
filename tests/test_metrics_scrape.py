"""Prometheus: the worker's metrics served by start_metrics_server and scraped over HTTP."""
from __future__ import annotations

import socket
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from hpcguard.streams import metrics


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int) -> dict[tuple[str, tuple], float]:
    deadline = time.monotonic() + 5
    while True:
        try:
            resp = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
            break
        except requests.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    assert resp.status_code == 200 and resp.headers["Content-Type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(resp.text) for s in family.samples}


@pytest.fixture(scope="module")
def metrics_port():
    port = _free_port()
    metrics.start_metrics_server(port)
    return port


def test_counters_gauges_and_histograms_are_served(metrics_port):
    before = _scrape(metrics_port)
    topic = (("topic", "test.scrape.samples"),)
    metrics.RECORDS_IN.labels(topic="test.scrape.samples").inc(3)
    metrics.RECORDS_OUT.labels(topic="test.scrape.samples").inc()
    metrics.DEAD_LETTERS.labels(source="test.scrape", error_kind="json").inc(2)
    metrics.CONSUMER_LAG.labels(topic="test.scrape.samples", partition="0").set(17)
    metrics.PREDICTIONS.labels(model="test-scrape", outcome="warn").inc()
    metrics.ACTIONS.labels(kind="checkpoint", source="test-scrape").inc(4)
    metrics.ACKS.labels(kind="checkpoint", status="applied").inc()
    metrics.INFERENCE_SECONDS.labels(model="test-scrape").observe(0.003)
    metrics.WINDOW_STATE.labels(table="test-scrape").set(5)
    after = _scrape(metrics_port)

    def delta(name, labels):
        key = (name, tuple(sorted(labels)))
        return after[key] - before.get(key, 0.0)

    assert delta("hpcguard_records_in_total", topic) == 3
    assert delta("hpcguard_records_out_total", topic) == 1
    assert delta("hpcguard_dead_letters_total", (("source", "test.scrape"), ("error_kind", "json"))) == 2
    assert after[("hpcguard_consumer_lag", (("partition", "0"), ("topic", "test.scrape.samples")))] == 17
    assert delta("hpcguard_predictions_total", (("model", "test-scrape"), ("outcome", "warn"))) == 1
    assert delta("hpcguard_actions_total", (("kind", "checkpoint"), ("source", "test-scrape"))) == 4
    assert delta("hpcguard_action_acks_total", (("kind", "checkpoint"), ("status", "applied"))) == 1
    assert delta("hpcguard_inference_seconds_count", (("model", "test-scrape"),)) == 1
    assert delta("hpcguard_inference_seconds_bucket", (("le", "0.005"), ("model", "test-scrape"))) == 1
    assert delta("hpcguard_inference_seconds_bucket", (("le", "0.0025"), ("model", "test-scrape"))) == 0
    assert after[("hpcguard_window_state_size", (("table", "test-scrape"),))] == 5


def test_sink_outcomes_reach_the_endpoint(metrics_port):
    from hpcguard.connectors.influx import InfluxSink, InfluxWriteError

    class Down:
        def write(self, body):
            raise InfluxWriteError("down")

        def close(self):
            pass

    before = _scrape(metrics_port)
    sink = InfluxSink(Down(), buffer_points=2, background=False)
    for i in range(5):
        sink.add("ProbeResult", {"probe_id": str(i), "probe_type": "ior", "start": 0, "end": i, "runtime_s": 1.0})
    sink.flush()
    after = _scrape(metrics_port)
    key = ("hpcguard_sink_points_total", (("outcome", "dropped_overflow"),))
    assert after[key] - before.get(key, 0.0) == 3 == sink.stats["dropped_overflow"]
    sink.close(timeout_s=0.05)



def test_a_decided_action_adds_its_estimated_node_hours(metrics_port):
    """Each newly decided action adds its reason's node-hours: spent = node_hours_cost, saved (gross) =
    expected_node_hours_saved + node_hours_cost; reasons without them (CanarIO's) add nothing."""
    from hpcguard.streams.agents_decide import make_action

    reason = {"branch": "checkpoint:no-spare", "failure_probability": 0.8, "node_hours_at_risk": 3.0,
              "node_hours_cost": 0.25, "expected_node_hours_saved": 0.8 * 3.0 - 0.25}
    decided = make_action({"kind": "checkpoint", "job_id": "4086", "nodes": ["n1", "n2"], "source": "test-hours",
                           "reason": reason}, "m@n1@100", 100.0, None)
    losing = make_action({"kind": "migrate", "job_id": "4087", "nodes": ["n3"], "source": "test-hours",
                          "reason": {"node_hours_cost": 0.5, "expected_node_hours_saved": -0.75}}, "m@n3@100", 100.0,
                         None)
    canario = make_action({"kind": "delay", "job_id": "4088", "source": "canario", "reason": {"branch": "io-delay"}},
                          "canario@fs@100", 100.0, None)
    before = _scrape(metrics_port)
    for action in (decided, losing, canario):
        metrics.count_action(action)
    after = _scrape(metrics_port)

    def delta(name, kind):
        key = (name, (("kind", kind),))
        return after[key] - before.get(key, 0.0)

    assert delta("hpcguard_node_hours_spent_total", "checkpoint") == pytest.approx(0.25)
    assert delta("hpcguard_node_hours_saved_total", "checkpoint") == pytest.approx(2.4)  # 0.8 × 3 node-hours
    assert delta("hpcguard_node_hours_spent_total", "migrate") == pytest.approx(0.5)
    assert delta("hpcguard_node_hours_saved_total", "migrate") == 0.0  # expected to save less than nothing: 0
    assert delta("hpcguard_node_hours_saved_total", "delay") == delta("hpcguard_node_hours_spent_total", "delay") == 0
    counted = ("hpcguard_actions_total", (("kind", "checkpoint"), ("source", "test-hours")))
    assert after[counted] - before.get(counted, 0.0) == 1  # and the action itself, once
