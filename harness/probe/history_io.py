"""``probe history``: probe evidence from the tree and from git history, a table and an HTML page.

    probe history [--task T] [--backend B] [--platform P] [--threshold 0.05]
                  [--output reports/probe-history.html] [EXTRA.json ...]

Evidence is every ``matrix/evidence/probe/*.json`` in the work tree plus every version of such a file
in any commit (``git log --all`` + ``git show <commit>:<path>``), so evidence pruned from the tree still
counts; identical contents count once. A historical file that is not a readable probe artifact is
skipped and counted; an EXTRA artifact that is not is refused (exit 2, nothing written). Points are
ordered by their source commit's position in history (``git rev-list --topo-order``); commits git does
not know come last, by the probe's creation time. Exit codes: 0 written; 1 no point matched, or the page could not be written; 2 bad input.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from soakbench.foundation.atomic import write_atomic
from soakbench.harness.probe.history import (
    DEFAULT_THRESHOLD,
    STEP_METHOD,
    HistoryInputError,
    Point,
    detect_steps,
    parse_probe,
    platform_of,
    points_of,
    series,
)
from soakbench.runtime.choices import Sim, Task

EVIDENCE_DIR = "matrix/evidence/probe"
DEFAULT_OUTPUT = "reports/probe-history.html"


def _git(repo: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def evidence_texts(repo: Path) -> list[tuple[str, str]]:
    """(source, text) of every distinct probe evidence content: the tree's files, then git history's."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted((repo / EVIDENCE_DIR).glob("*.json")):
        text = path.read_text(encoding="utf-8", errors="replace")
        found.setdefault(hashlib.sha256(text.encode()).hexdigest(), (f"{EVIDENCE_DIR}/{path.name}", text))
    log = _git(repo, "log", "--all", "--format=%H", "--name-only", "--", EVIDENCE_DIR) or ""
    commit = ""
    for line in log.splitlines():
        if len(line) == 40 and all(c in "0123456789abcdef" for c in line):
            commit = line
        elif line.endswith(".json") and commit:
            shown = _git(repo, "show", f"{commit}:{line}")
            if shown is not None:
                found.setdefault(hashlib.sha256(shown.encode()).hexdigest(), (f"{commit[:12]}:{line}", shown))
    return list(found.values())


def commit_positions(repo: Path) -> dict[str, int]:
    """Full commit id -> its position in history, oldest first (``git rev-list --topo-order --reverse``)."""
    out = _git(repo, "rev-list", "--topo-order", "--reverse", "--all") or ""
    return {commit: index for index, commit in enumerate(out.split())}


def collect(repo: Path, extras: Sequence[Path]) -> tuple[list[Point], list[str]]:
    """Every point of the evidence and the extra artifacts, and the skipped historical sources."""
    points: list[Point] = []
    skipped = []
    positions = commit_positions(repo)
    for source, text in evidence_texts(repo):
        try:
            doc = parse_probe(text, source)
        except HistoryInputError as exc:
            skipped.append(str(exc))
            continue
        points += _points(positions, doc, source, platform_of(source))
    for extra in extras:
        try:
            text = extra.read_text(encoding="utf-8")
        except OSError as exc:
            raise HistoryInputError(str(extra), "$", f"cannot read: {exc.strerror or exc}") from None
        points += _points(positions, parse_probe(text, str(extra)), str(extra), platform_of(str(extra)))
    return points, skipped


def _points(positions: dict[str, int], doc: dict[str, Any], source: str, platform: str) -> list[Point]:
    """A commit git does not know sorts after every known one, by the probe's creation time."""
    position = positions.get(str(doc["context"]["source"]["commit"]), len(positions))
    return points_of(doc, source, platform, (position, float(doc["created_unix_s"])))


def _value(triple: tuple[float, float | None, float | None], digits: str) -> str:
    median, low, high = triple
    if low is None or high is None:
        return f"{median:{digits}} (no samples)"
    return f"{median:{digits}} [{low:{digits}}, {high:{digits}}]"


def print_table(all_series: dict[tuple[str, str, str], list[Point]], console: Console) -> None:
    """One row per point in commit order, the step column naming the first commit after a change."""
    table = Table(title="probe history: env steps/s and efficiency per commit (median [95% CI])")
    for column in ("task", "platform", "backend", "commit", "env steps/s", "efficiency", "step"):
        table.add_column(column)
    for (task, platform, backend), points in all_series.items():
        for point in points:
            step = point.step
            table.add_row(
                task, platform, backend, (point.commit or "?")[:12],
                _value(point.steps_per_s, ",.0f"), _value(point.efficiency, ".3f"),
                "" if step is None else f"[bold]{step['verdict']} x{step['ratio']:.3f}",
            )  # fmt: skip
    console.print(table)
    console.print(f"step detector: {STEP_METHOD}; '(no samples)': a 0.3.0 artifact, no raw samples")


def _plot(task: str, platform: str, by_backend: dict[str, list[Point]], commits: list[str]) -> str:
    from matplotlib.figure import Figure  # Figure API: no pyplot global state

    fig = Figure(figsize=(8.0, 3.4), layout="constrained")
    ax = fig.add_subplot()
    for backend, points in by_backend.items():
        x = [commits.index(p.commit or "?") for p in points]
        y = [p.steps_per_s[0] for p in points]
        low = [
            y_ - (p.steps_per_s[1] if p.steps_per_s[1] is not None else y_)
            for p, y_ in zip(points, y, strict=True)
        ]
        high = [
            (p.steps_per_s[2] if p.steps_per_s[2] is not None else y_) - y_
            for p, y_ in zip(points, y, strict=True)
        ]
        ax.errorbar(x, y, yerr=[low, high], marker="o", capsize=4, label=backend)
        for xi, point in zip(x, points, strict=True):
            if point.step is not None:
                ax.axvline(xi - 0.5, color="red", linestyle="--", linewidth=1)
                ax.annotate(f"step {point.step['ratio']:.2f}x", (xi - 0.5, max(y)), color="red", fontsize=8)
    ax.set_xticks(range(len(commits)), [c[:8] for c in commits], rotation=30, fontsize=8)
    ax.set_ylabel("env control steps/s")
    ax.set_title(f"{task} on {platform}", fontsize=10)
    ax.legend(fontsize=8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def render_page(all_series: dict[tuple[str, str, str], list[Point]], skipped: Sequence[str]) -> str:
    """The HTML page: one plot per (task, platform), one line per backend, steps marked in red."""
    groups: dict[tuple[str, str], dict[str, list[Point]]] = {}
    for (task, platform, backend), points in all_series.items():
        groups.setdefault((task, platform), {})[backend] = points
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>soakbench probe history</title>",
             "<style>body{font-family:sans-serif;margin:2em}img{max-width:100%}.muted{color:#666}</style>",
             "</head><body><h1>Probe history</h1>",
             f"<p class='muted'>Error bars: 95 % two-level bootstrap interval of the median from the raw samples; "
             f"points without one are 0.3.0 artifacts (no raw samples). Red dashed line: step detector "
             f"({html.escape(STEP_METHOD)}), at the first commit after the change.</p>"]  # fmt: skip
    for (task, platform), by_backend in groups.items():
        ordered = sorted({p.commit or "?" for pts in by_backend.values() for p in pts},
                         key=lambda c: min(p.order for pts in by_backend.values() for p in pts if (p.commit or "?") == c))  # fmt: skip
        parts.append(f"<h2>{html.escape(task)} · {html.escape(platform)}</h2>")
        parts.append(
            f"<img alt='{html.escape(task)}' src='data:image/png;base64,{_plot(task, platform, by_backend, ordered)}'>"
        )
    if skipped:
        parts.append(f"<p class='muted'>{len(skipped)} historical file(s) skipped: "
                     + "; ".join(html.escape(s) for s in skipped[:10]) + "</p>")  # fmt: skip
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _bad_argument(filters: dict[str, str | None], threshold: float, output: Path) -> str | None:
    """The first bad argument, named with what it allows (None: all good)."""
    allowed = {"task": [t.value for t in Task], "backend": [b.value for b in Sim]}
    for name, values in allowed.items():
        if filters.get(name) is not None and filters[name] not in values:
            return f"--{name}: {filters[name]!r} is not one of {', '.join(values)}"
    if not 0 < threshold < 1:
        return f"--threshold: must be a fraction in (0, 1), got {threshold}"
    if output.suffix != ".html" or not output.parent.is_dir():
        return f"--output: must be a .html path in an existing directory, got {str(output)!r}"
    return None


def history_command(
    extras: Sequence[Path], filters: dict[str, str | None], threshold: float, output: Path, repo: Path
) -> int:
    """The exit code of ``probe history``."""
    console = Console(stderr=True)
    problem = _bad_argument(filters, threshold, output)
    if problem:
        console.print(f"[red]probe history: {escape(problem)}")
        return 2
    try:
        points, skipped = collect(repo, extras)
    except HistoryInputError as exc:
        console.print(f"[red]probe history: {escape(str(exc))}")
        return 2
    kept = [p for p in points if all(v is None or getattr(p, k) == v for k, v in filters.items())]
    if not kept:
        console.print(f"[red]probe history: no probe evidence matches {filters}")
        return 1
    all_series = series(kept)
    for points_of_series in all_series.values():
        detect_steps(points_of_series, threshold)
    print_table(all_series, console)
    try:
        write_atomic(output, render_page(all_series, skipped))
    except OSError as exc:
        console.print(f"[red]probe history: page not written: {escape(str(exc))}")
        return 1
    console.print(f"probe history: wrote {output}")
    return 0


def history(
    extras: Annotated[list[Path] | None, typer.Argument(help="extra probe artifacts")] = None,
    task: str | None = typer.Option(None, "--task"),
    backend: str | None = typer.Option(None, "--backend"),
    platform: str | None = typer.Option(None, "--platform"),
    threshold: float = typer.Option(DEFAULT_THRESHOLD, "--threshold", help="step size (0.05 = 5 %)"),
    output: str = typer.Option(DEFAULT_OUTPUT, "--output", help="the HTML page to write"),
) -> None:
    """Throughput and efficiency per commit, in commit order; writes the HTML history page."""
    filters = {"task": task, "backend": backend, "platform": platform}
    raise typer.Exit(history_command(extras or [], filters, threshold, Path(output), Path.cwd()))
