"""CLI commands: operations: config show (issue 7)."""
from __future__ import annotations
