"""Every training process records its inputs, and nothing a traced tiny run of each linux-cpu cell loads
lies outside them: an audit hook (``sitecustomize`` on the children's path) logs every project file the
trainer and its collector open, imports included, and the test compares that log with the records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from soakbench.foundation.inputs import INPUTS_DIR, git_blob_id, merge_manifest, read_records
from soakbench.runtime.manager.inputs_record import project_root

REPO = project_root()
# Logs every path under the project root that the process opens (Python opens a module's source, or
# its cached bytecode, through io.open_code, which raises the "open" audit event), written at exit.
TRACER = """
import atexit, os, sys
_root = os.environ["TRACE_ROOT"]
_seen = set()
def _hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith(_root):
        _seen.add(args[0])
sys.addaudithook(_hook)
def _flush():
    path = os.path.join(os.environ["TRACE_OUT"], f"{os.getpid()}.txt")
    with open(path, "w") as handle:
        handle.write("\\n".join(sorted(_seen)))
atexit.register(_flush)
"""
CELLS = [
    ("sac", "g1_walk_flat"),
    ("sac", "g1_motion_tracking"),
    ("flashsac", "g1_walk_flat"),
    ("flashsac", "g1_motion_tracking"),
]


def source_of(opened: str) -> str | None:
    """The project file an opened path stands for (a cached module stands for its source), relative."""
    path = Path(opened)
    if path.suffix == ".pyc" and path.parent.name == "__pycache__":
        path = path.parent.parent / (path.name.split(".")[0] + ".py")
    try:
        rel = path.relative_to(REPO)
    except ValueError:
        return None
    if {".venv", ".git"} & set(rel.parts) or not path.is_file():
        return None
    return rel.as_posix()


@pytest.mark.slow
@pytest.mark.parametrize(("algo", "task"), CELLS)
def test_a_tiny_run_loads_nothing_outside_its_recorded_inputs(algo: str, task: str, tmp_path: Path) -> None:
    hook_dir, trace_dir, log_dir = tmp_path / "hook", tmp_path / "trace", tmp_path / "run"
    hook_dir.mkdir()
    trace_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(TRACER)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(hook_dir), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "TRACE_ROOT": str(REPO),
        "TRACE_OUT": str(trace_dir),
    }
    cmd = [
        sys.executable, "-m", "soakbench.runtime.cli", "--algo", algo, "--task", task, "--sim", "mujoco",
        "algo.num_envs=4", "algo.max_iterations=3", "training.no_play=true", f"log_dir={log_dir}",
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    records = read_records(log_dir)
    assert sorted(r.role for r in records) == ["collector", "trainer"]
    manifest = merge_manifest(records)
    traces = sorted(trace_dir.glob("*.txt"))
    assert len(traces) >= 2, "the trainer and its collector each leave a trace"
    loaded = {s for t in traces for line in t.read_text().splitlines() if (s := source_of(line))}
    assert {"runtime/manager/trainer.py", "runtime/manager/collector.py"} <= loaded  # the trace sees both
    outside = sorted(loaded - set(manifest["files"]))
    assert not outside, f"loaded but not recorded as inputs: {outside}"
    # what a run of this cell loads, and what it does not
    assert f"runtime/learners/{algo}.py" in manifest["files"]
    other = "flashsac" if algo == "sac" else "sac"
    assert f"runtime/learners/{other}.py" not in manifest["files"]
    assert f"runtime/conf/tasks/{task}.yaml" in manifest["files"]
    assert "runtime/assets/robots/g1/g1.xml" in manifest["files"]  # read by MuJoCo's C loader
    for rel, blob in manifest["files"].items():
        assert git_blob_id((REPO / rel).read_bytes()) == blob, rel
    assert {"torch", "mujoco", "numpy"} <= set(manifest["distributions"])
    assert (log_dir / INPUTS_DIR).is_dir()
    json.dumps(manifest)  # plain JSON, as the artifact carries it
