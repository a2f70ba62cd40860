"""CLI commands: scheduler adapters: act, (issue 8)."""
from __future__ import annotations
