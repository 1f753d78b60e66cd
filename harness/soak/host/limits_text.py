"""The text of ``/proc/<pid>/limits``, parsed: a process's resource limits as the kernel applies them.

The file is the one place that shows another process's limits without privileges (``prlimit(2)`` on a
process of another user needs ``CAP_SYS_RESOURCE``), and both the per-process record (each process's own
open-files limit) and the run's limits (harness.soak.host.limits) read it. Pure: text in, numbers out.
"""

from __future__ import annotations

UNLIMITED = "unlimited"
OPEN_FILES = "Max open files"
PROCESSES = "Max processes"

LimitPair = tuple[int | None, int | None]  # (soft, hard); None: unlimited


def _limit_value(token: str) -> int | None:
    return None if token == UNLIMITED else int(token)


def _is_value(token: str) -> bool:
    return token == UNLIMITED or token.isdigit()


def parse_limits(text: str) -> dict[str, LimitPair]:
    """Limit name (``Max open files``) -> (soft, hard), None where ``unlimited``.

    The kernel pads the columns to fixed widths, but a name holds spaces and the units column may be
    empty, so a line is read as tokens: the name runs up to the first value token. The header line
    (no value token) and malformed lines are skipped.
    """
    limits: dict[str, LimitPair] = {}
    for line in text.splitlines():
        tokens = line.split()
        at = next((i for i, token in enumerate(tokens) if _is_value(token)), None)
        if at is None or at == 0 or at + 1 >= len(tokens) or not _is_value(tokens[at + 1]):
            continue
        limits[" ".join(tokens[:at])] = (_limit_value(tokens[at]), _limit_value(tokens[at + 1]))
    return limits


def soft_limit(text: str, name: str) -> int | None:
    """The soft value of limit ``name`` in a limits text; None when unlimited or not listed."""
    return parse_limits(text).get(name, (None, None))[0]
