"""`matrix prune` keeps fresh evidence, removes surplus historical evidence, and leaves `matrix check` green;
`matrix check` warns (and still passes) when the store holds too many historical files."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from soakbench.matrix import prune
from soakbench.matrix.model import CellKey, EvidenceFacts
from soakbench.matrix.prune import plan_prune
from tests.matrix._fixtures import SOAK_SAMPLES_NAME, commit_all
from tests.matrix.conftest import Invoke, cell
from tests.matrix.test_cli import full_evidence, snapshot

INDEX = "matrix/evidence/index.json"


def entries(repo: Path) -> list[dict[str, str]]:
    found: list[dict[str, str]] = json.loads((repo / INDEX).read_text())["entries"]
    return found


def three_generations(repo: Path, run_matrix: Invoke, tmp: Path) -> list[str]:
    """Full linux-cpu evidence at three runtime versions (two historical, one fresh); committed."""
    commits = []
    for version in (1, 2, 3):
        if version > 1:
            (repo / "runtime" / "core.py").write_text(f"VALUE = {version}\n")
            commit_all(repo, f"runtime v{version}")
        folder = tmp / f"v{version}"
        folder.mkdir()
        commits.append(full_evidence(repo, run_matrix, folder))
        assert run_matrix("generate").exit_code == 0
        commit_all(repo, f"evidence v{version}")
    return commits


def ids_at(repo: Path, commit: str) -> set[str]:
    return {e["id"] for e in entries(repo) if commit[:12] in e["id"]}


def test_prune_keeps_fresh_and_the_newest_historical_and_check_stays_green(
    repo: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    old, middle, new = three_generations(repo, run_matrix, tmp_path)
    oldest = {e["file"] for e in entries(repo) if old[:12] in e["id"]}
    assert len(oldest) == 3 and len(entries(repo)) == 9
    report = Path(next(f for f in oldest if "/soak/" in f)).with_suffix(".html")
    (repo / report).write_text("<html>soak report</html>")  # a filed soak report goes with its artifact
    result = run_matrix("prune")
    assert result.exit_code == 0, result.output
    assert "pruned 3 historical evidence files; kept 3 historical and 3 other" in result.output
    assert not any((repo / f).exists() for f in oldest) and not (repo / report).exists()
    # the three generations filed identical samples once; kept evidence still names them
    assert (repo / "matrix" / "evidence" / "soak" / SOAK_SAMPLES_NAME).is_file()
    assert ids_at(repo, old) == set() and len(ids_at(repo, middle)) == len(ids_at(repo, new)) == 3
    assert run_matrix("check").exit_code == 0  # the outputs were regenerated with the index
    assert cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")["grade"] == "Benchmarked"
    assert "nothing to prune" in run_matrix("prune").output
    # --keep-historical 0 removes all history; fresh evidence is never removed.
    assert run_matrix("prune", "--keep-historical", "0").exit_code == 0
    assert {e["id"] for e in entries(repo)} == ids_at(repo, new)
    assert all((repo / e["file"]).is_file() for e in entries(repo))
    check = run_matrix("check")
    assert check.exit_code == 0 and "warning" not in check.output
    assert cell(repo, "sac", "g1_walk_flat", "mujoco", "linux-cpu")["grade"] == "Benchmarked"


def test_check_warns_on_a_large_store_and_prune_clears_the_warning(
    repo: Path, run_matrix: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    three_generations(repo, run_matrix, tmp_path)
    monkeypatch.setattr(prune, "HISTORICAL_WARN_LIMIT", 4)
    check = run_matrix("check")
    assert check.exit_code == 0  # a warning, not a failure
    assert "warning: matrix/evidence/ holds 6 historical evidence files (more than 4)" in check.output
    assert "uv run matrix prune" in check.output
    assert run_matrix("prune").exit_code == 0
    assert "warning" not in run_matrix("check").output


def test_a_negative_keep_exits_2_and_writes_nothing(repo: Path, run_matrix: Invoke, tmp_path: Path) -> None:
    three_generations(repo, run_matrix, tmp_path)
    before = snapshot(repo)
    result = run_matrix("prune", "--keep-historical", "-1")
    assert result.exit_code == 2 and "--keep-historical" in result.output
    assert snapshot(repo) == before


def _historical(ev_id: str, kind: str, covers: tuple[tuple[str | None, str, str], ...]) -> EvidenceFacts:
    return EvidenceFacts(
        id=ev_id, kind=kind, file=f"matrix/evidence/{kind}/{ev_id}.json", platform="linux-cpu", lane=None,
        commit="a" * 40, dirty=False, passed=True, status_detail="passed", fresh=False, covers=covers,
    )  # fmt: skip


def test_a_piece_is_kept_while_any_of_its_cells_needs_it() -> None:
    walk, track = (
        CellKey("sac", "g1_walk_flat", "mujoco", "linux-cpu"),
        CellKey("sac", "g1_motion_tracking", "mujoco", "linux-cpu"),
    )
    both = _historical(
        "probe-both", "probe", ((None, "g1_walk_flat", "mujoco"), (None, "g1_motion_tracking", "mujoco"))
    )
    walk_only = _historical("probe-walk", "probe", ((None, "g1_walk_flat", "mujoco"),))
    fresh = replace(_historical("probe-fresh", "probe", ()), fresh=True)
    # probe-walk is newer for the walk cell, but probe-both is the newest motion-tracking probe.
    plan = plan_prune([both, walk_only, fresh], [walk, track], 1, {"probe-walk": 1, "probe-both": 2})
    assert {ev.id for ev in plan.keep} == {"probe-both", "probe-walk", "probe-fresh"} and plan.remove == ()
    plan = plan_prune([both, walk_only, fresh], [walk, track], 0, {"probe-walk": 1, "probe-both": 2})
    assert {ev.id for ev in plan.keep} == {"probe-fresh"}
    with pytest.raises(ValueError, match="keep must be >= 0"):
        plan_prune([], [], -1, {})


def test_a_pruned_soak_takes_its_samples_unless_kept_evidence_shares_them(tmp_path: Path) -> None:
    soak = tmp_path / "matrix" / "evidence" / "soak"
    soak.mkdir(parents=True)
    (soak / "ev.json").write_text(json.dumps({"samples_path": "/runs/x/only-mine.samples.jsonl"}))
    (soak / "only-mine.samples.jsonl").write_text("{}\n")
    rel = "matrix/evidence/soak/ev.json"
    mine = "matrix/evidence/soak/only-mine.samples.jsonl"
    assert prune._filed_with(tmp_path, "soak", rel, set()) == [
        rel,
        "matrix/evidence/soak/ev.html",
        mine,
    ]
    assert prune._filed_with(tmp_path, "soak", rel, {mine}) == [rel, "matrix/evidence/soak/ev.html"]
    assert prune._filed_with(tmp_path, "probe", "matrix/evidence/probe/p.json", set()) == [
        "matrix/evidence/probe/p.json"
    ]
