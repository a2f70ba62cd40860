"""CLI: hpcguard simulate telemetry."""
from __future__ import annotations
