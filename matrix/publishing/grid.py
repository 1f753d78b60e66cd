"""The at-a-glance view of the matrix document (pure): a grid of grades, a footnote per fail-closed
reason, and the per-cell detail that lists only the evidence recorded for the cell's own platform.

Rows are entrypoint x task x ranks (a job of several ranks has a row of its own, right after the
single-rank row), columns backend x platform (platforms in the inventory's order: the document's ``platforms``). Each grid cell carries
a one-line reason for the next grade; the full reasons are in its ``title`` and detail.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from soakbench.matrix.model import PLATFORMS, cell_label

Doc = Mapping[str, Any]


@dataclass(frozen=True)
class GridCell:
    """One grid cell: its grade, the next grade's one-line reason, the hover text and a footnote."""

    anchor: str
    label: str
    grade: str
    line: str
    title: str
    footnote: int | None


@dataclass(frozen=True)
class GridRow:
    """One entrypoint x task x ranks row; ``cells`` follow the grid's columns (None: no cell declared
    there)."""

    algo: str
    task: str
    cells: tuple[GridCell | None, ...]
    ranks: int = 1

    @property
    def topology(self) -> str:
        """`` · N ranks`` after the task of a job of several ranks, empty for one rank."""
        return f" \u00b7 {self.ranks} ranks" if self.ranks > 1 else ""


@dataclass(frozen=True)
class Grid:
    """Columns (backend, platform), platform header spans, rows, and the fail-closed footnotes."""

    columns: tuple[tuple[str, str], ...]
    platform_spans: tuple[tuple[str, int], ...]
    rows: tuple[GridRow, ...]
    footnotes: tuple[tuple[int, str, tuple[str, ...]], ...]  # (number, reason, cell labels)


@dataclass(frozen=True)
class EvidenceLine:
    """One piece of evidence as listed under a cell; ``report`` is its soak HTML report, if filed."""

    id: str
    kind: str
    file: str
    status: str
    verdict: str
    report: str | None


@dataclass(frozen=True)
class CellDetail:
    """A cell's detail: what counts, what was considered on its platform and why not, what is history."""

    anchor: str
    label: str
    cell: Mapping[str, Any]
    counted: tuple[EvidenceLine, ...]
    considered: tuple[EvidenceLine, ...]
    historical: tuple[EvidenceLine, ...]


def _ranks(cell: Doc) -> int:
    return int(cell.get("ranks", 1))


def label(cell: Doc) -> str:
    """``algo/task/backend@platform`` of a document cell (`` (N ranks)`` appended for N > 1)."""
    return cell_label(cell["algo"], cell["task"], cell["backend"], cell["platform"], _ranks(cell))


def anchor(cell: Doc) -> str:
    """The HTML id of a cell's detail section (``-Nranks`` appended for a job of N > 1 ranks)."""
    ranks = _ranks(cell)
    tail = f"-{ranks}ranks" if ranks > 1 else ""
    return f"cell-{cell['algo']}-{cell['task']}-{cell['backend']}-{cell['platform']}{tail}"


def _row(cell: Doc) -> tuple[str, str, int]:
    return cell["algo"], cell["task"], _ranks(cell)


def _counting_kinds(cell: Doc) -> set[str]:
    return {e["kind"] for e in cell["evidence"] if e["counts"]}


def _benchmarked_gap(cell: Doc) -> str:
    counting, policy = _counting_kinds(cell), cell["policy"] or {}
    missing = [
        kind
        for kind, needed in (("probe", policy.get("probe_required", True)), ("soak", True))
        if needed and kind not in counting
    ]
    return "needs a fresh " + " + ".join(missing) if missing else ""


def _recommended_gap(cell: Doc, reasons: Sequence[str]) -> str:
    rec = cell["recommendation"]
    missing = []
    if rec is None:
        missing.append("a recommendation")
    elif rec["decision"] != "recommend":
        missing.append(f"decision is {rec['decision']}")
    if any("canonical" in r for r in reasons):
        missing.append("a canonical soak")
    return "needs " + " + ".join(missing) if missing else ""


def _next_gap(cell: Doc, grade: str, reasons: Sequence[str]) -> str:
    """The short form of what the next grade needs, or "" when it has no short form."""
    lane = (cell["policy"] or {}).get("test_lane")
    if grade == "Configured":
        return "owner config invalid here"
    if grade == "Tested":
        if any(
            e["kind"] == "junit" and e["verdict"].startswith("bound tests failed") for e in cell["evidence"]
        ):
            return "bound tests failed"
        return f"needs {lane}-lane JUnit"
    if grade == "Benchmarked":
        return _benchmarked_gap(cell)
    if grade == "Recommended":
        return _recommended_gap(cell, reasons)
    return ""


def next_line(cell: Doc) -> tuple[str, str]:
    """(one-line reason for the next grade, every reason in full for the hover text)."""
    if cell["unsupported_reason"]:
        return "fail-closed", f"fail-closed: {cell['unsupported_reason']}"
    if not cell["blockers"]:
        return "top grade", "every grade's requirements hold"
    first = cell["blockers"][0]
    grade, reasons = first["grade"], list(first["reasons"])
    short = _next_gap(cell, grade, reasons) or (reasons[0] if reasons else "")
    return f"{grade}: {short}", f"{grade}: " + "; ".join(reasons)


def _platform_order(doc: Doc) -> Callable[[Doc], tuple[str, str, int, int, str]]:
    """Grid order of a cell, row (algo, task, ranks) then column, by the document's platform order."""
    order = {p: i for i, p in enumerate(doc.get("platforms", PLATFORMS))}

    def key(cell: Doc) -> tuple[str, str, int, int, str]:
        return (*_row(cell), order[cell["platform"]], cell["backend"])

    return key


def _columns(
    cells: Sequence[Doc], grid_order: Callable[[Doc], tuple[str, str, int, int, str]]
) -> tuple[tuple[str, str], ...]:
    found = {(c["backend"], c["platform"]): grid_order(c)[3:] for c in cells}
    return tuple(sorted(found, key=lambda bp: found[bp]))


def build_grid(doc: Doc) -> Grid:
    """The grid of ``doc``'s cells; footnotes are numbered by distinct fail-closed reason."""
    cells = doc["cells"]
    grid_order = _platform_order(doc)
    columns = _columns(cells, grid_order)
    by_key = {(*_row(c), c["backend"], c["platform"]): c for c in cells}
    notes: dict[str, list[str]] = {}
    for c in sorted(cells, key=grid_order):
        if c["unsupported_reason"]:
            notes.setdefault(c["unsupported_reason"], []).append(label(c))
    numbers = {reason: n for n, reason in enumerate(notes, start=1)}
    rows = []
    for algo, task, ranks in sorted({_row(c) for c in cells}):
        row = []
        for backend, platform in columns:
            c = by_key.get((algo, task, ranks, backend, platform))
            row.append(None if c is None else _grid_cell(c, numbers))
        rows.append(GridRow(algo, task, tuple(row), ranks))
    spans: dict[str, int] = {}
    for _, platform in columns:
        spans[platform] = spans.get(platform, 0) + 1
    footnotes = tuple((numbers[r], r, tuple(labels)) for r, labels in notes.items())
    return Grid(columns, tuple(spans.items()), tuple(rows), footnotes)


def _grid_cell(cell: Doc, numbers: Mapping[str, int]) -> GridCell:
    line, title = next_line(cell)
    reason = cell["unsupported_reason"]
    return GridCell(
        anchor(cell), label(cell), cell["grade"], line, title, numbers[reason] if reason else None
    )


def cell_detail(cell: Doc, platform_of: Mapping[str, str], reports: Mapping[str, str | None]) -> CellDetail:
    """Split a cell's evidence: counted, considered on its platform (not counted), historical. Evidence
    recorded for another platform is left out (``platform_of``: evidence id -> recorded platform)."""
    own = [e for e in cell["evidence"] if platform_of.get(e["id"]) == cell["platform"]]

    def lines(keep: Sequence[Doc]) -> tuple[EvidenceLine, ...]:
        return tuple(
            EvidenceLine(e["id"], e["kind"], e["file"], e["status"], e["verdict"], reports.get(e["id"]))
            for e in keep
        )

    return CellDetail(
        anchor(cell),
        label(cell),
        cell,
        counted=lines([e for e in own if e["counts"]]),
        considered=lines([e for e in own if not e["counts"] and e["status"] != "historical"]),
        historical=lines([e for e in own if not e["counts"] and e["status"] == "historical"]),
    )


def details(doc: Doc) -> tuple[CellDetail, ...]:
    """Every cell's detail, in grid order (row, then column)."""
    platform_of = {e["id"]: e["platform"] for e in doc["evidence"]}
    reports = {e["id"]: e.get("report") for e in doc["evidence"]}
    ordered = sorted(doc["cells"], key=_platform_order(doc))
    return tuple(cell_detail(c, platform_of, reports) for c in ordered)


def _transfers(counts: Mapping[str, int]) -> str:
    if not counts:
        return "none (device-resident)"
    return ", ".join(f"{phase} \u2264 {n}" for phase, n in counts.items())


def _cuda_graph(row: Doc) -> str:
    if not row["cuda_graph_requested"]:
        return "not requested"
    return "requested, possible" if row["cuda_graph_possible"] else "requested, not possible here"


def capability_view(row: Doc) -> dict[str, str]:
    """Display strings of one capability row of the document (what the backend declared)."""
    physics = row["physics_device"]
    return {
        "backend": row["backend"],
        "platform": row["platform"],
        "data_plane": "host bridge" if row["data_plane"] == "host_bridge" else "device",
        "physics_device": physics if physics else f"none: {row['note']}",
        "learner_device": row["learner_device"],
        "process_model": row["process_model"],
        "cuda_graph": _cuda_graph(row),
        "mps_sharing": row["mps_sharing"],
        "host_transfers": _transfers(row["host_transfers"]),
    }
