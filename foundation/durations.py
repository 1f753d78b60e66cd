"""Durations as people write them (``90m``, ``72h``, ``3d``): one parser for the command line and the
inventory, so a target means the same seconds wherever it is declared."""

from __future__ import annotations

import re

#: seconds per unit
DURATION_UNITS: dict[str, float] = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
#: a number and one unit, nothing else (the JSON schemas hold the inventory's durations to it too)
DURATION_PATTERN = r"^[0-9]+(\.[0-9]+)?[smhd]$"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")


def parse_duration(text: str) -> float:
    """Seconds in a duration such as ``90m``, ``72h``, ``3d`` or ``600s`` (a number > 0 and one unit of
    ``DURATION_UNITS``); ValueError naming what is allowed otherwise."""
    match = _DURATION.match(text)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"{text!r} is no duration: a number > 0 and one unit of s, m, h, d (90m, 72h, 3d)")
    return float(match.group(1)) * DURATION_UNITS[match.group(2)]
