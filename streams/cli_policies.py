"""CLI commands: checkpoint intervals, failures fit, fars select, shiraz (issue 5)."""
from __future__ import annotations
