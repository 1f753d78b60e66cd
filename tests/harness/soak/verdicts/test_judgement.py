"""The one judgement: every filed soak judged again gives the rows, status and class it recorded, and the
matrix reaches the soak's verdicts through that surface alone."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from soakbench.harness.soak.verdicts.judgement import (
    Gates,
    RecordedFacts,
    facts_from_artifact,
    gates_from_artifact,
    judge,
)
from soakbench.matrix.grading.rederive import (
    REQUIRED,
    disagreements,
    missing_fields,
    read_samples,
    samples_file,
)

REPO = Path(__file__).resolve().parents[4]
FILED = sorted((REPO / "matrix" / "evidence" / "soak").glob("*.json"))


def _filed(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    artifact = json.loads(path.read_text(encoding="utf-8"))
    samples = read_samples(samples_file(path, artifact), path.name, str(artifact["samples_sha256"]))
    return artifact, samples


def _judgeable() -> list[Path]:
    return [p for p in FILED if not missing_fields(json.loads(p.read_text(encoding="utf-8")))]


def test_there_is_filed_evidence_to_judge() -> None:
    assert len(_judgeable()) >= 5, (
        f"expected the filed linux-cpu soaks under matrix/evidence/soak ({REQUIRED})"
    )


@pytest.mark.parametrize("path", _judgeable(), ids=lambda p: p.stem)
def test_a_filed_soak_judged_again_gives_what_it_recorded(path: Path) -> None:
    artifact, samples = _filed(path)
    judgement = judge(samples, facts=facts_from_artifact(artifact), gates=gates_from_artifact(artifact))
    recorded = {row["name"]: row["result"] for row in artifact["criteria"]}
    rederived = {row.name: row.result for row in judgement.rows if row.name in recorded}
    assert rederived == recorded
    assert (judgement.status, judgement.failure_classification) == (
        artifact["status"],
        artifact["failure_classification"],
    )
    assert judgement.leak.verdicts == artifact["resource_summary"]["leak_verdicts"]
    assert disagreements(artifact, samples) == []


def _steady_samples(count: int) -> list[Mapping[str, Any]]:
    """A one-process tree sampled each second, its fd count steady."""
    out = []
    for i in range(count):
        fds = 10
        proc = {"pid": 100, "start_ticks": 1, "role": "trainer", "rss_bytes": 1 << 26, "fd_count": fds}
        out.append({"t": float(i), "processes": [proc], "totals": {"process_count": 1, "fd_count": fds}})
    return out


def test_the_gates_decide_apart_from_the_facts() -> None:
    facts = RecordedFacts(
        mode="monitor",
        root_pid=100,
        trainer_returncode=0,
        monitor_failure=None,
        duration_s=5.0,
        startup_end_t=0.0,
    )
    short = judge(_steady_samples(6), facts=facts, gates=Gates(min_duration_s=60.0, min_trend_samples=3))
    assert short.failure_classification == "too_short"
    long_enough = judge(_steady_samples(6), facts=facts, gates=Gates(min_duration_s=1.0, min_trend_samples=3))
    assert next(r for r in long_enough.rows if r.name == "min_duration").result == "pass"


def test_a_tampered_row_is_named() -> None:
    path = _judgeable()[0]
    artifact, samples = _filed(path)
    tampered = json.loads(json.dumps(artifact))
    row = next(r for r in tampered["criteria"] if r["name"] == "min_duration")
    row["result"] = "fail"
    found = disagreements(tampered, samples)
    assert any(line.startswith("row min_duration: recorded 'fail', re-derived 'pass'") for line in found), (
        found
    )


def _matrix_imports_of(prefix: str) -> list[str]:
    import ast

    out = []
    for path in sorted((REPO / "matrix").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            module = (
                (node.module or "").removeprefix("soakbench.") if isinstance(node, ast.ImportFrom) else ""
            )
            if module.startswith(prefix):
                out.append(f"{path.relative_to(REPO)}: {module}")
    return out


def test_the_matrix_reaches_the_soak_verdicts_through_the_judgement_alone() -> None:
    reached = _matrix_imports_of("harness.soak.verdicts")
    assert reached, "the matrix re-derives soak verdicts, so it must import the judgement"
    assert [line for line in reached if not line.endswith("harness.soak.verdicts.judgement")] == []
