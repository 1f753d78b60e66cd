"""HTML report of one soak artifact: verdict table, resource plots with start-up and trend lines, context.

``render_report(artifact)`` writes ``<artifact stem>.html`` beside the artifact. The page is self-contained
(inline CSS, PNG plots embedded as base64 data URIs, no script, no external asset). The samples are read
from the artifact's ``samples_path``; when that file is gone, the file of the same name beside the
artifact is used (artifacts travel with their samples), and the page says which file it read. Without
either, the page still renders and says prominently that the plots are unavailable and why.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from soakbench.foundation.atomic import write_atomic
from soakbench.harness.soak.evidence.artifact import ArtifactError, load_artifact
from soakbench.harness.soak.evidence.report_gpu import gpu_view
from soakbench.harness.soak.evidence.report_plots import (
    MIB,
    fd_breakdown_plot,
    pressure_plot,
    progress_plot,
    resource_plot,
)
from soakbench.harness.soak.evidence.report_ranks import ranks_view
from soakbench.harness.soak.evidence.report_survival import survival_view
from soakbench.harness.soak.evidence.verdict_table import folded_rows
from soakbench.harness.soak.verdicts.oom import describe
from soakbench.harness.soak.verdicts.stacks import capture_views
from soakbench.harness.soak.verdicts.survival import duration_text
from soakbench.harness.soak.verdicts.trends import RESOURCE_CLASSES

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
TEMPLATE_NAME = "report.html.j2"

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
    env.filters["duration"] = duration_text
    template = env.get_template(TEMPLATE_NAME)
    return template.render(
        a=artifact,
        artifact_name=artifact_path.name,
        criteria=folded_rows(artifact),
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
        gpu=gpu_view(artifact, samples),
        survival=survival_view(artifact, samples),
        ranks=ranks_view(artifact, samples),
    )


def report_path(artifact_path: str | Path) -> Path:
    """Where the report of an artifact goes: ``<stem>.html`` beside it."""
    path = Path(artifact_path)
    return path.with_name(path.stem + ".html")


def render_report(artifact_path: str | Path, artifact: Mapping[str, Any] | None = None) -> Path:
    """Render ``<stem>.html`` beside the artifact (atomic write) and return that path.

    ``artifact``: the artifact already loaded and validated from ``artifact_path`` (the writer just did);
    None reads and validates the file. Raises ArtifactError (invalid/unreadable artifact or malformed
    samples line).
    """
    path = Path(artifact_path)
    data = load_artifact(path) if artifact is None else artifact
    target = report_path(path)
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
