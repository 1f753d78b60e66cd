"""The artifact's fields read from the trainer's run summary: ``run_status``, ``inference``, ``replay`` and
``shutdown``, each value null where the summary lacks it or holds a malformed one (pure). The artifact
is built from them and the matrix checks a filed artifact against them, through the judgement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from soakbench.foundation.vocab import RUN_STATUSES, SHUTDOWN_CLASSIFICATIONS
from soakbench.harness.soak.verdicts.summary_rows import lookup_or_none

_INFERENCE_FIELDS = (
    "final_queue_depth",
    "final_publication_lag",
    "max_in_flight",
    "max_publication_lag",
    "events",
    "slot_capacity",
)
_REPLAY_FIELDS = {  # artifact field -> runtime_manifest.replay_ingress field
    "final_occupancy": "final_occupancy",
    "dropped_batches": "dropped_batches",
    "early_returns": "early_returns",
    "published_sequence": "published_sequence",
    "release_sequence": "release_sequence",
    "ingress_slot_rows": "slot_rows",
    "depth": "depth",
    "high_water_occupancy": "high_water_occupancy",
    "backpressure_waits": "backpressure_waits",
    "backpressure_wait_s": "backpressure_wait_s",
    "closed_returns": "closed_returns",
    "stop_returns": "stop_returns",
}


def int_or_none(value: Any) -> int | None:
    """A non-negative int, else None: a malformed run_summary value must not make the artifact unwritable
    (the criteria rows carry the raw value and fail)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _number_or_none(value: Any) -> float | int | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
    return value if ok else None


def _enum_or_none(value: Any, allowed: Iterable[str]) -> str | None:
    return value if isinstance(value, str) and value in set(allowed) else None


def _exception_or_none(value: Any) -> dict[str, str] | None:
    if (
        isinstance(value, Mapping)
        and isinstance(value.get("type"), str)
        and isinstance(value.get("message"), str)
    ):
        return {"type": value["type"], "message": value["message"]}
    return None


def summary_sections(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """The artifact fields read from the run_summary: ``run_status``, ``inference``, ``replay`` and
    ``shutdown`` (each field null where the summary lacks it or holds a malformed value)."""
    return {
        "run_status": _enum_or_none(lookup_or_none(summary, "status"), RUN_STATUSES),
        "inference": _inference_section(summary),
        "replay": _replay_section(summary),
        "shutdown": _shutdown_section(summary),
    }


def _manifest_section(summary: Mapping[str, Any] | None, name: str) -> Mapping[str, Any]:
    """``runtime_manifest.<name>`` of the run_summary, or {} when it is missing or not an object."""
    section = lookup_or_none(summary, f"runtime_manifest.{name}")
    return section if isinstance(section, Mapping) else {}


def _inference_section(summary: Mapping[str, Any] | None) -> dict[str, int | None]:
    inflight = _manifest_section(summary, "inference_flight")
    return {key: int_or_none(inflight.get(key)) for key in _INFERENCE_FIELDS}


def _replay_section(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    ingress = _manifest_section(summary, "replay_ingress")
    replay: dict[str, Any] = {out: int_or_none(ingress.get(src)) for out, src in _REPLAY_FIELDS.items()}
    replay["backpressure_wait_s"] = _number_or_none(ingress.get("backpressure_wait_s"))
    replay["total_env_steps"] = int_or_none(lookup_or_none(summary, "total_env_steps"))
    return replay


def _shutdown_section(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    shutdown = _manifest_section(summary, "shutdown")
    cleanup_errors = lookup_or_none(shutdown, "cleanup.errors")
    return {
        "classification": _enum_or_none(shutdown.get("classification"), SHUTDOWN_CLASSIFICATIONS),
        "cleanup_errors": list(cleanup_errors) if isinstance(cleanup_errors, list) else None,
        "owner": shutdown.get("owner") if isinstance(shutdown.get("owner"), str) else None,
        "phase": shutdown.get("phase") if isinstance(shutdown.get("phase"), str) else None,
        "exception": _exception_or_none(shutdown.get("exception")),
    }
