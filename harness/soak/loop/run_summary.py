"""The trainer's ``run_summary.json`` as the monitor reads it: strictly, and never raising for what the
trainer left behind (the reason it is missing or unreadable is returned and judged)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _strict_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_run_summary(log_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``run_summary.json`` of the run, or None with the reason it is missing or unreadable: absent, a
    directory, a symlink leading out of the log dir, not UTF-8, not strict JSON (truncated, NaN) or not
    an object. Never raises for what the trainer left behind."""
    path = log_dir / "run_summary.json"
    if not path.exists() and not path.is_symlink():
        return None, f"{path} does not exist"
    if path.is_symlink() and not path.resolve().is_relative_to(log_dir.resolve()):
        return None, f"{path} is a symlink outside the log dir (to {path.resolve()})"
    if path.is_dir():
        return None, f"{path} is a directory, not a file"
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_strict_constant)
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        return None, f"{path} is unreadable: {exc}"
    if not isinstance(data, dict):
        return None, f"{path} is not a JSON object"
    return data, None
