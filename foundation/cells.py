"""The one text form of a support-matrix cell's binding: ``ALGO/TASK/BACKEND``, with ``/ranks=N`` for a job
of N >= 2 ranks (one rank is written without it). Test markers' ``cell`` property and `soak monitor
--cell` both use it; the names are the inventory's, which hold no ``/`` and no whitespace."""

from __future__ import annotations

import re

CELL_FORMAT = "ALGO/TASK/BACKEND or ALGO/TASK/BACKEND/ranks=N (N >= 2; names without '/' or whitespace)"
_CELL = re.compile(r"([^/\s]+)/([^/\s]+)/([^/\s]+)(?:/ranks=([2-9]|[1-9][0-9]+))?")


def parse_cell(text: str) -> tuple[str, str, str, int] | None:
    """``(algo, task, backend, ranks)`` of ``text``, or None when it is not of ``CELL_FORMAT``."""
    match = _CELL.fullmatch(text)
    if match is None:
        return None
    algo, task, backend, ranks = match.groups()
    return algo, task, backend, int(ranks) if ranks else 1
