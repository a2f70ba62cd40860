"""Durations with unit suffixes, as the CLI and job files write them.

>>> parse_duration("30m")
0.5
>>> parse_duration("18s") * 3600
18.0
>>> parse_duration("1d"), parse_duration("2.5")
(24.0, 2.5)
"""
from __future__ import annotations

import math
import re

__all__ = ["parse_duration", "HOURS_PER_UNIT"]

#: hours per unit suffix; a bare number is hours
HOURS_PER_UNIT = {"s": 1 / 3600, "m": 1 / 60, "h": 1.0, "d": 24.0}

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([smhdSMHD]?)\s*$")


def parse_duration(text: str | float | int) -> float:
    """Parse ``"30m"``, ``"24h"``, ``"1d"``, ``"18s"`` or a bare number (hours) into hours.

    Raises
    ------
    ValueError
        If the text is not a non-negative finite number with an optional s/m/h/d suffix.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, unit = float(text), "h"
    else:
        match = _DURATION.match(str(text))
        if match is None:
            raise ValueError(f"not a duration: {text!r} (expected a number with an optional "
                             "suffix s, m, h or d, e.g. 30m, 24h, 1d; a bare number is hours)")
        value, unit = float(match.group(1)), (match.group(2) or "h").lower()
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"duration must be a finite non-negative number: {text!r}")
    return value * HOURS_PER_UNIT[unit]
