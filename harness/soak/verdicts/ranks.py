"""The artifact's ``ranks`` section: a job of several ranks seen rank by rank (pure).

Its inputs are what the monitor recorded (every process identity, tagged with its rank from torchrun's
environment; each rank's last progress record; the per-process leak verdicts) and the job summary that
rank 0 of our trainer writes (``distributed.ranks``). A run with none of these has no section, so a
single-rank artifact stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from soakbench.harness.soak.verdicts.stacks import first_project_frame

if TYPE_CHECKING:
    from soakbench.harness.soak.verdicts.evaluation import MonitorObservation
    from soakbench.harness.soak.verdicts.gates import Gates
    from soakbench.harness.soak.verdicts.per_process import PerProcessVerdicts

PROGRESS_KEYS = ("iteration", "total_env_steps", "env_steps_per_s", "phase", "final")
SEVERITY = {"bounded": 0, "insufficient_data": 1, "growing": 2}
SUMMARY_KEYS = ("status", "failure_classification", "failure_reason", "exit_code", "params_checksum")


@dataclass(frozen=True)
class JobTree:
    """What the monitor knows of a job's processes beside the samples' verdicts.

    ``last_seen``: ``last_seen_by_rank(samples)``; ``ended``: ``first_death.process_exits``, each process's
    exit status or signal from the kernel (the agent reaps the ranks, so the monitor cannot).
    """

    known_processes: Sequence[Mapping[str, Any]]
    rank_progress: Mapping[int, Mapping[str, Any]]
    last_seen: Mapping[int, float]
    root_pid: int | None
    ended: Mapping[tuple[int, int], Mapping[str, Any]] = field(default_factory=dict)


def ranks_section(obs: MonitorObservation, gates: Gates, tree: JobTree) -> dict[str, Any] | None:
    """One entry per rank, with the job's own facts; None when the run had no ranks. ``obs``: the
    observation judged (its run summary, per-process verdicts and restarts); ``gates``: the restarts
    allowed."""
    known_processes, rank_progress, last_seen = tree.known_processes, tree.rank_progress, tree.last_seen
    root_pid, ended = tree.root_pid, tree.ended
    run_summary, per_process = obs.run_summary, obs.per_process
    job = (run_summary or {}).get("distributed") or {}
    from_summary = {int(e["rank"]): e for e in job.get("ranks") or []}
    tagged = [p for p in known_processes if isinstance(p.get("rank"), int)]
    ranks = sorted(set(from_summary) | set(rank_progress) | {int(p["rank"]) for p in tagged})
    if not ranks:
        return None
    verdicts = _verdicts_by_identity(per_process)
    entries = [
        _entry(rank, from_summary.get(rank), rank_progress.get(rank), tagged, verdicts, ended)
        | {"last_seen_t": last_seen.get(rank)}
        for rank in ranks
    ]
    agent = next((p for p in known_processes if p.get("pid") == root_pid and "rank" not in p), None)
    failed = run_summary is not None and run_summary.get("status") not in (None, "completed")
    sizes = [int(p["world_size"]) for p in tagged if isinstance(p.get("world_size"), int)]
    return {
        # one node of a job of several sees only its own ranks: their WORLD_SIZE says how many there are
        "world_size": job.get("world_size", max(sizes, default=len(ranks))),
        "run_id": job.get("run_id", next((p.get("run_id") for p in tagged if p.get("run_id")), None)),
        "agent": _identity(agent, "agent") if agent is not None else None,
        "first_failure": run_summary.get("failure_reason") if failed and run_summary is not None else None,
        "params_identical": job.get("params_identical"),
        "restarts": obs.rank_restarts or 0,
        "allowed_restarts": gates.allow_restarts,
        "ranks": entries,
    }


def _entry(
    rank: int,
    summary: Mapping[str, Any] | None,
    progress: Mapping[str, Any] | None,
    tagged: Sequence[Mapping[str, Any]],
    verdicts: Mapping[tuple[int, int], Mapping[str, str]],
    ended: Mapping[tuple[int, int], Mapping[str, Any]],
) -> dict[str, Any]:
    mine = [p for p in tagged if p["rank"] == rank]
    worst: dict[str, str] = {}
    for proc in mine:
        for cls, verdict in verdicts.get((int(proc["pid"]), int(proc["start_ticks"])), {}).items():
            if SEVERITY.get(verdict, -1) > SEVERITY.get(worst.get(cls, ""), -1):
                worst[cls] = verdict
    nodes = {int(p["node_rank"]) for p in mine if isinstance(p.get("node_rank"), int)}
    return {
        "rank": rank,
        "node_rank": min(nodes) if nodes else None,
        **{key: (summary or {}).get(key) for key in SUMMARY_KEYS},
        "attempts": sorted({int(p.get("restart_count", 0)) for p in mine}),
        "processes": [
            {
                **_identity(p, f"rank {rank} {p.get('role', 'other')}"),
                **ended.get((p["pid"], p["start_ticks"]), {}),
            }
            for p in mine
        ],
        "last_progress": {k: progress.get(k) for k in PROGRESS_KEYS} if progress is not None else None,
        "leak_verdicts": worst,
    }


def restarts_seen(samples: Sequence[Mapping[str, Any]]) -> int | None:
    """The highest TORCHELASTIC_RESTART_COUNT among the ranks' processes: the job's elastic restarts;
    None when no process of a rank was seen (not a job of several ranks)."""
    counts = [
        int(p["restart_count"])
        for sample in samples
        for p in sample.get("processes") or []
        if isinstance(p.get("restart_count"), int)
    ]
    return max(counts) if counts else None


def last_seen_by_rank(samples: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """The t of the last sample that held a process of each rank."""
    seen: dict[int, float] = {}
    for sample in samples:
        for proc in sample.get("processes") or []:
            if isinstance(proc.get("rank"), int):
                seen[int(proc["rank"])] = float(sample["t"])
    return seen


def _identity(proc: Mapping[str, Any], role: str) -> dict[str, Any]:
    return {"pid": proc["pid"], "start_ticks": proc["start_ticks"], "name": proc["name"], "role": role}


def _verdicts_by_identity(per_process: PerProcessVerdicts | None) -> dict[tuple[int, int], Mapping[str, str]]:
    rows = () if per_process is None else per_process.processes
    return {(r.pid, r.start_ticks): r.leak_verdicts for r in rows}


# torch.distributed calls a rank blocks in while it waits for its peers (py-spy's innermost frames)
COLLECTIVES = frozenset(
    {
        "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "all_to_all", "barrier",
        "monitored_barrier", "broadcast", "broadcast_object_list", "gather", "scatter", "reduce",
        "reduce_scatter", "reduce_scatter_tensor", "send", "recv", "wait", "destroy_process_group",
    }
)  # fmt: skip


def collective_call(stack: Mapping[str, Any]) -> str | None:
    """The torch.distributed collective a captured stack waits in (any thread), or None."""
    for thread in stack.get("threads") or []:
        for frame in thread.get("frames") or []:
            if frame.get("function") in COLLECTIVES and "torch/distributed" in str(frame.get("file")):
                return str(frame["function"])
    return None


def _innermost(stack: Mapping[str, Any]) -> str:
    for thread in stack.get("threads") or []:
        frames = thread.get("frames") or []
        if frames:
            pick = frames[first_project_frame(frames) or 0]
            return f"{pick.get('function')} ({pick.get('file')}:{pick.get('line')})"
    return "no Python frame"


def straggler_sentence(
    captures: Sequence[Mapping[str, Any]], known: Sequence[Mapping[str, Any]]
) -> str | None:
    """Which ranks wait inside a collective and which do not (the stragglers), from the stacks taken
    before the kill; None without stacks of at least one rank."""
    ranks = {
        (int(p["pid"]), int(p["start_ticks"])): int(p["rank"])
        for p in known
        if isinstance(p.get("rank"), int)
    }
    waiting: dict[int, str] = {}
    outside: dict[int, str] = {}
    for capture in captures:
        for proc in capture.get("processes") or []:
            rank = ranks.get((int(proc["pid"]), int(proc["start_ticks"])))
            stack = proc.get("stack") or {}
            if rank is None or stack.get("status") != "captured":
                continue
            call = collective_call(stack)
            if call is not None:
                waiting[rank] = call
            else:
                outside.setdefault(rank, _innermost(stack))
    stragglers = {r: where for r, where in outside.items() if r not in waiting}
    if not stragglers and not waiting:
        return None
    parts = [
        f"rank {r} is not inside a collective (the straggler; at {where})"
        for r, where in sorted(stragglers.items())
    ]
    if waiting:
        parts.append(
            "waiting in a collective: " + ", ".join(f"rank {r} ({c})" for r, c in sorted(waiting.items()))
        )
    return "; ".join(parts)
