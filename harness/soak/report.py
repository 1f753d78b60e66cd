"""HTML report of one soak artifact: verdict table, resource plots with start-up and trend lines, context.

``render_report(artifact)`` writes ``<artifact stem>.html`` beside the artifact. The page is self-contained
(inline CSS, PNG plots embedded as base64 data URIs, no script, no external asset). The samples are read
from the artifact's ``samples_path``; when that file is gone, the file of the same name beside the
artifact is used (artifacts travel with their samples), and the page says which file it read. Without
either, the page still renders and says prominently that the plots are unavailable and why.
"""

from __future__ import annotations

import base64
import io
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from foundation.atomic import write_atomic
from harness.soak.artifact import ArtifactError, load_artifact
from harness.soak.oom import describe
from harness.soak.stacks import capture_views
from harness.soak.trends import RESOURCE_CLASSES

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "report.html.j2"
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
_MEMORY_PEAKS = (("PSS", "pss_bytes"), ("USS", "uss_bytes"), ("swap", "swap_bytes"))
#: per-process verdict columns of the report: class -> column label
_PROCESS_VERDICTS = {
    "pss": "PSS",
    "uss": "USS",
    "threads": "threads",
    "fd_total": "all fds",
    "eventfd": "eventfd",
    "shared_memory_fd": "shm fds",
}
_FD_CLASSES = ("pipe", "socket", "eventfd", "eventpoll", "memfd", "shared_memory", "nvidia", "other")


def locate_samples(artifact_path: Path, recorded: str) -> tuple[Path | None, str]:
    """The samples file to read and a note saying which one (or why none)."""
    first = Path(recorded)
    if not first.is_absolute():
        first = artifact_path.parent / first
    if first.is_file():
        return first, f"samples read from {first}"
    beside = artifact_path.parent / Path(recorded).name
    if beside.is_file():
        return (
            beside,
            f"samples_path {recorded} not found; read the file of that name beside the artifact: {beside}",
        )
    return None, f"samples file not found at {recorded} nor beside the artifact ({beside}); plots unavailable"


def read_samples(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """Samples [n] in file order; a truncated last line (monitor killed mid-write) is skipped and noted.

    Raises ArtifactError naming the line of any other malformed line.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    samples: list[dict[str, Any]] = []
    note = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                note = f"{path}: ignored a truncated last line {number}"
                continue
            raise ArtifactError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(record, dict) or "t" not in record or not isinstance(record.get("totals"), dict):
            raise ArtifactError(f"{path}:{number}: expected a sample object with 't' and 'totals'")
        samples.append(record)
    return samples, note


def _png(fig: Any) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _new_figure(width: float = 6.4, height: float = 3.0) -> tuple[Any, Any]:
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
    fig, ax = _new_figure()
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
        return _png(fig)
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
    return _png(fig)


def fd_breakdown_plot(samples: Sequence[Mapping[str, Any]], startup_end_t: float | None) -> str | None:
    """PNG data URI: fds by class summed over the tree, stacked; None when samples carry no fd detail."""
    t = [float(s["t"]) for s in samples]

    def tree_count(sample: Mapping[str, Any], cls: str) -> int:
        return sum(int((p.get("fds") or {}).get(cls) or 0) for p in sample.get("processes") or [])

    stacks = {c: [tree_count(s, c) for s in samples] for c in _FD_CLASSES}
    stacks = {c: v for c, v in stacks.items() if any(v)}
    if not stacks or not t:
        return None
    fig, ax = _new_figure(12.8, 3.0)
    ax.set_title("File descriptors by class (whole tree)", fontsize=10, loc="left")
    _mark_startup(ax, startup_end_t, None)
    ax.stackplot(t, list(stacks.values()), labels=list(stacks), alpha=0.85)
    ax.set_xlabel("time since monitor start (s)", fontsize=8)
    ax.set_ylabel("count", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", ncol=len(stacks) + 1, framealpha=0.8)
    return _png(fig)


def progress_plot(samples: Sequence[Mapping[str, Any]], startup_end_t: float | None) -> str | None:
    """PNG data URI: env steps/s and replay occupancy from the progress records; None without progress."""
    rows = [(float(s["t"]), s["progress"]) for s in samples if isinstance(s.get("progress"), Mapping)]
    rate = [
        (t, p.get("env_steps_per_s")) for t, p in rows if isinstance(p.get("env_steps_per_s"), int | float)
    ]
    if not rate:
        return None
    fig, ax = _new_figure(12.8, 3.0)
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
    return _png(fig)


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
    """PNG data URI: host MemAvailable, PSI memory some/full avg10 and the OOM kills (harness.soak.oom);
    None when no sample carries a host block."""
    hosts = [(float(s["t"]), s["host"]) for s in samples if isinstance(s.get("host"), Mapping)]
    available = [(t, h["mem_available_bytes"] / MIB) for t, h in hosts if h.get("mem_available_bytes")]
    if not hosts:
        return None
    fig, ax = _new_figure(12.8, 3.0)
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
    return _png(fig)


def human(value: Any, unit: str | None = None) -> str:
    """Short human text for a number (bytes as MiB/GiB), None as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value).lower()
    if unit == "bytes" and isinstance(value, int | float):
        return f"{value / MIB / 1024:.2f} GiB" if abs(value) >= 1024 * MIB else f"{value / MIB:.1f} MiB"
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def utc(unix_s: Any) -> str:
    """Unix seconds as ``YYYY-MM-DD HH:MM:SS UTC`` (a person reads a date, not 1.796e+09)."""
    if not isinstance(unix_s, int | float) or isinstance(unix_s, bool):
        return human(unix_s)
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix_s))


def value_text(value: Any, nested: bool = False) -> str:
    """A criterion value as compact text for the table cell (nested containers bracketed)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        text = ", ".join(f"{k}={value_text(v, True)}" for k, v in value.items())
        return f"({text})" if nested else text
    if isinstance(value, list):
        if not value:
            return "[]"
        if all(isinstance(v, Mapping) for v in value):
            return f"{len(value)}: " + "; ".join(
                " ".join(f"{k}={v}" for k, v in item.items() if k in ("pid", "name", "path"))
                for item in value[:6]
            )
        text = ", ".join(value_text(v, True) for v in value)
        return f"[{text}]" if nested else text
    return human(value)


def _trend_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for cls, trend in summary["trends"].items():
        unit = trend.get("unit")
        per_hour = trend.get("slope_per_hour")
        mk = trend.get("mann_kendall") or {}
        rows.append(
            {
                "cls": cls,
                "judged": trend.get("judged", True) is not False,
                "verdict": summary["leak_verdicts"][cls],
                "slope": "—" if per_hour is None else f"{human(per_hour, unit)}/h",
                "growth": human(trend.get("growth_over_window"), unit),
                "required": human(trend.get("required_growth"), unit),
                "p": "—" if "p_value_increasing" not in mk else f"{mk['p_value_increasing']:.2g}",
                "window": (
                    "—"
                    if trend["window"].get("t_start") is None
                    else f"{trend['window']['t_start']:.0f}–{trend['window']['t_end']:.0f} s, n={trend['window']['n']}"
                ),
                "reason": str(trend.get("reason", "")),
            }
        )
    return rows


def process_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The per-process table: one row per listed identity (empty for an artifact without verdicts per
    process). A growing verdict of a process too short-lived to be judged shows as ``growing (reported)``."""
    per_process = summary.get("per_process")
    if not isinstance(per_process, Mapping):
        return []
    rows = []
    for entry in per_process["processes"]:
        peaks = entry["peaks"]
        verdicts = []
        for cls in _PROCESS_VERDICTS:
            verdict = entry["leak_verdicts"][cls]
            shown = verdict.replace("_", " ")
            if verdict == "growing" and cls not in entry["failing"]:
                shown += " (reported)"
            verdicts.append({"cls": cls, "verdict": verdict, "text": shown})
        rows.append(
            {
                "role": entry["role"],
                "pid": entry["pid"],
                "name": entry["name"],
                "command": " ".join(entry["command"]) or entry["name"],
                "short": " ".join(Path(a).name if a.startswith("/") else a for a in entry["command"])
                or entry["name"],
                "lifetime": f"{entry['first_t']:.0f}–{entry['last_t']:.0f} s",
                "coverage": f"{100 * entry['window_coverage']:.0f} %",
                "judged": "judged" if entry["judged"] else "short-lived: reported",
                "pss": human(peaks["pss_bytes"], "bytes"),
                "uss": human(peaks["uss_bytes"], "bytes"),
                "rss": human(peaks["rss_bytes"], "bytes"),
                "swap": human(peaks["swap_bytes"], "bytes"),
                "threads": human(peaks["threads"]),
                "fds": human(peaks["fd_total"]),
                "verdicts": verdicts,
            }
        )
    return rows


def drift_row(artifact: Mapping[str, Any]) -> dict[str, str] | None:
    """The throughput drift verdict as display text; None for an artifact that predates it."""
    drift = artifact.get("throughput_drift")
    if not isinstance(drift, Mapping):
        return None
    slope, p, change = drift["slope_per_hour"], drift["p_value"], drift["relative_change_pct"]
    window = drift["window"]
    return {
        "verdict": drift["verdict"],
        "slope": "—" if slope is None else f"{slope:+.4g} env steps/s per h",
        "p": "—" if p is None else f"{p:.2g}",
        "change": "—" if change is None else f"{change:+.1f} %",
        "window": "—" if window["t_start"] is None else f"{window['t_start']:.0f}–{window['t_end']:.0f} s",
        "points": str(drift["points"]),
        "gate": "fails the run" if drift["fails_run"] else "information only",
        "reason": str(drift["reason"]),
    }


def build_page(artifact: Mapping[str, Any], artifact_path: Path) -> str:
    """The HTML text for one validated artifact (reads its samples; no write)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    summary = artifact["resource_summary"]
    samples_file, samples_note = locate_samples(artifact_path, artifact["samples_path"])
    samples: list[dict[str, Any]] = []
    notes: list[str] = []
    if samples_file is not None:
        samples, truncated = read_samples(samples_file)
        if truncated:
            notes.append(truncated)
    startup_end_t = summary["startup_end_t"]
    plots = [
        {"cls": cls, "src": resource_plot(cls, samples, summary["trends"][cls], startup_end_t)}
        for cls in (RESOURCE_CLASSES if samples else ())
        if cls in summary["trends"]  # an artifact from before a class existed has no trend for it
    ]
    wide = [
        p for p in (fd_breakdown_plot(samples, startup_end_t), progress_plot(samples, startup_end_t)) if p
    ]
    oom_kills = (artifact.get("oom") or {}).get("kills") or []
    pressure = pressure_plot(samples, startup_end_t, oom_kills)
    peaks = summary["peaks"]
    peak_rows = [
        ("processes", human(peaks["process_count"])),
        ("RSS", human(peaks["rss_bytes"], "bytes")),
        *[(label, human(peaks[key], "bytes")) for label, key in _MEMORY_PEAKS if key in peaks],
        ("GPU memory", human(peaks["gpu_memory_bytes"], "bytes")),
        ("threads", human(peaks["threads"])),
        ("eventfds", human(peaks["eventfd"])),
        ("shm fds", human(peaks["shared_memory_fd"])),
        ("all fds", human(peaks["fd_total"])),
        ("replay high-water", human(peaks["replay_high_water_occupancy"])),
        ("inference events", human(peaks["inference_events"])),
        ("max in flight", human(peaks["inference_max_in_flight"])),
    ]
    env = Environment(
        loader=FileSystemLoader(TEMPLATE_DIR),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["human"] = human
    env.filters["value_text"] = value_text
    env.filters["utc"] = utc
    template = env.get_template(TEMPLATE_NAME)
    return template.render(
        a=artifact,
        artifact_name=artifact_path.name,
        criteria=artifact["criteria"],
        trend_rows=_trend_rows(summary),
        process_rows=process_rows(summary),
        per_process=summary.get("per_process"),
        process_verdicts=_PROCESS_VERDICTS,
        drift=drift_row(artifact),
        plots=plots,
        wide_plots=wide,
        pressure=pressure,
        oom_kills=[describe(k) for k in oom_kills],
        peak_rows=peak_rows,
        samples_note=samples_note,
        sample_count=len(samples),
        notes=notes,
        plots_missing=samples_file is None,
        forensics=capture_views(artifact.get("forensics")),
    )


def render_report(artifact_path: str | Path, artifact: Mapping[str, Any] | None = None) -> Path:
    """Render ``<stem>.html`` beside the artifact (atomic write) and return that path.

    ``artifact``: the artifact already loaded and validated from ``artifact_path`` (the writer just did);
    None reads and validates the file. Raises ArtifactError (invalid/unreadable artifact or malformed
    samples line).
    """
    path = Path(artifact_path)
    data = load_artifact(path) if artifact is None else artifact
    target = path.with_name(path.stem + ".html")
    write_atomic(target, build_page(data, path))
    return target


def report_command(artifact: Path) -> int:
    """``soak report ARTIFACT``: render the report; exit 0, or 2 with the reason on stderr."""
    try:
        data = load_artifact(artifact)
        target = render_report(artifact, data)
        samples_file, note = locate_samples(Path(artifact), data["samples_path"])
    except ArtifactError as exc:
        print(f"soak report: {exc}", file=sys.stderr)
        return 2
    if samples_file is None:
        print(f"soak report: warning: {note}", file=sys.stderr)
    print(target)
    return 0
