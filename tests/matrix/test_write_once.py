"""Filed evidence is written once, and `generate` runs ingest's guards again: each way a hand that wanted a
better grade could rewrite filed evidence (digests recomputed, so nothing but history and the guards can
tell) makes the evidence invalid, naming the commit or the file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from soakbench.matrix.freshness.filed_history import FiledHistory, parse_log
from soakbench.matrix.grading.write_once import rewrite_problems
from tests.matrix._fixtures import commit_all, git
from tests.matrix.conftest import Invoke, cell
from tests.matrix.test_input_freshness import file_everything, project  # noqa: F401 (a fixture)

INDEX = "matrix/evidence/index.json"


def _entry(repo: Path, kind: str, algo: str | None = None) -> dict[str, Any]:
    entries = json.loads((repo / INDEX).read_text())["entries"]
    return next(e for e in entries if e["kind"] == kind and (algo is None or f"-{algo}_" in e["id"]))


def _rewrite(repo: Path, rel: str, edit: Any) -> None:
    """Edit a filed JSON document and recompute the index digest that points at it."""
    doc = json.loads((repo / rel).read_text())
    edit(doc)
    (repo / rel).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    index = json.loads((repo / INDEX).read_text())
    for entry in index["entries"]:
        if entry["file"] == rel:
            entry["sha256"] = hashlib.sha256((repo / rel).read_bytes()).hexdigest()
    (repo / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def _verdict(repo: Path, algo: str, kind: str) -> dict[str, Any]:
    found: dict[str, Any] = next(
        e for e in cell(repo, algo, "g1_walk_flat", "mujoco", "linux-cpu")["evidence"] if e["kind"] == kind
    )
    return found


def test_a_manifest_rewritten_after_filing_is_invalid_and_its_cell_falls(
    project: Path,  # noqa: F811
    run_matrix: Invoke,
    tmp_path: Path,
) -> None:
    file_everything(project, run_matrix, tmp_path)
    filed_at = git(project, "rev-parse", "HEAD")
    soak = _entry(project, "soak", "sac")
    _rewrite(project, soak["file"], lambda doc: doc["inputs"]["files"].pop("runtime/learners/sac.py"))
    edited_at = commit_all(project, "the sac soak no longer depends on sac.py")
    (project / "runtime" / "learners" / "sac.py").write_text("import runtime.core\n\nGAMMA = 0.5\n")
    commit_all(project, "sac changes")
    assert run_matrix("generate").exit_code == 0
    verdict = _verdict(project, "sac", "soak")
    assert verdict["status"] == "invalid" and verdict["counts"] is False
    assert f"was filed at {filed_at[:12]} and changed at {edited_at[:12]}" in verdict["verdict"]
    # the manifest guard ingest runs, run again: the file the edit dropped is named
    assert "omits 1 module(s) its cell's code loads: runtime/learners/sac.py" in verdict["verdict"]
    assert cell(project, "sac", "g1_walk_flat", "mujoco", "linux-cpu")["grade"] == "Configured"


def test_lowered_samples_with_their_digest_updated_are_a_rewrite(
    project: Path,  # noqa: F811
    run_matrix: Invoke,
    tmp_path: Path,
) -> None:
    file_everything(project, run_matrix, tmp_path)
    soak = _entry(project, "soak", "flashsac")
    doc = json.loads((project / soak["file"]).read_text())
    samples = project / Path(soak["file"]).parent / Path(doc["samples_path"]).name
    lines = samples.read_text().splitlines()
    last = json.loads(lines[-1])
    last["processes"][0]["rss_bytes"] //= 2  # the trainer's last RSS reading, lowered
    samples.write_text("\n".join([*lines[:-1], json.dumps(last, separators=(",", ":"))]) + "\n")
    digest = hashlib.sha256(samples.read_bytes()).hexdigest()
    _rewrite(project, soak["file"], lambda d: d.update(samples_sha256=digest))
    edited_at = commit_all(project, "quieter samples")
    assert run_matrix("generate").exit_code == 0
    verdict = _verdict(project, "flashsac", "soak")
    assert verdict["status"] == "invalid"
    assert f"{samples.relative_to(project).as_posix()} was filed at" in verdict["verdict"]
    assert f"changed at {edited_at[:12]}" in verdict["verdict"]


def test_an_edited_junit_summary_is_a_rewrite_and_an_uncommitted_edit_is_one_too(
    project: Path,  # noqa: F811
    run_matrix: Invoke,
    tmp_path: Path,
) -> None:
    file_everything(project, run_matrix, tmp_path)
    junit = _entry(project, "junit")
    _rewrite(project, junit["file"], lambda doc: doc.update(timestamp="2030-01-01T00:00:00"))
    assert run_matrix("generate").exit_code == 0  # not committed yet: the work tree differs from HEAD
    assert "(an uncommitted change)" in _verdict(project, "sac", "junit")["verdict"]
    edited_at = commit_all(project, "a newer timestamp")
    assert run_matrix("generate").exit_code == 0
    verdict = _verdict(project, "sac", "junit")
    assert verdict["status"] == "invalid" and f"changed at {edited_at[:12]}" in verdict["verdict"]
    assert cell(project, "sac", "g1_walk_flat", "mujoco", "linux-cpu")["grade"] == "Configured"


def test_evidence_filed_and_never_touched_stays_valid(
    project: Path,  # noqa: F811
    run_matrix: Invoke,
    tmp_path: Path,
) -> None:
    file_everything(project, run_matrix, tmp_path)
    (project / "docs" / "notes.md").write_text("a later commit that touches no evidence\n")
    commit_all(project, "notes")
    assert run_matrix("generate").exit_code == 0
    assert _verdict(project, "sac", "soak")["status"] == "fresh"


LOG = (
    "\x00commit aaaa\n\nA\tmatrix/evidence/soak/s.json\nA\tmatrix/evidence/index.json\n"
    "\x00commit bbbb\n\nM\tmatrix/evidence/soak/s.json\nD\tmatrix/evidence/probe/p.json\n"
    "\x00commit cccc\n\nA\tmatrix/evidence/probe/p.json\n"
)


def test_the_log_is_read_as_the_writes_of_each_path() -> None:
    assert parse_log(LOG) == {
        "matrix/evidence/soak/s.json": ("aaaa", "bbbb"),
        "matrix/evidence/index.json": ("aaaa",),
        "matrix/evidence/probe/p.json": ("cccc",),
    }


def test_a_history_cut_by_a_shallow_clone_is_unverifiable() -> None:
    history = FiledHistory({"e.json": ("c" * 40,)}, boundary=frozenset({"c" * 40}))
    (problem,) = rewrite_problems({"e.json": "b1"}, history, {"e.json": "b1"})
    assert problem.startswith("unverifiable: ") and "git fetch --unshallow" in problem


def test_a_piece_filed_but_not_yet_committed_has_nothing_to_break() -> None:
    assert rewrite_problems({"new.json": "b1"}, FiledHistory({}, frozenset()), {}) == []
