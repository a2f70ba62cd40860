"""CLI commands: cluster simulator, policy evaluation, trace stats (issue 6)."""
from __future__ import annotations
