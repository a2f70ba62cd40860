"""The process's Prometheus registry, and the metrics the connectors themselves update.

A worker serves one registry (``streams.metrics``, ``--metrics-port``); it lives here, below
the streams, so that a connector used inside the worker (the InfluxDB sink) counts on it
without importing the stream layer.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

REGISTRY = CollectorRegistry()

SINK_POINTS = Counter("hpcguard_sink_points_total", "Points handled by the InfluxDB sink, per outcome "
                      "(written|retried|dropped_overflow|rejected|dropped_unsent|downsampled)", ["outcome"], registry=REGISTRY)
