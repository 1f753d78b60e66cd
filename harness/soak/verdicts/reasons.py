"""Failure reasons: one sentence a person on call reads first, from the failed pass-table rows."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from soakbench.harness.soak.verdicts.criterion import Criterion
from soakbench.harness.soak.verdicts.gpu import ecc_text, throttle_text, xid_text
from soakbench.harness.soak.verdicts.per_process import leak_text


def _render(value: Any, limit: int = 200) -> str:
    """Compact human rendering of a criterion value (dicts as k=v, long text cut)."""
    if isinstance(value, Mapping):
        text = ", ".join(f"{k}={_render(v, limit)}" for k, v in value.items())
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


UNAVAILABLE = "run_summary unavailable: "  # prefix of a row value that says why no summary was read
_CONTRACT_ROWS = frozenset(
    ("run_summary_schema", "shutdown_contract", "replay_invariants", "inference_invariants")
)


def _violations_text(violations: Sequence[Mapping[str, Any]]) -> str:
    first = violations[0]
    shown = json.dumps(first["value"], default=str)
    text = f"{first['field']} = {shown if len(shown) <= 80 else shown[:77] + '...'}: {first['rule']}"
    return text + (f" (and {len(violations) - 1} more)" if len(violations) > 1 else "")


def _survival_text(value: Mapping[str, Any]) -> str:
    """Each class that decided the survival verdict, in one sentence each."""
    return "; ".join(str(c) for c in value.get("classes") or ()) or str(value.get("verdict"))


def row_reason(first: Criterion) -> str:
    """What a failed row saw, in one clause (the failure reason of that row alone)."""
    value = first.value
    if first.name in _CONTRACT_ROWS and isinstance(value, list) and value:
        return _violations_text(value)
    if isinstance(value, str) and value.startswith(UNAVAILABLE):
        return value  # the reason the summary could not be read, whole

    if first.name == "trend_observation" and isinstance(value, Mapping):
        short = [f"{k}: {v}" for k, v in value.items() if str(v).startswith("insufficient_data")]
        return f"too few post-start-up samples for a verdict on {', '.join(short)}; {first.expected}"
    if first.name == "throughput_drift" and isinstance(value, Mapping):
        return f"throughput_drift is {value.get('verdict')}: {value.get('reason')}"
    gpu_text = {
        "gpu_xid_errors": xid_text,
        "gpu_ecc_uncorrected": ecc_text,
        "gpu_throttle": throttle_text,
        "survival": _survival_text,
    }
    if first.name in gpu_text and isinstance(value, Mapping):
        return gpu_text[first.name](value)
    if first.name == "oom_kills" and isinstance(value, list):
        return "; ".join(str(v) for v in value)
    if first.name == "leak_verdicts" and isinstance(value, Mapping):
        return leak_text(value)
    if first.name == "post_shutdown_residual_processes" and isinstance(value, list):
        listed = ", ".join(f"pid {p.get('pid')} ({p.get('name', '?')})" for p in value[:5])
        return f"{len(value)} process(es) still alive after the post-shutdown grace: {listed}"
    if first.name == "orphaned_shm_segments" and isinstance(value, list):
        listed = ", ".join(str(s.get("path", s.get("name"))) for s in value[:5])
        return f"{len(value)} shared-memory segment(s) of the run left in /dev/shm: {listed}"
    return f"expected {first.expected}, got {_render(value)}"


def failure_reason(first: Criterion, failed: Sequence[Criterion], detail: str | None = None) -> str:
    """The artifact's failure reason: what the first failed row saw, any monitor detail, the other rows."""
    sentence = f"criterion {first.name} failed: {row_reason(first)}" + (f"; {detail}" if detail else "")
    others = [c.name for c in failed if c is not first]
    if others:
        sentence += f" (also failed: {', '.join(others)})"
    return sentence + "."


def deciding_row(reason: str | None, failed: Sequence[str]) -> str | None:
    """The row a ``failure_reason`` was written from (it opens the sentence), else the first failed row."""
    text = reason or ""
    return next(
        (n for n in failed if text.startswith(f"criterion {n} failed")), failed[0] if failed else None
    )
