"""Render the graded matrix: ``reports/support-matrix.json``, the generated block of
``docs/support-matrix.md`` and ``reports/support-matrix.html``. Pure: state in, text out.

Output is deterministic: sorted inputs, no clock; the only times shown are those the evidence carries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from soakbench.matrix.declared import CapabilityRow
from soakbench.matrix.freshness import FINGERPRINT_PATHS
from soakbench.matrix.grading import MatrixState, freshness
from soakbench.matrix.model import GRADE_MEANING, GRADES, CellResult, MatrixInputError, Project, SoakBudget
from soakbench.matrix.publishing.grid import build_grid, capability_view, details

MATRIX_JSON_VERSION = 1
PAGE_REL = "docs/support-matrix.md"
HTML_REL = "reports/support-matrix.html"
JSON_REL = "reports/support-matrix.json"
BEGIN_MARKER = "<!-- BEGIN GENERATED SUPPORT MATRIX (uv run matrix generate; do not edit by hand) -->"
END_MARKER = "<!-- END GENERATED SUPPORT MATRIX -->"
TEMPLATES = Path(__file__).parent / "templates"


def _budget(b: SoakBudget | None) -> dict[str, Any] | None:
    if b is None:
        return None
    return {"min_duration_s": b.min_duration_s, "num_envs": b.num_envs, "iterations": b.iterations}


def cell_doc(result: CellResult) -> dict[str, Any]:
    """One cell of the JSON document."""
    p = result.policy
    rec = p.recommendation
    return {
        "algo": p.key.algo,
        "task": p.key.task,
        "backend": p.key.backend,
        "platform": p.key.platform,
        "ranks": p.key.ranks,
        "grade": result.grade,
        "unsupported_reason": p.unsupported_reason,
        "blockers": [{"grade": g, "reasons": list(reasons)} for g, reasons in result.blockers],
        "evidence": [
            {
                "id": v.id,
                "kind": v.kind,
                "file": v.file,
                "status": v.freshness,
                "counts": v.counts,
                "verdict": v.verdict,
                "unrecorded_inputs": list(v.unrecorded),
            }
            for v in result.evidence
        ],
        "policy": None
        if p.unsupported_reason
        else {
            "test_lane": p.test_lane,
            "min_passed": p.min_passed,
            "probe_required": p.probe_required,
            "soak": _budget(p.soak),
        },
        "recommendation": None
        if rec is None
        else {"decision": rec.decision, "date": rec.date, "rationale": rec.rationale},
        "notes": list(result.notes),
    }


def capability_doc(row: CapabilityRow) -> dict[str, Any]:
    """One backend x platform capability row of the JSON document."""
    return {**asdict(row), "host_transfers": dict(row.host_transfers)}


def project_doc(project: Project) -> dict[str, Any]:
    """A project's own inventory as the JSON document names it (absent for this runtime's)."""
    return {
        "name": project.name,
        "inputs": list(project.inputs),
        "facts": "declared",
        "lanes": list(project.lanes),
        "systems": dict(project.systems),
    }


def budget_text(budget: Mapping[str, Any]) -> str:
    """``1800.0 s, 1024 envs, 65000 iterations`` of a document budget (parts not required left out)."""
    return ", ".join(
        SoakBudget(budget["min_duration_s"], budget.get("num_envs"), budget.get("iterations")).parts()
    )


def matrix_doc(state: MatrixState) -> dict[str, Any]:
    """The machine-readable matrix."""
    project = state.inventory.project
    meaning = {**GRADE_MEANING, **state.meanings}
    return {
        "schema_version": MATRIX_JSON_VERSION,
        **({"project": project_doc(project)} if project is not None else {}),
        "fingerprint_paths": list(project.inputs if project is not None else FINGERPRINT_PATHS),
        "grades": [{"grade": g, "meaning": meaning[g]} for g in GRADES],
        "platforms": list(state.inventory.platforms),
        "canonical_soak": _budget(state.inventory.canonical_soak),
        "cells": [cell_doc(r) for r in state.results],
        "capabilities": [capability_doc(row) for row in state.capabilities],
        "links": {"probe_history": state.probe_history},
        "evidence": [
            {
                "id": ev.id,
                "kind": ev.kind,
                "file": ev.file,
                "platform": ev.platform,
                "lane": ev.lane,
                "commit": ev.commit,
                "dirty": ev.dirty,
                "passed": ev.passed,
                "status": freshness(ev),
                "detail": ev.status_detail,
                "problems": list(ev.problems),
                "time": ev.time,
                "report": state.soak_reports.get(ev.id),
                "input_manifest": ev.inputs is not None or bool(ev.cell_inputs),
                "inputs_note": ev.inputs_note,
            }
            for ev in state.evidence
        ],
    }


def render_json(doc: dict[str, Any]) -> str:
    """Canonical JSON text (sorted keys, two-space indent, trailing newline)."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _env(autoescape: bool) -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=autoescape,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md"] = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    env.filters["budget"] = budget_text
    return env


def _context(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "doc": doc,
        "grid": build_grid(doc),
        "details": details(doc),
        "capabilities": [capability_view(row) for row in doc["capabilities"]],
        "grades": GRADES,
        "project_name": doc["project"]["name"] if "project" in doc else "soakbench",
    }


def render_block(doc: dict[str, Any]) -> str:
    """The generated Markdown block (between the markers, markers included)."""
    body = _env(False).get_template("support-matrix.md.j2").render(**_context(doc))
    return f"{BEGIN_MARKER}\n{body.strip()}\n{END_MARKER}"


def render_html(doc: dict[str, Any]) -> str:
    """The standalone HTML report."""
    return _env(True).get_template("support-matrix.html.j2").render(**_context(doc))


def splice_page(page: str, block: str, display: str = PAGE_REL) -> str:
    """Replace the generated block of a hand-written page; exactly one marker pair must exist."""
    begins, ends = page.count(BEGIN_MARKER), page.count(END_MARKER)
    if begins != 1 or ends != 1:
        raise MatrixInputError(
            display,
            "generated-block markers",
            f"need exactly one {BEGIN_MARKER!r} and one {END_MARKER!r}; found {begins} and {ends}",
        )
    start, end = page.index(BEGIN_MARKER), page.index(END_MARKER)
    if end < start:
        raise MatrixInputError(
            display, "generated-block markers", "the END marker comes before the BEGIN marker"
        )
    return page[:start] + block + page[end + len(END_MARKER) :]


def render_all(state: MatrixState, page: str) -> dict[str, str]:
    """Repo-relative path -> full text of every generated output (``page``: the current hand page)."""
    doc = matrix_doc(state)
    return {
        PAGE_REL: splice_page(page, render_block(doc)),
        HTML_REL: render_html(doc),
        JSON_REL: render_json(doc),
    }
