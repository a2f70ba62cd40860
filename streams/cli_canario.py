"""CLI commands: CanarIO evaluation (issue 4)."""
from __future__ import annotations
