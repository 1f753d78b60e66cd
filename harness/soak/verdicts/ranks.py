"""The artifact's ``ranks`` section: a job of several ranks seen rank by rank (pure).

Its inputs are what the monitor recorded (every process identity, tagged with its rank from torchrun's
environment; each rank's last progress record; the per-process leak verdicts) and the job summary that
rank 0 of our trainer writes (``distributed.ranks``). A run with none of these has no section, so a
single-rank artifact stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PROGRESS_KEYS = ("iteration", "total_env_steps", "env_steps_per_s", "phase", "final")
SEVERITY = {"bounded": 0, "insufficient_data": 1, "growing": 2}
SUMMARY_KEYS = ("status", "failure_classification", "failure_reason", "exit_code", "params_checksum")


def ranks_section(
    known_processes: Sequence[Mapping[str, Any]],
    rank_progress: Mapping[int, Mapping[str, Any]],
    run_summary: Mapping[str, Any] | None,
    per_process: Mapping[str, Any] | None,
    root_pid: int | None,
) -> dict[str, Any] | None:
    """One entry per rank, with the job's own facts; None when the run had no ranks."""
    job = (run_summary or {}).get("distributed") or {}
    from_summary = {int(e["rank"]): e for e in job.get("ranks") or []}
    tagged = [p for p in known_processes if isinstance(p.get("rank"), int)]
    ranks = sorted(set(from_summary) | set(rank_progress) | {int(p["rank"]) for p in tagged})
    if not ranks:
        return None
    verdicts = _verdicts_by_identity(per_process)
    entries = [
        _entry(rank, from_summary.get(rank), rank_progress.get(rank), tagged, verdicts) for rank in ranks
    ]
    agent = next((p for p in known_processes if p.get("pid") == root_pid and "rank" not in p), None)
    failed = run_summary is not None and run_summary.get("status") not in (None, "completed")
    return {
        "world_size": job.get("world_size", len(ranks)),
        "run_id": job.get("run_id", next((p.get("run_id") for p in tagged if p.get("run_id")), None)),
        "agent": _identity(agent, "agent") if agent is not None else None,
        "first_failure": run_summary.get("failure_reason") if failed and run_summary is not None else None,
        "params_identical": job.get("params_identical"),
        "ranks": entries,
    }


def _entry(
    rank: int,
    summary: Mapping[str, Any] | None,
    progress: Mapping[str, Any] | None,
    tagged: Sequence[Mapping[str, Any]],
    verdicts: Mapping[tuple[int, int], Mapping[str, str]],
) -> dict[str, Any]:
    mine = [p for p in tagged if p["rank"] == rank]
    worst: dict[str, str] = {}
    for proc in mine:
        for cls, verdict in verdicts.get((int(proc["pid"]), int(proc["start_ticks"])), {}).items():
            if SEVERITY.get(verdict, -1) > SEVERITY.get(worst.get(cls, ""), -1):
                worst[cls] = verdict
    return {
        "rank": rank,
        **{key: (summary or {}).get(key) for key in SUMMARY_KEYS},
        "attempts": sorted({int(p.get("restart_count", 0)) for p in mine}),
        "processes": [_identity(p, f"rank {rank} {p.get('role', 'other')}") for p in mine],
        "last_progress": {k: progress.get(k) for k in PROGRESS_KEYS} if progress is not None else None,
        "leak_verdicts": worst,
    }


def _identity(proc: Mapping[str, Any], role: str) -> dict[str, Any]:
    return {"pid": proc["pid"], "start_ticks": proc["start_ticks"], "name": proc["name"], "role": role}


def _verdicts_by_identity(per_process: Mapping[str, Any] | None) -> dict[tuple[int, int], Mapping[str, str]]:
    rows = (per_process or {}).get("processes") or []
    return {(int(r["pid"]), int(r["start_ticks"])): r.get("leak_verdicts") or {} for r in rows}
