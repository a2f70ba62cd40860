"""CLI commands of the streaming pipeline: broker, worker, replay, demo, simulate telemetry."""
from __future__ import annotations
