"""The harness installs and runs without the training stack: the base dependencies hold no torch, MuJoCo,
OmegaConf or TensorBoard, and `soak monitor` and `matrix` run with those imports made impossible."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from soakbench.harness import context
from tests.harness.soak._soakrun import REPO, monitor_args

TRAINING_STACK = ("torch", "mujoco", "omegaconf", "tensorboard", "warp", "mujoco_warp", "pandas")
# Runs a call with the training stack unimportable, then says whether any of it loaded.
BLOCKED = """
import importlib, importlib.abc, runpy, sys
BLOCK = {blocked!r}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCK:
            raise ImportError(f"{{name}} is not installed (harness-only)")
        return None
sys.meta_path.insert(0, Blocker())
sys.argv = {argv!r}
try:
    {call}
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print("LOADED", sorted(m for m in sys.modules if m.partition(".")[0] in BLOCK), file=sys.stderr)
sys.exit(code)
"""


def _blocked(module: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    call = f"runpy.run_module({module!r}, run_name='__main__')"
    code = BLOCKED.format(blocked=TRAINING_STACK, argv=argv, call=call)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_base_dependencies_are_the_harness_alone() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {dep.split(">")[0].split("[")[0].strip() for dep in project["dependencies"]}
    assert not names & {"torch", "mujoco", "omegaconf", "tensorboard", "pandas", "warp-lang", "mujoco-warp"}
    train = {dep.split(">")[0].strip() for dep in project["optional-dependencies"]["train"]}
    assert {"torch", "mujoco", "omegaconf", "tensorboard"} <= train
    assert "soakbench[train]" in project["optional-dependencies"]["mjwarp"]


@pytest.mark.slow
def test_soak_monitor_runs_without_the_training_stack(tmp_path: Path) -> None:
    argv, output = monitor_args(tmp_path, "healthy_plateau.py", "2", startup=30.0, stale=10.0)
    done = _blocked("soakbench.harness.soak.cli", ["soak", *argv[3:]], REPO)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert "LOADED []" in done.stderr
    artifact = json.loads(output.read_text())
    assert artifact["mode"] == "monitor" and artifact["criteria"]
    assert artifact["context"]["software"]["soakbench"] is not None  # its own version


def test_matrix_runs_without_the_training_stack(tmp_path: Path) -> None:
    done = _blocked("soakbench.matrix.cli", ["matrix", "--help"], REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "affected" in done.stdout and "LOADED []" in done.stderr


def test_matrix_ingest_for_this_runtime_names_the_extra_it_needs(tmp_path: Path) -> None:
    # this runtime's own cells are read from its registries, which need the training stack
    xml = tmp_path / "junit.xml"
    xml.write_text("<testsuites/>")
    done = _blocked("soakbench.matrix.cli", ["matrix", "ingest", str(xml)], REPO)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "matrix ingest: error: this command needs the 'train' extra" in done.stderr
    assert "pip install 'soakbench[train]'" in done.stderr and "LOADED []" in done.stderr


def test_an_installed_harness_records_the_commit_of_the_repository_it_runs_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed, outside = tmp_path / "site-packages", tmp_path / "trainer"
    installed.mkdir()
    outside.mkdir()
    subprocess.run(["git", "init", "-q", str(outside)], check=True)
    (outside / "train.py").write_text("print('hi')\n")
    git = ["git", "-C", str(outside), "-c", "user.email=t@t.invalid", "-c", "user.name=t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "outside trainer"], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    monkeypatch.setattr(context, "REPO_ROOT", installed)  # as if installed from a wheel: not a work tree
    monkeypatch.chdir(outside)
    assert context.source_root() == outside.resolve()
    assert context.source_context(context.source_root())["commit"] == head


def _script_call(name: str) -> str:
    """The call a console script makes: its function, imported from its module."""
    module, _, function = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"][
        name
    ].partition(":")
    return f"importlib.import_module({module!r}).{function}()"


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--help"],
        ["probe", "--help"],
        ["extract-metrics", "--help"],
        ["soak", "run"],
        ["soak", "demo"],
    ],
)
def test_a_training_command_names_the_extra_it_needs_and_exits_2(argv: list[str], tmp_path: Path) -> None:
    # a complete, valid command line: only the missing extra can stop it
    if argv == ["soak", "run"]:
        argv = [
            *argv,
            "--sim",
            "mujoco",
            "--log-dir",
            str(tmp_path / "run"),
            "--output",
            str(tmp_path / "s.json"),
        ]
    elif argv == ["soak", "demo"]:
        argv = [*argv, "--reports-dir", str(tmp_path)]
    code = BLOCKED.format(blocked=TRAINING_STACK, argv=argv, call=_script_call(argv[0]))
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "pip install 'soakbench[train]'" in done.stderr and "Traceback" not in done.stderr
    assert "LOADED []" in done.stderr


@pytest.mark.parametrize("command", ["train", "probe", "extract-metrics"])
def test_with_the_training_stack_a_training_command_runs(command: str) -> None:
    code = BLOCKED.format(blocked=(), argv=[command, "--help"], call=_script_call(command))
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Usage" in done.stdout
