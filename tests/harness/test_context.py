"""harness.context: git facts and worktree digest on a scratch repo, GPU block from a fake NVML, no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from soakbench.harness.context import collect_context, source_context, worktree_digest
from tests.harness import fake_nvml as fake


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.email", "t@example.com")
    _git(root, "config", "user.name", "t")
    (root / ".gitignore").write_text("ignored/\n")
    (root / "a.txt").write_text("alpha\n")
    _git(root, "add", ".gitignore", "a.txt")
    _git(root, "commit", "-q", "-m", "init")
    return root


def test_clean_repo_facts(repo: Path) -> None:
    src = source_context(repo)
    assert src["reason"] is None
    assert len(src["commit"]) == 40 and src["branch"] == "main" and src["dirty"] is False
    assert src["worktree_digest"].startswith("sha256:")


def test_digest_tracks_edits_untracked_and_deletions_but_not_ignored(repo: Path) -> None:
    base = worktree_digest(repo)
    (repo / "ignored").mkdir()
    (repo / "ignored" / "x.bin").write_text("noise")
    assert worktree_digest(repo) == base
    assert source_context(repo)["dirty"] is False

    (repo / "new.txt").write_text("n")
    with_untracked = worktree_digest(repo)
    assert with_untracked != base
    assert source_context(repo)["dirty"] is True
    (repo / "new.txt").unlink()
    assert worktree_digest(repo) == base

    (repo / "a.txt").write_text("beta\n")
    assert worktree_digest(repo) != base
    (repo / "a.txt").write_text("alpha\n")
    assert worktree_digest(repo) == base

    (repo / "a.txt").unlink()
    assert worktree_digest(repo) != base


def test_digest_is_history_independent(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    _git(other, "init", "-q", "-b", "dev")
    (other / ".gitignore").write_text("ignored/\n")
    (other / "a.txt").write_text("alpha\n")  # same content, never committed
    assert worktree_digest(other) == worktree_digest(repo)


def test_detached_head_has_null_branch(repo: Path) -> None:
    commit = source_context(repo)["commit"]
    _git(repo, "checkout", "-q", "--detach", commit)
    assert source_context(repo)["branch"] is None


def test_not_a_repo_gives_nulls_and_a_reason(tmp_path: Path) -> None:
    src = source_context(tmp_path)
    assert src["commit"] is None and src["dirty"] is None and src["worktree_digest"] is None
    assert "git" in src["reason"]


def test_collect_context_shape_with_fake_gpu(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    nvml = fake.FakeNvml([fake.FakeDevice("GPU-1", "NVIDIA H200", used=1, total=2)], driver="560.1")
    ctx = collect_context(repo, nvml=nvml)
    assert set(ctx) == {"source", "gpu", "software", "environment", "host"}
    assert ctx["gpu"] == {
        "available": True,
        "reason": None,
        "devices": [{"index": 0, "uuid": "GPU-1", "name": "NVIDIA H200", "driver": "560.1"}],
        "health_at_start": {
            "available": True,
            "reason": None,
            "devices": [
                {
                    "index": 0,
                    "uuid": "GPU-1",
                    "clock_event_reasons": {"mask": 0, "names": []},
                    "temperature_c": 45,
                }
            ],
        },
    }
    assert ctx["environment"] == {"CUDA_VISIBLE_DEVICES": "0"}
    assert {"python", "torch", "mujoco", "warp-lang", "mujoco-warp", "soakbench"} <= set(ctx["software"])
    assert ctx["software"]["mujoco"] is not None
    assert ctx["host"]["cores"] >= 1 and ctx["host"]["hostname"]
    json.dumps(ctx)  # plain JSON


def test_collect_context_without_gpu_is_explicit(repo: Path) -> None:
    ctx = collect_context(repo, nvml=fake.FakeNvml([], fail={"nvmlInit": fake.NVMLError("no driver")}))
    assert ctx["gpu"]["available"] is False and "no driver" in ctx["gpu"]["reason"]
    health = ctx["gpu"]["health_at_start"]
    assert health["available"] is False and "no driver" in health["reason"] and health["devices"] == []


def test_a_run_passes_the_health_it_read_at_its_start(repo: Path) -> None:
    taken = {"available": False, "reason": "NVML initialisation failed: at the start", "devices": []}
    ctx = collect_context(repo, nvml=fake.FakeNvml([]), health_at_start=taken)
    assert ctx["gpu"]["health_at_start"] == taken


def test_importing_context_does_not_import_torch() -> None:
    code = (
        "import sys, harness.context, foundation.nvml; harness.context.collect_context();"
        " print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
