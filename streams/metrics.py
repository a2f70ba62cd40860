"""Prometheus metrics of a worker (served on ``--metrics-port``).

One registry per process (``connectors.metrics.REGISTRY``, with the metrics the connectors
update: the InfluxDB sink's); agents update these objects.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from hpcguard.connectors.metrics import REGISTRY, SINK_POINTS  # noqa: F401  (served with the rest)

RECORDS_IN = Counter("hpcguard_records_in_total", "Records consumed, per topic", ["topic"], registry=REGISTRY)
RECORDS_OUT = Counter("hpcguard_records_out_total", "Records published, per topic", ["topic"], registry=REGISTRY)
SAMPLES_OUT = Counter("hpcguard_samples_out_total", "Canonical samples published, per topic (each sample of a "
                      "NodeSamples batch counts: unlike records, the count does not depend on how inputs were batched)",
                      ["topic"], registry=REGISTRY)
WARNING_EPISODES = Counter("hpcguard_warning_episodes_total", "Warning episodes started, per model (each is a "
                           "false alarm unless a failure follows: with node-days judged, the false-alarm rate's "
                           "upper bound before labels)", ["model"], registry=REGISTRY)
NODE_DAYS = Counter("hpcguard_node_days_judged_total", "Node-days of predictions the decision agent judged (each "
                    "prediction counts its grid step), per model", ["model"], registry=REGISTRY)
DUPLICATE_SAMPLES = Counter("hpcguard_duplicate_samples_total", "Samples already in their node's open step "
                            "(a record the broker stored twice, e.g. a producer's retry after a broker crash): "
                            "counted once, per topic", ["topic"], registry=REGISTRY)
DEAD_LETTERS = Counter("hpcguard_dead_letters_total", "Rejected inputs, per source and error kind",
                       ["source", "error_kind"], registry=REGISTRY)
CONSUMER_LAG = Gauge("hpcguard_consumer_lag", "Consumer lag in records, per topic and partition",
                     ["topic", "partition"], registry=REGISTRY)
PREDICTIONS = Counter("hpcguard_predictions_total", "Node predictions, per model and outcome (warn|ok)",
                      ["model", "outcome"], registry=REGISTRY)
VOTE_THRESHOLD = Gauge("hpcguard_vote_threshold", "The vote threshold the false-alarm budget holds (worker.false_alarms), "
                       "per input partition", ["partition"], registry=REGISTRY)
BUDGET_NODE_DAYS = Gauge("hpcguard_budget_node_days", "Node-days the false-alarm budget controller has learnt from, "
                         "per input partition", ["partition"], registry=REGISTRY)
LABELS = Counter("hpcguard_labels_total", "Labels the stream recognised (hpcguard.labels): failures by source, "
                 "warning episodes by outcome (true|false)", ["kind", "outcome"], registry=REGISTRY)
ACTIONS = Counter("hpcguard_actions_total", "Actions emitted, per kind and source", ["kind", "source"],
                  registry=REGISTRY)
ACKS = Counter("hpcguard_action_acks_total", "Action acks, per kind and status", ["kind", "status"],
               registry=REGISTRY)
NODE_HOURS_SAVED = Counter("hpcguard_node_hours_saved_total", "Estimated node-hours the decided actions are expected "
                           "to save, per action kind: at decision time, from each action's reason "
                           "(expected_node_hours_saved + node_hours_cost: failure probability × node-hours at risk)",
                           ["kind"], registry=REGISTRY)
NODE_HOURS_SPENT = Counter("hpcguard_node_hours_spent_total", "Estimated node-hours the decided actions cost, per "
                           "action kind: at decision time, from each action's reason (node_hours_cost: checkpoint or "
                           "migration time × nodes, a drained node's held hours)", ["kind"], registry=REGISTRY)
INFERENCE_SECONDS = Histogram("hpcguard_inference_seconds", "Model inference time per batch", ["model"],
                              registry=REGISTRY,
                              buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0))
WINDOW_STATE = Gauge("hpcguard_window_state_size", "Per-key window state held, per table", ["table"],
                     registry=REGISTRY)
LIVE_SOURCES = Gauge("hpcguard_live_sources", "Sources (node grids) or nodes (io-seconds) still holding a watermark "
                     "back, per table: 0 once every one went idle, when the windows a bounded replay can close are closed",
                     ["table"], registry=REGISTRY)
SENSOR_COVERAGE = Gauge("hpcguard_sensor_coverage", "Share of closed node grid steps with a value, per canonical "
                        "sensor", ["sensor"], registry=REGISTRY)
GRID_POLLS = Gauge("hpcguard_grid_polls", "Polls (last-value samples) the node grids placed, per source and kind: "
                   "placed (all), moved (to the next step: theirs was taken), merged (shared a step with an "
                   "earlier poll)", ["source", "kind"], registry=REGISTRY)
MAPPING_MISMATCH = Gauge("hpcguard_sensor_map_mismatch", "1 when the worker's sensor mapping digest differs from "
                         "the one the model was trained with", ["worker_digest", "model_digest"], registry=REGISTRY)
INVENTORY_CONFIGURED = Gauge("hpcguard_inventory_configured", "1 when a node inventory is configured (door.nodes); 0: "
                             "nodes are learned from Slurm job records and sample-only names are quarantined",
                             registry=REGISTRY)
INVENTORY_QUARANTINED = Gauge("hpcguard_inventory_quarantined", "Node names seen only on sample topics and admitted in "
                              "quarantine (at most door.max_nodes; beyond it new ones are dead-lettered unknown_node)",
                              registry=REGISTRY)
INVENTORY_NAMED = Gauge("hpcguard_inventory_slurm_named", "Nodes admitted because a Slurm job record named them "
                        "(no door.nodes configured)", registry=REGISTRY)
JOB_JOIN_TIMEOUTS = Counter("hpcguard_job_join_timeouts_total", "Decisions made before the job stream's watermark "
                            "passed their sample time (worker.job_wait_s ran out)", registry=REGISTRY)
PROBE_WAIT_TIMEOUTS = Counter("hpcguard_probe_wait_timeouts_total", "IO windows judged before the probe stream's clock "
                              "passed their end (worker.job_wait_s ran out): their bank may lack labels a "
                              "faster worker would have had", registry=REGISTRY)

CONSUMER_READY = Gauge("hpcguard_consumer_ready", "1 while a consumer of the worker reads its partitions: joined its group "
                       "(and, for faust, recovered its tables); faust: the agents' consumer, <app_id>-ldms: the LDMS "
                       "batch consumer", ["consumer"],
                       registry=REGISTRY)
BATCH_READER_REOPENED = Counter("hpcguard_batch_reader_reopened_total", "Batch readers (the LDMS rows' consumer "
                                "<app_id>-ldms) closed and opened again because they stopped moving", ["consumer"],
                                registry=REGISTRY)

STALLED = Gauge("hpcguard_consumer_stalled", "1 while the worker's consumer is stalled", registry=REGISTRY)
STALLS = Counter("hpcguard_consumer_stalls_total",
                 "Consumer stalls detected, per reason (progress|commit|broker|group|recovery|check)",
                 ["reason"], registry=REGISTRY)
COMMIT_HOLES_FILLED = Counter("hpcguard_commit_holes_filled_total", "Offsets read but never acknowledged after a "
                              "rebalance, none in flight, counted as done so commits go on (streams.worker)",
                              ["topic"], registry=REGISTRY)
COMMIT_ERRORS = Counter("hpcguard_commit_errors_total", "Failed offset commits reported by the Kafka client",
                        registry=REGISTRY)


def _number(value: Any) -> float:
    """A reason's value as a finite float (0 for anything else: a missing key, text, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.0
    return float(value)


def node_hours_estimate(reason: Any) -> tuple[float, float]:
    """``(saved, spent)``: the node-hours an action is expected to save (gross) and costs, from its reason.

    ``spent`` is ``node_hours_cost``; ``saved`` is ``expected_node_hours_saved`` (net: failure
    probability × node-hours at risk − cost) plus that cost, at least 0.  Keys a reason lacks count
    0, so reasons without these figures (older policies, CanarIO's) add nothing.

    >>> node_hours_estimate({"expected_node_hours_saved": 2.5, "node_hours_cost": 0.5})
    (3.0, 0.5)
    >>> node_hours_estimate({"expected_node_hours_saved": -1.0, "node_hours_cost": 0.25})
    (0.0, 0.25)
    >>> node_hours_estimate({"branch": "io-delay"}), node_hours_estimate(None)
    ((0.0, 0.0), (0.0, 0.0))
    """
    if not isinstance(reason, Mapping):
        return 0.0, 0.0
    cost = max(_number(reason.get("node_hours_cost", 0.0)), 0.0)
    saved = max(_number(reason.get("expected_node_hours_saved", 0.0)) + cost, 0.0)
    return saved, cost


def count_action(action: Mapping[str, Any]) -> None:
    """Count one newly decided action (call once per action id: never for one read back after a restart):
    ``hpcguard_actions_total`` and its estimated node-hours saved and spent."""
    kind = str(action.get("kind", ""))
    ACTIONS.labels(kind, str(action.get("source", ""))).inc()
    saved, spent = node_hours_estimate(action.get("reason"))
    NODE_HOURS_SAVED.labels(kind).inc(saved)
    NODE_HOURS_SPENT.labels(kind).inc(spent)


def start_metrics_server(port: int, addr: str = "127.0.0.1") -> None:
    """Serve ``/metrics`` for this process's registry (port 0 → off)."""
    if port:
        start_http_server(port, addr=addr, registry=REGISTRY)
