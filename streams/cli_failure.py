"""CLI commands: failure ensemble: uc, train failure, evaluate failure (issue 3)."""
from __future__ import annotations
