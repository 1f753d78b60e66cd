"""The pass-table rows read from the trainer's run_summary, and the dotted lookups they use (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soakbench.harness.soak.verdicts.contract import (
    Violation,
    inference_violations,
    replay_violations,
    schema_violations,
    shutdown_violations,
)
from soakbench.harness.soak.verdicts.criterion import Criterion

_MISSING = object()


def lookup(data: Mapping[str, Any] | None, dotted: str) -> Any:
    """``data["a"]["b"]`` for ``"a.b"``; the module's ``_MISSING`` sentinel when any level is absent."""
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def lookup_or_none(data: Mapping[str, Any] | None, dotted: str) -> Any:
    """Like ``lookup`` but None when any level is absent."""
    found = lookup(data, dotted)
    return None if found is _MISSING else found


def row(name: str, expected: str, value: Any, ok: bool) -> Criterion:
    return Criterion(name, expected, value, "pass" if ok else "fail")


def _contract_row(name: str, expected: str, violations: list[Violation]) -> Criterion:
    return row(name, expected, [v.as_dict() for v in violations], not violations)


def contract_rows(summary: Mapping[str, Any], returncode: int | None) -> dict[str, Criterion]:
    """The rows of harness.soak.verdicts.contract, by name."""
    return {
        "run_summary_schema": _contract_row(
            "run_summary_schema",
            "valid run-summary-1 and runtime-manifest-1, schema versions the integer 1",
            schema_violations(summary),
        ),
        "shutdown_contract": _contract_row(
            "shutdown_contract",
            "classification in the vocabulary, owner and phase set, exception null or {type, message}, "
            "cleanup.errors a list, no normal_completion on a non-zero exit",
            shutdown_violations(summary, returncode),
        ),
        "replay_invariants": _contract_row(
            "replay_invariants", "every replay ingress cross-invariant holds", replay_violations(summary)
        ),
        "inference_invariants": _contract_row(
            "inference_invariants",
            "every inference ring cross-invariant holds",
            inference_violations(summary),
        ),
    }


def summary_rows(summary: Mapping[str, Any] | None) -> list[Criterion]:
    """The run_contract rows; a field missing from the summary shows as value "missing: <path>" and fails."""

    def get(path: str) -> Any:
        found = lookup(summary, path)
        return f"missing: {path}" if found is _MISSING else found

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    inflight = "runtime_manifest.inference_flight"
    ingress = "runtime_manifest.replay_ingress"
    shutdown = "runtime_manifest.shutdown"
    depth, lag = get(f"{inflight}.final_queue_depth"), get(f"{inflight}.final_publication_lag")
    occupancy = get(f"{ingress}.final_occupancy")
    dropped, early = get(f"{ingress}.dropped_batches"), get(f"{ingress}.early_returns")
    published, released = get(f"{ingress}.published_sequence"), get(f"{ingress}.release_sequence")
    slot_rows, steps = get(f"{ingress}.slot_rows"), get("total_env_steps")
    reason, exception = get("failure_reason"), get(f"{shutdown}.exception")
    classification, cleanup = get(f"{shutdown}.classification"), get(f"{shutdown}.cleanup.errors")
    expected_published: Any = None
    if is_int(slot_rows) and is_int(steps) and slot_rows > 0:
        expected_published = steps // slot_rows if steps % slot_rows == 0 else steps / slot_rows
    return [
        row("run_status", "completed", get("status"), get("status") == "completed"),
        row(
            "run_failure",
            "failure_reason null and shutdown exception null",
            {"failure_reason": reason, "exception": exception},
            reason is None and exception is None,
        ),
        row(
            "inference_drained",
            "final_queue_depth 0 and final_publication_lag 0",
            {"final_queue_depth": depth, "final_publication_lag": lag},
            is_int(depth) and is_int(lag) and depth == 0 and lag == 0,
        ),
        row("replay_final_occupancy", "0", occupancy, is_int(occupancy) and occupancy == 0),
        row(
            "replay_no_drops",
            "dropped_batches 0 and early_returns 0",
            {"dropped_batches": dropped, "early_returns": early},
            is_int(dropped) and is_int(early) and dropped == 0 and early == 0,
        ),
        row(
            "replay_release_sequence",
            "release_sequence == published_sequence",
            {"release_sequence": released, "published_sequence": published},
            is_int(released) and is_int(published) and released == published,
        ),
        row(
            "replay_published_sequence",
            "published_sequence == total_env_steps / ingress_slot_rows (an integer)",
            {
                "published_sequence": published,
                "total_env_steps": steps,
                "ingress_slot_rows": slot_rows,
                "expected": expected_published,
            },
            is_int(published) and is_int(expected_published) and published == expected_published,
        ),
        row(
            "shutdown_classification",
            "normal_completion",
            classification,
            classification == "normal_completion",
        ),
        row("shutdown_cleanup_errors", "[]", cleanup, cleanup == []),
    ]
