"""The run token: the monitor sets it in the spawned command's environment, and a process that carries
it belongs to that run (read here from ``/proc/<pid>/environ``)."""

from __future__ import annotations

from pathlib import Path

RUN_TOKEN_ENV = "SOAKBENCH_SOAK_RUN"


def proc_environ_token(pid: int) -> str | None:
    """The run token in ``/proc/<pid>/environ`` (the Linux sampler's ``token_of``), or None."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None  # gone, or another uid's: not provable by token
    prefix = RUN_TOKEN_ENV.encode() + b"="
    for item in raw.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode(errors="replace")
    return None
