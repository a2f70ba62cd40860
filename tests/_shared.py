"""Where the real sample data lives: ``$HPCGUARD_SHARED_DATA``, else ``../shared/data`` beside
the checkout, else ``/work/shared/data`` (a clone elsewhere still finds the samples)."""
from __future__ import annotations

import os
from pathlib import Path


def shared_data() -> Path:
    candidates = [os.environ.get("HPCGUARD_SHARED_DATA"),
                  Path(__file__).resolve().parents[2] / "shared" / "data", "/work/shared/data"]
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
    return Path(__file__).resolve().parents[2] / "shared" / "data"


SHARED_DATA = shared_data()
