"""The report's ranks part: a row per rank and each rank's iterations over time (a job of several ranks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from soakbench.harness.soak.evidence.report_plots import new_figure, png_data_uri

COLOURS = ("#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#65a30d", "#db2777")


def ranks_view(artifact: Mapping[str, Any], samples: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What the template shows of the artifact's ``ranks`` section; None for a single-rank run."""
    section = artifact.get("ranks")
    if not isinstance(section, Mapping):
        return None
    rows = []
    for entry in section["ranks"]:
        progress = entry.get("last_progress") or {}
        growing = sorted(cls for cls, verdict in entry["leak_verdicts"].items() if verdict == "growing")
        rows.append(
            {
                "rank": entry["rank"],
                "status": entry.get("status") or "unknown",
                "end": _end(entry),
                "attempts": ", ".join(str(a) for a in entry["attempts"]) or "none seen",
                "processes": ", ".join(f"{p['role']} {p['pid']}" for p in entry["processes"]),
                "progress": _progress(progress),
                "growing": ", ".join(growing) or "none",
            }
        )
    agent = section.get("agent")
    return {
        "rows": rows,
        "world_size": section["world_size"],
        "run_id": section.get("run_id") or "unknown",
        "agent": f"pid {agent['pid']}" if agent else "not seen",
        "first_failure": section.get("first_failure"),
        "params_identical": section.get("params_identical"),
        "plot": rank_progress_plot(samples),
    }


def _end(entry: Mapping[str, Any]) -> str:
    if entry.get("failure_classification"):
        return f"{entry['failure_classification']}: {entry.get('failure_reason') or ''}"[:200]
    code = entry.get("exit_code")
    return f"exit {code}" if code is not None else "no summary"


def _progress(progress: Mapping[str, Any]) -> str:
    if not progress:
        return "none"
    rate = progress.get("env_steps_per_s")
    rate_text = f", {rate:.1f} env steps/s" if isinstance(rate, int | float) else ""
    return f"iteration {progress.get('iteration')}, {progress.get('total_env_steps')} env steps{rate_text}"


def rank_progress_plot(samples: Sequence[Mapping[str, Any]]) -> str | None:
    """PNG data URI of each rank's iteration over time; None when no sample has rank progress."""
    series: dict[str, list[tuple[float, float]]] = {}
    for sample in samples:
        for rank, last in (sample.get("rank_progress") or {}).items():
            if isinstance(last.get("iteration"), int | float):
                series.setdefault(rank, []).append((float(sample["t"]), float(last["iteration"])))
    if not series:
        return None
    fig, ax = new_figure(12.8, 3.0)
    ax.set_title("Progress per rank (rank-<R>/progress.jsonl)", fontsize=10, loc="left")
    for i, rank in enumerate(sorted(series, key=int)):
        points = series[rank]
        ax.step([p[0] for p in points], [p[1] for p in points], where="post", lw=1.2,
                color=COLOURS[i % len(COLOURS)], label=f"rank {rank}")  # fmt: skip
    ax.set_xlabel("time since monitor start (s)", fontsize=8)
    ax.set_ylabel("iteration", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", framealpha=0.8)
    return png_data_uri(fig)
