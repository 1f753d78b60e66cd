"""The base commit's filed probe: chosen by workload and age, read from git at that commit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "ci" / "base_probe.py"
sys.path.insert(0, str(SCRIPT.parent))
from base_probe import matches, newest  # noqa: E402


def _probe(
    task: str, backends: list[str], num_envs: int, created: float, device: str = "cuda"
) -> dict[str, Any]:
    settings = {"task": task, "backends": backends, "num_envs": num_envs, "mjwarp_device": device}
    return {"schema_version": "0.4.0", "settings": settings, "created_unix_s": created}


def test_only_the_same_workload_matches() -> None:
    probe = _probe("g1_walk_flat", ["mjwarp"], 256, 1.0)
    assert matches(probe, "g1_walk_flat", "mjwarp", 256)
    # `probe compare` refuses another backend set, and Warp's CPU device is a diagnostic lane
    assert not matches(_probe("g1_walk_flat", ["mujoco", "mjwarp"], 256, 1.0), "g1_walk_flat", "mjwarp", 256)
    assert not matches(_probe("g1_walk_flat", ["mjwarp"], 256, 1.0, "cpu"), "g1_walk_flat", "mjwarp", 256)
    assert not matches({**probe, "schema_version": "0.3.0"}, "g1_walk_flat", "mjwarp", 256)
    assert not matches({"settings": "broken"}, "g1_walk_flat", "mjwarp", 256)
    assert not matches(probe, "g1_walk_flat", "mjwarp", 512)
    assert not matches(probe, "g1_motion_tracking", "mjwarp", 256)
    assert not matches(_probe("g1_walk_flat", ["mujoco"], 256, 1.0), "g1_walk_flat", "mjwarp", 256)


def test_the_newest_fitting_probe_is_chosen() -> None:
    old, new, other = (
        ("a", _probe("t", ["mujoco"], 8, 1.0)),
        ("b", _probe("t", ["mujoco"], 8, 2.0)),
        ("c", _probe("t", ["mujoco"], 16, 3.0)),
    )
    assert newest([old, new, other], "t", "mujoco", 8) == new
    assert newest([other], "t", "mujoco", 8) is None


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _evidence_repo(tmp: Path) -> tuple[Path, str, str]:
    """A repository whose first commit files one probe and whose second files a newer one."""
    repo = tmp / "evidence"
    (repo / "matrix" / "evidence" / "probe").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "ci@example.invalid")
    _git(repo, "config", "user.name", "ci")
    shas = []
    for n in (1, 2):
        rel = f"matrix/evidence/probe/p{n}.json"
        (repo / rel).write_text(json.dumps(_probe("g1_walk_flat", ["mujoco"], 32, float(n))))
        entries = [
            {"file": f"matrix/evidence/probe/p{k}.json", "kind": "probe", "platform": "linux-cpu"}
            for k in range(1, n + 1)
        ]
        (repo / "matrix" / "evidence" / "index.json").write_text(json.dumps({"entries": entries}))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", f"probe {n}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return repo, shas[0], shas[1]


def _run(repo: Path, at: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(SCRIPT), "--at", at, "--platform", "linux-cpu", "--task", "g1_walk_flat",
            "--backend", "mujoco", "--num-envs", "32", "--repo", str(repo), "--output", str(out), *extra]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, check=False, cwd=REPO)


def test_the_probe_is_read_as_filed_at_the_base_commit(tmp_path: Path) -> None:
    repo, first, second = _evidence_repo(tmp_path)
    out = tmp_path / "base.json"
    assert _run(repo, first, out).returncode == 0
    assert json.loads(out.read_text())["created_unix_s"] == 1.0  # not the newer probe filed later
    assert _run(repo, second, out).returncode == 0
    assert json.loads(out.read_text())["created_unix_s"] == 2.0


def test_no_filed_probe_of_the_workload_exits_2_naming_what_is_filed(tmp_path: Path) -> None:
    repo, first, _ = _evidence_repo(tmp_path)
    out = tmp_path / "base.json"
    done = _run(repo, first, out, "--platform", "linux-cuda")
    assert done.returncode == 2 and "no linux-cuda probe of g1_walk_flat/mujoco at 32 envs" in done.stderr
    assert not out.exists()
    done = _run(repo, "no-such-rev", out)
    assert done.returncode == 2 and "cannot read the filed evidence" in done.stderr
    done = _run(repo, "--output=/etc/passwd", out)
    assert done.returncode == 2 and "not a revision" in done.stderr


def test_malformed_evidence_and_a_bad_output_exit_2_without_a_traceback(tmp_path: Path) -> None:
    repo, first, _ = _evidence_repo(tmp_path)
    done = _run(repo, first, tmp_path / "missing" / "base.json")
    assert done.returncode == 2 and "--output" in done.stderr and "Traceback" not in done.stderr
    (repo / "matrix" / "evidence" / "index.json").write_text(json.dumps({"entries": ["not an entry"]}))
    _git(repo, "commit", "-qam", "break the index")
    done = _run(repo, "HEAD", tmp_path / "base.json")
    assert done.returncode == 2 and "entries" in done.stderr and "Traceback" not in done.stderr
