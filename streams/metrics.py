"""Prometheus metrics of a worker (served on ``--metrics-port``).

One registry per process (``connectors.metrics.REGISTRY``, with the metrics the connectors
update: the InfluxDB sink's); agents update these objects.
"""
from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from hpcguard.connectors.metrics import REGISTRY, SINK_POINTS  # noqa: F401  (served with the rest)

RECORDS_IN = Counter("hpcguard_records_in_total", "Records consumed, per topic", ["topic"], registry=REGISTRY)
RECORDS_OUT = Counter("hpcguard_records_out_total", "Records published, per topic", ["topic"], registry=REGISTRY)
SAMPLES_OUT = Counter("hpcguard_samples_out_total", "Canonical samples published, per topic (each sample of a "
                      "NodeSamples batch counts: unlike records, the count does not depend on how inputs were batched)",
                      ["topic"], registry=REGISTRY)
DEAD_LETTERS = Counter("hpcguard_dead_letters_total", "Rejected inputs, per source and error kind",
                       ["source", "error_kind"], registry=REGISTRY)
CONSUMER_LAG = Gauge("hpcguard_consumer_lag", "Consumer lag in records, per topic and partition",
                     ["topic", "partition"], registry=REGISTRY)
PREDICTIONS = Counter("hpcguard_predictions_total", "Node predictions, per model and outcome (warn|ok)",
                      ["model", "outcome"], registry=REGISTRY)
ACTIONS = Counter("hpcguard_actions_total", "Actions emitted, per kind and source", ["kind", "source"],
                  registry=REGISTRY)
ACKS = Counter("hpcguard_action_acks_total", "Action acks, per kind and status", ["kind", "status"],
               registry=REGISTRY)
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

STALLED = Gauge("hpcguard_consumer_stalled", "1 while the worker's consumer is stalled", registry=REGISTRY)
STALLS = Counter("hpcguard_consumer_stalls_total",
                 "Consumer stalls detected, per reason (progress|commit|broker|group|recovery|check)",
                 ["reason"], registry=REGISTRY)
COMMIT_ERRORS = Counter("hpcguard_commit_errors_total", "Failed offset commits reported by the Kafka client",
                        registry=REGISTRY)


def start_metrics_server(port: int, addr: str = "127.0.0.1") -> None:
    """Serve ``/metrics`` for this process's registry (port 0 → off)."""
    if port:
        start_http_server(port, addr=addr, registry=REGISTRY)
