"""scripts/matrix/collect_cpu_evidence.sh decides what to run from `matrix stale`: its control flow, with
a stand-in `uv` on PATH that answers `matrix stale` from a table and records every other command (the
real pieces, a lane, probes and soaks, take hours and have tests of their own)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = "scripts/matrix/collect_cpu_evidence.sh"

FAKE_UV = """#!/usr/bin/env bash
# uv run --frozen --extra mjwarp CMD...: answer `matrix stale --kind K --words` from $STALE_DIR/K, log the rest
shift 4
if [ "$1 $2" = "matrix stale" ]; then cat "$STALE_DIR/$4"; exit 0; fi
printf '%s\\n' "$*" >> "$CALLS"
# a soak whose arguments hold $SOAK_EXIT_MATCH exits $SOAK_EXIT (an undecided or broken soak)
if [ "$1 $2" = "soak run" ] && [ -n "${SOAK_EXIT_MATCH:-}" ] && [[ "$* " == *"$SOAK_EXIT_MATCH "* ]]; then
  exit "$SOAK_EXIT"
fi
"""


def _checkout(tmp_path: Path) -> Path:
    """A clean git repository holding only the script, where it runs as it does in a checkout."""
    repo = tmp_path / "repo"
    (repo / "scripts" / "matrix").mkdir(parents=True)
    shutil.copy2(REPO / SCRIPT, repo / SCRIPT)
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "s"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def _run(
    tmp_path: Path, repo: Path, stale: dict[str, str], *args: str, soak_exit: tuple[str, int] = ("", 0)
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir, stale_dir, calls = tmp_path / "bin", tmp_path / "stale", tmp_path / "calls.log"
    bin_dir.mkdir(exist_ok=True)
    stale_dir.mkdir(exist_ok=True)
    (bin_dir / "uv").write_text(FAKE_UV)
    (bin_dir / "uv").chmod(0o755)
    for kind in ("junit", "probe", "soak"):
        (stale_dir / kind).write_text(stale.get(kind, ""))
    calls.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STALE_DIR": str(stale_dir),
        "CALLS": str(calls),
        "SOAK_EXIT_MATCH": soak_exit[0],
        "SOAK_EXIT": str(soak_exit[1]),
    }
    done = subprocess.run(
        ["bash", SCRIPT, *args, str(tmp_path / "out")], cwd=repo, env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    return done, calls.read_text().splitlines() if calls.exists() else []


def _soaks(calls: list[str]) -> list[str]:
    """``algo/task`` of each soak run, with ``x2`` for a 2-rank job."""
    out = []
    for call in calls:
        words = shlex.split(call)
        if words[:2] == ["soak", "run"]:
            at = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}
            out.append(f"{at['--algo']}/{at['--task']}" + (" x2" if "--nproc-per-node" in at else ""))
    return out


def test_only_stale_runs_the_stale_cells_bound_tests_and_soaks_and_nothing_fresh(tmp_path: Path) -> None:
    repo = _checkout(tmp_path)
    stale = {
        "junit": "flashsac g1_walk_flat mujoco 1\nsac g1_walk_flat mujoco 2\n",
        "soak": "flashsac g1_walk_flat mujoco 1\nflashsac g1_motion_tracking mujoco 1\n",
    }
    done, calls = _run(tmp_path, repo, stale, "--only", "stale")
    assert done.returncode == 0, done.stdout + done.stderr
    lane = [shlex.split(c) for c in calls if c.startswith("pytest ")]
    assert len(lane) == 1
    only = [lane[0][i + 1] for i, w in enumerate(lane[0]) if w == "--matrix-only-cell"]
    assert only == ["flashsac/g1_walk_flat/mujoco", "sac/g1_walk_flat/mujoco/ranks=2"]
    assert not [c for c in calls if c.startswith("probe ")]
    assert _soaks(calls) == ["flashsac/g1_walk_flat", "flashsac/g1_motion_tracking"]
    ingested = [c.split()[2] for c in calls if c.startswith("matrix ingest ")]
    assert [Path(p).name.split("-")[:3] for p in ingested] == [
        ["junit", "cpu.xml"], ["soak", "flashsac", "g1_walk_flat"], ["soak", "flashsac", "g1_motion_tracking"],
    ]  # fmt: skip
    assert calls[-2:] == ["matrix prune", "matrix check"]


def test_only_stale_with_nothing_stale_collects_nothing(tmp_path: Path) -> None:
    done, calls = _run(tmp_path, _checkout(tmp_path), {}, "--only", "stale")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c for c in calls if not c.startswith("matrix ")] == [] and calls[-2:] == [
        "matrix prune",
        "matrix check",
    ]


def test_only_all_runs_the_whole_lane_both_probes_and_every_soak(tmp_path: Path) -> None:
    done, calls = _run(tmp_path, _checkout(tmp_path), {}, "--only", "all")
    assert done.returncode == 0, done.stdout + done.stderr
    lane = [c for c in calls if c.startswith("pytest ")]
    assert len(lane) == 1 and "--matrix-only-cell" not in lane[0]
    assert len([c for c in calls if c.startswith("probe ")]) == 2
    assert _soaks(calls) == [
        "sac/g1_walk_flat", "sac/g1_motion_tracking", "flashsac/g1_walk_flat", "flashsac/g1_motion_tracking",
        "sac/g1_walk_flat x2",
    ]  # fmt: skip


def test_an_inconclusive_soak_is_named_and_not_filed_and_the_other_soaks_still_run(tmp_path: Path) -> None:
    stale = {
        "soak": "sac g1_walk_flat mujoco 1\nsac g1_motion_tracking mujoco 1\nsac g1_walk_flat mujoco 2\n"
    }
    done, calls = _run(
        tmp_path, _checkout(tmp_path), stale, "--only", "stale", soak_exit=("--task g1_motion_tracking", 3)
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "soak sac/g1_motion_tracking was inconclusive (exit 3); not filed" in done.stderr
    assert "not filed (inconclusive): soak sac/g1_motion_tracking" in done.stderr
    assert _soaks(calls) == ["sac/g1_walk_flat", "sac/g1_motion_tracking", "sac/g1_walk_flat x2"]
    ingested = [Path(c.split()[2]).name for c in calls if c.startswith("matrix ingest ")]
    assert [n.split("-")[1:3] for n in ingested] == [["sac", "g1_walk_flat"], ["sac", "g1_walk_flat"]]
    assert "2ranks" in ingested[1] and calls[-2:] == ["matrix prune", "matrix check"]


@pytest.mark.parametrize("code", [1, 0])
def test_a_failed_soak_is_filed_like_a_passed_one(tmp_path: Path, code: int) -> None:
    stale = {"soak": "flashsac g1_walk_flat mujoco 1\n"}
    done, calls = _run(
        tmp_path, _checkout(tmp_path), stale, "--only", "stale", soak_exit=("--task g1_walk_flat", code)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert [
        c.split()[2].rsplit("/", 1)[-1].split("-")[1] for c in calls if c.startswith("matrix ingest ")
    ] == ["flashsac"]


def test_a_soak_that_breaks_stops_the_collection_with_its_exit(tmp_path: Path) -> None:
    stale = {"soak": "sac g1_walk_flat mujoco 1\nsac g1_motion_tracking mujoco 1\n"}
    done, calls = _run(
        tmp_path, _checkout(tmp_path), stale, "--only", "stale", soak_exit=("--task g1_walk_flat", 2)
    )
    assert done.returncode == 2 and "soak sac/g1_walk_flat exited 2; stopping" in done.stderr
    assert _soaks(calls) == ["sac/g1_walk_flat"]
    assert [c for c in calls if c.startswith("matrix ")] == []  # nothing filed, pruned or checked after it


@pytest.mark.parametrize(
    ("args", "dirty", "message"),
    [
        (("--only", "some"), False, "--only must be all or stale, got 'some'"),
        (("--fast",), False, "unknown option --fast"),
        (("--only", "stale"), True, "the tree is dirty"),
    ],
)
def test_bad_input_and_a_dirty_tree_are_refused_before_anything_runs(
    tmp_path: Path, args: tuple[str, ...], dirty: bool, message: str
) -> None:
    repo = _checkout(tmp_path)
    if dirty:
        (repo / "notes.txt").write_text("uncommitted\n")
    done, calls = _run(tmp_path, repo, {"soak": "sac g1_walk_flat mujoco 1\n"}, *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert calls == []
