"""The run summary of a job of several ranks: each rank's ``distributed`` block, and the job's
``LOG_DIR/run_summary.json`` that rank 0 composes from the ranks' own summaries.

The composing is pure (:func:`job_summary`); :func:`read_rank_summaries` is the only reader, and it
waits for the ranks' files up to a deadline, since a rank that was killed never writes one.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from soakbench.runtime.artifacts import ArtifactError, read_run_summary
from soakbench.runtime.distributed import RankIdentity

# A rank that ended because of another rank (or was stopped from outside) is not the job's first failure.
CONSEQUENTIAL = ("peer_failure", "external_cancellation")


def rank_block(identity: RankIdentity, backend: str, params_checksum: str | None) -> dict[str, Any]:
    """The ``distributed`` block of one rank's own run_summary.json."""
    return {
        "rank": identity.rank,
        "local_rank": identity.local_rank,
        "world_size": identity.world_size,
        "backend": backend,
        "run_id": identity.run_id,
        "restart_count": identity.restart_count,
        "params_checksum": params_checksum,
    }


def rank_entry(rank: int, summary: Mapping[str, Any] | None, folder: str = "") -> dict[str, Any]:
    """One rank's line in the job summary; ``missing`` when it left no readable summary. ``folder``: the
    attempt's folder relative to the job's (``attempt-1/`` after a restart)."""
    path = f"{folder}rank-{rank}/run_summary.json"
    if summary is None:
        return {
            "rank": rank,
            "summary": path,
            "status": "missing",
            "failure_classification": None,
            "failure_reason": None,
            "exit_code": None,
            "total_env_steps": None,
            "params_checksum": None,
        }
    block = summary.get("distributed") or {}
    return {
        "rank": rank,
        "summary": path,
        "status": summary["status"],
        "failure_classification": summary["failure_classification"],
        "failure_reason": summary["failure_reason"],
        "exit_code": summary["exit_code"],
        "total_env_steps": summary["total_env_steps"],
        "params_checksum": block.get("params_checksum"),
    }


def first_failure(
    entries: list[dict[str, Any]], finished: Mapping[int, float]
) -> tuple[dict[str, Any] | None, str]:
    """The rank whose failure ended the job, and the sentence naming it; (None, "") when all completed.

    A rank's own failure comes first (the earliest to finish), then a rank that left no summary (it was
    killed), then the ranks that only saw a peer go or were stopped from outside."""
    own = [e for e in entries if e["status"] == "failed" and e["failure_classification"] not in CONSEQUENTIAL]
    if own:
        first = min(own, key=lambda e: finished.get(e["rank"], float("inf")))
        return first, f"rank {first['rank']}: {first['failure_reason']}"
    missing = [e for e in entries if e["status"] == "missing"]
    if missing:
        return missing[0], (
            f"rank {missing[0]['rank']} left no run summary (killed before it could write one); "
            "the other ranks saw it leave"
        )
    others = [e for e in entries if e["status"] != "completed"]
    if others:
        return others[0], f"rank {others[0]['rank']}: {others[0]['failure_reason']}"
    return None, ""


def job_summary(
    own: Mapping[str, Any], by_rank: Mapping[int, Mapping[str, Any] | None], folder: str = ""
) -> dict[str, Any]:
    """Rank 0's summary, with the job's status and a ``ranks`` section: the job completed only if every
    rank did, and otherwise fails with the first failing rank's class and a reason that names it."""
    out = copy.deepcopy(dict(own))
    entries = [rank_entry(rank, by_rank.get(rank), folder) for rank in sorted(by_rank)]
    finished = {r: float(s["finished_unix_s"]) for r, s in by_rank.items() if s is not None}
    first, reason = first_failure(entries, finished)
    checksums = [e["params_checksum"] for e in entries]
    identical = None if None in checksums else len(set(checksums)) == 1
    out["distributed"] = dict(out["distributed"], ranks=entries, params_identical=identical)
    if first is None:
        return out
    cancelled = all(
        e["failure_classification"] == "external_cancellation" for e in entries if e["status"] != "completed"
    )
    out["status"] = "cancelled" if cancelled else "failed"
    out["failure_classification"] = (
        "peer_failure" if first["status"] == "missing" else first["failure_classification"]
    )
    out["failure_reason"] = reason
    out["exit_code"] = first["exit_code"] if first["exit_code"] is not None else 1
    return out


def read_rank_summaries(
    job_dir: Path,
    world_size: int,
    deadline_s: float,
    poll_s: float = 0.2,
    own: Mapping[int, dict[str, Any]] | None = None,
) -> dict[int, dict[str, Any] | None]:
    """Each rank's run_summary.json (None where none was readable and schema-valid when the deadline
    passed); ``own``: the summaries the caller already holds (not read again)."""
    found: dict[int, dict[str, Any] | None] = dict.fromkeys(range(world_size))
    found.update(own or {})
    deadline = time.monotonic() + deadline_s
    while True:
        for rank in [r for r, s in found.items() if s is None]:
            found[rank] = _read(job_dir / f"rank-{rank}" / "run_summary.json")
        if all(s is not None for s in found.values()) or time.monotonic() >= deadline:
            return found
        time.sleep(poll_s)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return read_run_summary(path)
    except ArtifactError:
        return None  # not written yet (written atomically, so never half-read), or not a run summary
