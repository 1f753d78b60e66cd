"""Stand-in trainer: heartbeat for DURATION, then leave a run_summary.json and exit with CODE.

``python contract_trainer.py LOG_DIR DURATION CODE HOW [CHANGES_JSON]``. HOW is ``write`` (the honest
fixture summary with CHANGES_JSON ``{dotted.path: value}`` applied), ``missing``, ``truncated``,
``binary``, ``directory`` or ``symlink_out`` (a link to a valid summary outside the log dir).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from _common import heartbeat_loop

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "run_summary_completed.json"


def changed(changes: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads(FIXTURE.read_text())
    for path, value in changes.items():
        node = summary
        *parents, leaf = path.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = value
    return summary


def leave_summary(log_dir: Path, how: str, changes: dict[str, Any]) -> None:
    target = log_dir / "run_summary.json"
    text = json.dumps(changed(changes))
    if how == "write":
        target.write_text(text)
    elif how == "truncated":
        target.write_text(text[: len(text) // 2])
    elif how == "binary":
        target.write_bytes(b"\xff\xfe\x00not json")
    elif how == "directory":
        target.mkdir()
    elif how == "symlink_out":
        outside = log_dir.parent / "outside_run_summary.json"
        outside.write_text(text)
        target.symlink_to(outside)
    elif how != "missing":
        raise SystemExit(f"unknown HOW {how!r}")


log_dir = Path(sys.argv[1])
log_dir.mkdir(parents=True, exist_ok=True)
duration, code, how = float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
heartbeat_loop(log_dir, duration, 0.05)
leave_summary(log_dir, how, json.loads(sys.argv[5]) if len(sys.argv) > 5 else {})
sys.exit(code)
