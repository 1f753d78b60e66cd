"""The soak report's plots: PNG data URIs drawn with matplotlib's Figure API (no pyplot global state)."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

from soakbench.harness.soak.verdicts.trends import RESOURCE_CLASSES

MIB = float(1 << 20)

_TITLES = {
    "process_count": "Processes in the tree",
    "rss": "Resident memory (RSS, all processes; reported, counts shared pages in each)",
    "pss": "Proportional memory (PSS, all processes; the judged memory class)",
    "threads": "Threads (all processes)",
    "gpu_memory": "GPU memory (NVML, all processes)",
    "eventfd": "eventfd descriptors",
    "shared_memory_fd": "/dev/shm descriptors",
    "fd_total": "All file descriptors",
}
_FD_CLASSES = ("pipe", "socket", "eventfd", "eventpoll", "memfd", "shared_memory", "nvidia", "other")


def png_data_uri(fig: Any) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def new_figure(width: float = 6.4, height: float = 3.0) -> tuple[Any, Any]:
    from matplotlib.figure import Figure  # Figure API: no pyplot global state, Agg canvas

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def _mark_startup(ax: Any, startup_end_t: float | None, window: Mapping[str, Any] | None) -> None:
    if startup_end_t is not None:
        ax.axvspan(0.0, startup_end_t, color="#9ca3af", alpha=0.25, lw=0, label="start-up")
        ax.axvline(startup_end_t, color="#6b7280", lw=1, ls="--")
    if window and window.get("t_start") is not None and window.get("t_end") is not None:
        ax.axvspan(
            window["t_start"], window["t_end"], color="#60a5fa", alpha=0.08, lw=0, label="trend window"
        )


def resource_plot(
    cls: str, samples: Sequence[Mapping[str, Any]], trend: Mapping[str, Any], startup_end_t: float | None
) -> str:
    """PNG data URI: the class's total over time, start-up shaded, trend window and Theil–Sen line."""
    key, unit = RESOURCE_CLASSES[cls]
    scale, label = (MIB, "MiB") if unit == "bytes" else (1.0, "count")
    points = [(float(s["t"]), s["totals"].get(key)) for s in samples]
    t = [p[0] for p in points if p[1] is not None]
    y = [float(p[1]) / scale for p in points if p[1] is not None]
    fig, ax = new_figure()
    verdict = str(trend.get("verdict", "?"))
    colour = {"growing": "#dc2626", "bounded": "#16a34a"}.get(verdict, "#6b7280")
    ax.set_title(f"{_TITLES[cls]} — {verdict}", fontsize=10, color=colour, loc="left")
    if y:
        _mark_startup(ax, startup_end_t, trend.get("window"))
        ax.plot(t, y, color="#1f2937", lw=1.2, marker="." if len(y) < 60 else None, label=cls)
        slope, intercept = trend.get("slope_per_s"), trend.get("intercept")
        window = trend.get("window") or {}
        if slope is not None and intercept is not None and window.get("t_start") is not None:
            t0, t1 = float(window["t_start"]), float(window["t_end"])
            ax.plot(
                [t0, t1],
                [(intercept + slope * t0) / scale, (intercept + slope * t1) / scale],
                color=colour,
                lw=2,
                ls="-",
                label=f"Theil–Sen {slope * 3600 / scale:+.3g} {label}/h",
            )
    else:
        ax.text(
            0.5,
            0.5,
            "no data: " + str(trend.get("reason", "all values null")),
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=9,
            color="#6b7280",
            wrap=True,
        )
        ax.set_xticks([])
        ax.set_yticks([])
        return png_data_uri(fig)
    if unit == "count":
        from matplotlib.ticker import MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        if max(y) - min(y) < 4:  # a flat count: show whole numbers around it, not ±5 % of one value
            ax.set_ylim(max(0.0, min(y) - 2), max(y) + 2)
    ax.set_xlabel("time since monitor start (s)", fontsize=8)
    ax.set_ylabel(label, fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best", framealpha=0.8)
    return png_data_uri(fig)


def fd_breakdown_plot(samples: Sequence[Mapping[str, Any]], startup_end_t: float | None) -> str | None:
    """PNG data URI: fds by class summed over the tree, stacked; None when samples carry no fd detail."""
    t = [float(s["t"]) for s in samples]

    def tree_count(sample: Mapping[str, Any], cls: str) -> int:
        return sum(int((p.get("fds") or {}).get(cls) or 0) for p in sample.get("processes") or [])

    stacks = {c: [tree_count(s, c) for s in samples] for c in _FD_CLASSES}
    stacks = {c: v for c, v in stacks.items() if any(v)}
    if not stacks or not t:
        return None
    fig, ax = new_figure(12.8, 3.0)
    ax.set_title("File descriptors by class (whole tree)", fontsize=10, loc="left")
    _mark_startup(ax, startup_end_t, None)
    ax.stackplot(t, list(stacks.values()), labels=list(stacks), alpha=0.85)
    ax.set_xlabel("time since monitor start (s)", fontsize=8)
    ax.set_ylabel("count", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", ncol=len(stacks) + 1, framealpha=0.8)
    return png_data_uri(fig)


def progress_plot(samples: Sequence[Mapping[str, Any]], startup_end_t: float | None) -> str | None:
    """PNG data URI: env steps/s and replay occupancy from the progress records; None without progress."""
    rows = [(float(s["t"]), s["progress"]) for s in samples if isinstance(s.get("progress"), Mapping)]
    rate = [
        (t, p.get("env_steps_per_s")) for t, p in rows if isinstance(p.get("env_steps_per_s"), int | float)
    ]
    if not rate:
        return None
    fig, ax = new_figure(12.8, 3.0)
    ax.set_title("Trainer progress (progress.jsonl)", fontsize=10, loc="left")
    _mark_startup(ax, startup_end_t, None)
    ax.plot([r[0] for r in rate], [r[1] for r in rate], color="#2563eb", lw=1.2, label="env steps/s")
    ax.set_ylabel("env steps/s", fontsize=8)
    occupancy = [(t, (p.get("replay") or {}).get("occupancy")) for t, p in rows]
    occupancy = [(t, o) for t, o in occupancy if isinstance(o, int | float)]
    if occupancy:
        ax2 = ax.twinx()
        ax2.step(
            [o[0] for o in occupancy],
            [o[1] for o in occupancy],
            color="#d97706",
            lw=1,
            where="post",
            label="replay occupancy",
        )
        ax2.set_ylabel("replay occupancy (slots)", fontsize=8)
        ax2.tick_params(labelsize=8)
        ax2.legend(fontsize=7, loc="upper right", framealpha=0.8)
    ax.set_xlabel("time since monitor start (s)", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", framealpha=0.8)
    return png_data_uri(fig)


def _psi_series(samples: Sequence[Mapping[str, Any]], kind: str) -> list[tuple[float, float]]:
    series = []
    for sample in samples:
        psi = (sample.get("host") or {}).get("psi_memory")
        if isinstance(psi, Mapping) and isinstance(psi.get(kind), Mapping):
            series.append((float(sample["t"]), float(psi[kind]["avg10"])))
    return series


def pressure_plot(
    samples: Sequence[Mapping[str, Any]], startup_end_t: float | None, kills: Sequence[Mapping[str, Any]]
) -> str | None:
    """PNG data URI: host MemAvailable, PSI memory some/full avg10 and the OOM kills (harness.soak.verdicts.oom);
    None when no sample carries a host block."""
    hosts = [(float(s["t"]), s["host"]) for s in samples if isinstance(s.get("host"), Mapping)]
    available = [(t, h["mem_available_bytes"] / MIB) for t, h in hosts if h.get("mem_available_bytes")]
    if not hosts:
        return None
    fig, ax = new_figure(12.8, 3.0)
    ax.set_title("Host memory pressure (/proc/meminfo, /proc/pressure/memory)", fontsize=10, loc="left")
    _mark_startup(ax, startup_end_t, None)
    ax.plot(
        [a[0] for a in available], [a[1] for a in available], color="#1f2937", lw=1.2, label="MemAvailable"
    )
    ax.set_ylabel("MemAvailable (MiB)", fontsize=8)
    for kill in kills:
        ax.axvline(kill["gone_by_t"], color="#dc2626", lw=1.5, label=f"OOM kill: pid {kill['pid']}")
    ax2 = ax.twinx()
    for kind, colour in (("some", "#d97706"), ("full", "#7c3aed")):
        series = _psi_series(samples, kind)
        ax2.plot(
            [p[0] for p in series], [p[1] for p in series], color=colour, lw=1, label=f"PSI {kind} avg10"
        )
    ax2.set_ylabel("PSI avg10 (% of time stalled)", fontsize=8)
    ax2.set_ylim(
        bottom=0.0, top=max([1.0, *(p[1] * 1.1 for k in ("some", "full") for p in _psi_series(samples, k))])
    )
    ax2.tick_params(labelsize=8)
    ax2.legend(fontsize=7, loc="upper right", framealpha=0.8)
    ax.set_xlabel("time since monitor start (s)", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", framealpha=0.8)
    return png_data_uri(fig)
