"""CLI: hpcguard replay (recorded files → Kafka raw topics)."""
from __future__ import annotations
