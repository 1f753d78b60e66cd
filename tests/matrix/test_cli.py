"""End-to-end `matrix ingest | generate | check | explain` in temporary git repositories."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.matrix._fixtures import (
    LINUX,
    PAGE,
    commit_all,
    git,
    junit_xml,
    make_repo,
    probe_artifact,
    soak_artifact,
    write_json,
)
from tests.matrix.conftest import Invoke, cell

SAC_WALK = "sac/g1_walk_flat/mujoco"
OUTPUTS = ("docs/support-matrix.md", "reports/support-matrix.html", "reports/support-matrix.json")


def snapshot(repo: Path) -> dict[str, bytes]:
    """Every file outside .git (to prove that nothing was written)."""
    return {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


def ingest_ok(run_matrix: Invoke, path: Path, *flags: str) -> str:
    result = run_matrix("ingest", str(path), *flags)
    assert result.exit_code == 0, result.output
    return result.output


def full_evidence(repo: Path, run_matrix: Invoke, tmp: Path, **soak_kw: Any) -> str:
    """Ingest a passing JUnit, probe and soak for sac/g1_walk_flat/mujoco@linux-cpu; return HEAD."""
    head = git(repo, "rev-parse", "HEAD")
    xml = tmp / "junit.xml"
    xml.write_text(
        junit_xml(head, [("test_sac_walk_mujoco", SAC_WALK, "passed"), ("test_b", None, "passed")])
    )
    ingest_ok(run_matrix, xml)
    ingest_ok(run_matrix, write_json(tmp / "probe.json", probe_artifact(head)), "--platform", "linux-cpu")
    ingest_ok(
        run_matrix, write_json(tmp / "soak.json", soak_artifact(head, **soak_kw)), "--platform", "linux-cpu"
    )
    return head


def test_grades_climb_with_evidence_and_check_passes(repo: Path, run_matrix: Invoke, tmp_path: Path) -> None:
    assert run_matrix("generate").exit_code == 0
    assert cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")["grade"] == "Configured"
    assert cell(repo, "sac", "g1_walk_flat", "mjwarp", "linux-cpu")["grade"] == "Unsupported"
    assert cell(repo, "sac", "g1_motion_tracking", "mjwarp", "macos-mps")["grade"] == "Registered"
    full_evidence(repo, run_matrix, tmp_path)
    assert run_matrix("generate").exit_code == 0
    got = cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")
    assert got["grade"] == "Benchmarked"
    assert [b["grade"] for b in got["blockers"]] == ["Recommended"]
    assert {e["status"] for e in got["evidence"]} == {"fresh"} and all(e["counts"] for e in got["evidence"])
    # Committing evidence and outputs does not make the evidence stale.
    commit_all(repo, "file evidence")
    assert run_matrix("check").exit_code == 0
    # The same soak on linux-cuda cell is another platform: not counted there.
    cuda = cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cuda")
    assert cuda["grade"] == "Configured"
    assert any(e["verdict"].startswith("wrong platform") for e in cuda["evidence"])


def test_recommended_needs_canonical_soak(repo: Path, run_matrix: Invoke, tmp_path: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    xml = tmp_path / "junit.xml"
    xml.write_text(junit_xml(head, [("test_flashsac_walk_mujoco", "flashsac/g1_walk_flat/mujoco", "passed")]))
    ingest_ok(run_matrix, xml)
    short = soak_artifact(head, algo="flashsac", duration_s=120.0)
    ingest_ok(run_matrix, write_json(tmp_path / "s1.json", short), "--platform", "linux-cpu")
    assert run_matrix("generate").exit_code == 0
    got = cell(repo, "flashsac", "g1_walk_flat", "mujoco", "linux-cpu")
    assert got["grade"] == "Benchmarked"  # probe not required for this cell
    assert "canonical budget" in got["blockers"][0]["reasons"][0]
    canon = soak_artifact(head, algo="flashsac", duration_s=3700.0, num_envs=2048, iterations=1000)
    ingest_ok(run_matrix, write_json(tmp_path / "s2.json", canon), "--platform", "linux-cpu")
    assert run_matrix("generate").exit_code == 0
    assert cell(repo, "flashsac", "g1_walk_flat", "mujoco", "linux-cpu")["grade"] == "Recommended"


def test_fingerprint_change_makes_evidence_historical(repo: Path, run_matrix: Invoke, tmp_path: Path) -> None:
    full_evidence(repo, run_matrix, tmp_path)
    commit_all(repo, "evidence")
    (repo / "docs" / "extra.md").write_text("docs are not runtime\n")
    commit_all(repo, "docs only")
    assert run_matrix("generate").exit_code == 0
    assert cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")["grade"] == "Benchmarked"
    (repo / "runtime" / "core.py").write_text("VALUE = 2\n")
    commit_all(repo, "runtime change")
    assert run_matrix("check").exit_code == 1  # the committed matrix is now out of date
    assert run_matrix("generate").exit_code == 0
    got = cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")
    assert got["grade"] == "Configured"
    assert {e["status"] for e in got["evidence"]} == {"historical"}
    explained = run_matrix("explain", "sac", "g1_walk_flat", "mujoco", "linux-cpu").output
    assert "historical: runtime fingerprint" in explained and "not Tested:" in explained


def test_hand_filed_bad_evidence_is_shown_and_not_counted(
    repo: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    head = full_evidence(repo, run_matrix, tmp_path)
    index = json.loads((repo / "matrix/evidence/index.json").read_text())
    soak_entry = next(e for e in index["entries"] if e["kind"] == "soak")
    # A failing soak filed by hand (ingest refuses it) is shown as failing.
    failing = json.dumps(soak_artifact(head, passed=False)).encode()
    (repo / soak_entry["file"]).write_bytes(failing)
    import hashlib

    soak_entry["sha256"] = hashlib.sha256(failing).hexdigest()
    (repo / "matrix/evidence/index.json").write_text(json.dumps(index))
    assert run_matrix("generate").exit_code == 0
    got = cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")
    assert got["grade"] == "Tested"
    assert any(e["verdict"].startswith("failing") for e in got["evidence"])
    # A schema-invalid one is invalid; an edit after ingest is caught by the recorded sha256.
    broken = soak_artifact(head)
    del broken["criteria"]
    (repo / soak_entry["file"]).write_text(json.dumps(broken))
    assert run_matrix("generate").exit_code == 0
    got = cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")
    verdict = next(e for e in got["evidence"] if e["kind"] == "soak")
    assert (
        verdict["status"] == "invalid" and "sha256" in verdict["verdict"] and "criteria" in verdict["verdict"]
    )


@pytest.mark.parametrize(
    ("name", "make", "flags", "message"),
    [
        ("failing soak", lambda c: soak_artifact(c, passed=False), ["--platform", "linux-cpu"], "failing evidence"),
        ("dirty soak", lambda c: soak_artifact(c, dirty=True), ["--platform", "linux-cpu"], "uncommitted"),
        ("no GPU as cuda", lambda c: soak_artifact(c), ["--platform", "linux-cuda"], "no GPU"),
        ("cpu mjwarp as cuda", lambda c: soak_artifact(c, gpu=True, sim="mjwarp",
         overrides=["training.mjwarp_device=cpu"]), ["--platform", "linux-cuda"], "CPU-diagnostic"),
        ("mac soak as linux", lambda c: soak_artifact(c, system="macOS-14.5-arm64"), ["--platform", "linux-cpu"],
         "is not Linux"),
        ("schema-invalid soak", lambda c: {**soak_artifact(c), "status": "great"}, ["--platform", "linux-cpu"],
         "status"),
        ("future soak", lambda c: {**soak_artifact(c), "artifact_schema_version": "0.9.0"},
         ["--platform", "linux-cpu"], "future schema version"),
        ("unknown commit", lambda c: soak_artifact("f" * 40), ["--platform", "linux-cpu"], "not in HEAD's history"),
        ("no platform", lambda c: soak_artifact(c), [], "--platform"),
        ("failing probe", lambda c: probe_artifact(c, within=False), ["--platform", "linux-cpu"], "exceed"),
        ("unaccepted cuda probe", lambda c: probe_artifact(c, gpu=True), ["--platform", "linux-cuda"],
         "--acceptance"),
    ],
)  # fmt: skip
def test_bad_artifacts_exit_2_and_write_nothing(
    repo: Path,
    run_matrix: Invoke,
    tmp_path: Path,
    name: str,
    make: Callable[[str], dict[str, Any]],
    flags: list[str],
    message: str,
) -> None:
    head = git(repo, "rev-parse", "HEAD")
    before = snapshot(repo)
    result = run_matrix("ingest", str(write_json(tmp_path / "a.json", make(head))), *flags)
    assert result.exit_code == 2, (name, result.output)
    assert message in result.output, (name, result.output)
    assert snapshot(repo) == before


@pytest.mark.parametrize(
    ("cases", "kw", "flags", "message"),
    [
        ([("t", SAC_WALK, "failed")], {}, [], "failing evidence"),
        ([("t", SAC_WALK, "passed")], {"platform": None}, [], "--platform"),
        ([("t", SAC_WALK, "passed")], {}, ["--platform", "linux-cuda"], "records 'linux-cpu'"),
        ([("t", SAC_WALK, "passed")], {"platform": "linux-cuda", "lane": "cuda"}, [], "no GPU"),
        ([("t", "sac/only-two", "passed")], {}, [], "is not of the form ALGO/TASK/BACKEND"),
    ],
)
def test_bad_junit_exits_2_and_writes_nothing(
    repo: Path,
    run_matrix: Invoke,
    tmp_path: Path,
    cases: list[tuple[str, str | None, str]],
    kw: dict[str, Any],
    flags: list[str],
    message: str,
) -> None:
    xml = tmp_path / "j.xml"
    xml.write_text(junit_xml(git(repo, "rev-parse", "HEAD"), cases, **kw))
    before = snapshot(repo)
    result = run_matrix("ingest", str(xml), *flags)
    assert result.exit_code == 2 and message in result.output, result.output
    assert snapshot(repo) == before
    (tmp_path / "bad.xml").write_text("<testsuites><testsuite>")
    assert run_matrix("ingest", str(tmp_path / "bad.xml")).exit_code == 2


def test_reingest_is_idempotent(repo: Path, run_matrix: Invoke, tmp_path: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    path = write_json(tmp_path / "soak.json", soak_artifact(head))
    ingest_ok(run_matrix, path, "--platform", "linux-cpu")
    before = snapshot(repo)
    assert "already filed" in ingest_ok(run_matrix, path, "--platform", "linux-cpu")
    assert snapshot(repo) == before


BAD_INVENTORIES = [
    ("schema_version: 1\ncells: [\n", "malformed YAML"),
    ("schema_version: 1\ncanonical_soak: {min_duration_s: 1, num_envs: 1, iterations: 1}\ncells:\n"
     "  - {algo: sac, task: nope, backend: mujoco, platform: linux-cpu, unsupported: {reason: 'long enough reason'}}\n",
     "cells[0].task"),
    ("schema_version: 1\ncanonical_soak: {min_duration_s: 1, num_envs: 1, iterations: 1}\ncells:\n"
     "  - {algo: sac, task: g1_walk_flat, backend: physx, platform: linux-cpu, unsupported: {reason: 'long enough'}}\n",
     "cells[0].backend"),
    ("schema_version: 1\ncanonical_soak: {min_duration_s: 1, num_envs: 1, iterations: 1}\ncells:\n"
     "  - {algo: sac, task: g1_walk_flat, backend: mujoco, platform: windows, unsupported: {reason: 'long enough'}}\n",
     "cells[0].platform"),
    ("schema_version: 1\ncanonical_soak: {min_duration_s: 1, num_envs: 1, iterations: 1}\ncells:\n"
     "  - {algo: sac, task: g1_walk_flat, backend: [mujoco, mjwarp], platform: linux-cpu, unsupported: {reason: 'long enough'}}\n"
     "  - {algo: sac, task: g1_walk_flat, backend: mujoco, platform: linux-cpu, unsupported: {reason: 'long enough'}}\n",
     "duplicate cell sac/g1_walk_flat/mujoco@linux-cpu"),
    ("schema_version: 3\ncanonical_soak: {min_duration_s: 1, num_envs: 1, iterations: 1}\ncells: []\n",
     "future schema version 3"),
    ("schema_version: 1\ncanonical_soak: {min_duration_s: 1, num_envs: 1, iterations: 1}\ncells:\n"
     "  - {algo: sac, task: g1_walk_flat, backend: mujoco, platform: linux-cpu, probe_required: true}\n",
     "cells[0]"),
]  # fmt: skip


@pytest.mark.parametrize(("inventory", "message"), BAD_INVENTORIES)
def test_bad_inventory_exits_2_naming_file_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inventory: str, message: str
) -> None:
    from typer.testing import CliRunner

    from soakbench.matrix import cli as matrix_cli
    from tests.matrix._fixtures import REGISTRY, configured_ok

    monkeypatch.setattr(matrix_cli, "runtime_inputs", lambda: (REGISTRY, configured_ok))
    repo = make_repo(tmp_path, inventory)
    before = snapshot(repo)
    for command in ("generate", "check"):
        result = CliRunner().invoke(matrix_cli.app, [command, "--repo", str(repo)])
        assert result.exit_code == 2, result.output
        assert "matrix/inventory.yaml" in result.output and message in result.output, result.output
    assert snapshot(repo) == before


def test_filed_evidence_with_unknown_commit_exits_2(repo: Path, run_matrix: Invoke, tmp_path: Path) -> None:
    full_evidence(repo, run_matrix, tmp_path)
    index = json.loads((repo / "matrix/evidence/index.json").read_text())
    entry = next(e for e in index["entries"] if e["kind"] == "probe")
    doc = json.loads((repo / entry["file"]).read_text())
    doc["context"]["source"]["commit"] = "e" * 40
    raw = json.dumps(doc).encode()
    (repo / entry["file"]).write_bytes(raw)
    result = run_matrix("generate")
    assert (
        result.exit_code == 2 and "context.source.commit" in result.output and entry["file"] in result.output
    )


def test_future_index_version_exits_2(repo: Path, run_matrix: Invoke) -> None:
    write_json(repo / "matrix/evidence/index.json", {"schema_version": 2, "entries": []})
    result = run_matrix("generate")
    assert result.exit_code == 2 and "future schema version 2" in result.output


def test_output_is_deterministic_across_clones(repo: Path, run_matrix: Invoke, tmp_path: Path) -> None:
    full_evidence(repo, run_matrix, tmp_path)
    assert run_matrix("generate").exit_code == 0
    commit_all(repo, "evidence + matrix")
    first = {rel: (repo / rel).read_bytes() for rel in OUTPUTS}
    assert run_matrix("generate").exit_code == 0
    assert {rel: (repo / rel).read_bytes() for rel in OUTPUTS} == first
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    for rel in OUTPUTS[1:]:
        (clone / rel).unlink()
    (clone / OUTPUTS[0]).write_text(PAGE)  # generated block emptied
    from typer.testing import CliRunner

    from soakbench.matrix import cli as matrix_cli

    assert CliRunner().invoke(matrix_cli.app, ["generate", "--repo", str(clone)]).exit_code == 0
    assert {rel: (clone / rel).read_bytes() for rel in OUTPUTS} == first
    assert b"2025-06-15T10:00:00" in first[OUTPUTS[2]]  # the only time is the one the evidence carries


def test_check_catches_a_hand_edit(repo: Path, run_matrix: Invoke) -> None:
    assert run_matrix("generate").exit_code == 0
    assert run_matrix("check").exit_code == 0
    page = repo / "docs" / "support-matrix.md"
    original = page.read_text()
    page.write_text(original.replace("**Configured**", "**Recommended**", 1))
    result = run_matrix("check")
    assert result.exit_code == 1
    assert "docs/support-matrix.md: differs" in result.output and "Recommended" in result.output
    # Hand-written prose outside the markers is free to change.
    page.write_text(original.replace("Hand-written intro.", "New intro."))
    assert run_matrix("check").exit_code == 0
    (repo / "reports" / "support-matrix.json").unlink()
    assert "missing" in run_matrix("check").output
    page.write_text("no markers\n")
    assert run_matrix("check").exit_code == 2


def test_explain(repo: Path, run_matrix: Invoke, tmp_path: Path) -> None:
    full_evidence(repo, run_matrix, tmp_path)
    out = run_matrix("explain", "sac", "g1_walk_flat", "mujoco", "linux-cpu").output
    assert out.startswith("sac/g1_walk_flat/mujoco@linux-cpu: Benchmarked")
    assert out.count("COUNTS") == 3 and "not Recommended:" in out
    unsupported = run_matrix("explain", "sac", "g1_walk_flat", "mjwarp", "linux-cpu").output
    assert "Unsupported" in unsupported and "declared unsupported" in unsupported
    missing = run_matrix("explain", "sac", "g1_walk_flat", "mujoco", "macos-mps")
    assert missing.exit_code == 2 and "no cell" in missing.output


def test_wrong_host_system_for_junit(repo: Path, run_matrix: Invoke, tmp_path: Path) -> None:
    xml = tmp_path / "j.xml"
    xml.write_text(junit_xml(git(repo, "rev-parse", "HEAD"), [("t", SAC_WALK, "passed")], system="Darwin"))
    result = run_matrix("ingest", str(xml))
    assert result.exit_code == 2 and "is not Linux" in result.output
    assert LINUX.startswith("Linux")
    shutil.rmtree(tmp_path / "repo" / "matrix" / "evidence", ignore_errors=True)
