"""The installed wheel is self-sufficient: built, installed into a fresh venv outside the checkout, and run
from an unrelated folder, it composes configs, trains, validates its own artifacts against the schemas it
ships, soaks a command and reads a checkout's support matrix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# one worker runs the module, so its module-scoped real wheel install is made once, not once per worker
pytestmark = [pytest.mark.xdist_group("wheel"), pytest.mark.slow]


def _uv() -> list[str]:
    found = shutil.which("uv")
    if found:
        return [found]
    probe = subprocess.run([sys.executable, "-m", "uv", "--version"], capture_output=True, check=False)
    if probe.returncode == 0:
        return [sys.executable, "-m", "uv"]
    pytest.skip("uv is not installed (make setup installs it); the wheel cannot be built here")


def _run(cmd: list[str], cwd: Path, timeout: float = 600, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    assert done.returncode == 0, f"{cmd} -> {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built once for the module."""
    dist = tmp_path_factory.mktemp("dist")
    _run([*_uv(), "build", "--wheel", "--out-dir", str(dist), str(REPO)], cwd=dist)
    wheels = sorted(dist.glob("soakbench-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


def _install(root: Path, wheel: Path, *extras: str) -> Path:
    """``root/venv`` with ``wheel`` and the locked dependencies of its base and ``extras`` (no dev group)."""
    uv, requirements = _uv(), root / "requirements.txt"
    chosen = [arg for extra in extras for arg in ("--extra", extra)]
    export = [*uv, "export", "--frozen", "--no-dev", *chosen, "--no-emit-project", "--no-hashes"]
    _run([*export, "-o", str(requirements)], cwd=REPO)
    _run([*uv, "venv", "--quiet", "--python", sys.executable, str(root / "venv")], cwd=root)
    python = root / "venv" / "bin" / "python"
    _run(
        [*uv, "pip", "install", "--quiet", "--python", str(python), "-r", str(requirements), str(wheel)], root
    )
    return root


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A fresh venv with the wheel and the locked training stack (the train extra; no mjwarp)."""
    return _install(tmp_path_factory.mktemp("wheel"), wheel, "train")


def _clean_env() -> dict[str, str]:
    """The environment without anything that would point imports back at the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def test_the_wheel_installs_one_import_package(wheel: Path) -> None:
    # nothing with a generic name (runtime, matrix, harness, foundation) lands beside a user's packages
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        names = set(archive.namelist())
    assert {top for top in tops if not top.endswith(".dist-info")} == {"soakbench"}
    for room in ("foundation", "runtime", "harness", "matrix"):
        assert f"soakbench/{room}/__init__.py" in names
    assert not any(name.startswith("soakbench/matrix/evidence/") for name in names)


def test_the_installed_code_is_not_the_checkout(installed: Path) -> None:
    python = installed / "venv" / "bin" / "python"
    code = (
        "import importlib.util, soakbench.runtime, soakbench.harness, soakbench.matrix, soakbench.foundation\n"
        "print([n for n in ('runtime', 'harness', 'matrix', 'foundation') if importlib.util.find_spec(n)])\n"
        "print(soakbench.runtime.__file__)\n"
    )
    bare, file = _run([str(python), "-c", code], cwd=installed, env=_clean_env()).splitlines()
    assert bare == "[]"
    where = Path(file)
    assert REPO not in where.parents
    assert "site-packages" in where.parts and where.parent.parent.name == "soakbench"


def test_train_composes_and_runs_from_outside_the_checkout(installed: Path) -> None:
    bin_dir = installed / "venv" / "bin"
    owner = ["--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco"]
    env = {**_clean_env(), "COLUMNS": "200"}
    printed = _run([str(bin_dir / "train"), *owner, "--print-config"], cwd=installed, env=env)
    assert "Effective settings: sac / g1_walk_flat / mujoco" in printed
    assert "Platform prerequisites" in printed and "robots/g1/scene_flat.xml" in printed
    log_dir = installed / "run"
    overrides = ["algo.num_envs=8", "algo.max_iterations=20", "training.no_play=true", f"log_dir={log_dir}"]
    _run([str(bin_dir / "train"), *owner, *overrides], cwd=installed, env=_clean_env())
    summary = json.loads((log_dir / "run_summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["total_env_steps"] == 8 * 20  # max_iterations counts the prefill iterations too


@pytest.mark.linux_only
def test_soak_monitor_and_matrix_explain(installed: Path) -> None:
    bin_dir = installed / "venv" / "bin"
    output = installed / "soak.json"
    # A command that writes into its log dir (start-up ends at the first change there) for 6 s: long
    # enough for the 8 post-start-up trend samples asked for below at 0.25 s sampling.
    log_dir = installed / "soak-run"
    writer = (
        "import pathlib, sys, time\n"
        "log = pathlib.Path(sys.argv[1]) / 'progress.jsonl'\n"
        "for i in range(30):\n"
        "    with log.open('a') as fh: fh.write(f'{{\"iteration\": {i}}}\\n')\n"
        "    time.sleep(0.2)\n"
    )
    command = [str(bin_dir / "python"), "-c", writer, str(log_dir)]
    soak = [
        str(bin_dir / "soak"),
        "monitor",
        "--log-dir",
        str(installed / "soak-run"),
        "--output",
        str(output),
    ]
    subprocess.run(
        [
            *soak,
            "--sample-interval-seconds",
            "0.25",
            "--min-trend-samples",
            "8",
            "--post-shutdown-grace-seconds",
            "1",
            "--live",
            "off",
            "--",
            *command,
        ],
        cwd=installed,
        env=_clean_env(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    artifact = json.loads(output.read_text())
    assert artifact["artifact_schema_version"] == "0.4.0" and artifact["mode"] == "monitor"
    assert artifact["status"] == "passed", artifact["failure_reason"]
    explained = _run(
        [
            str(bin_dir / "matrix"),
            "explain",
            "sac",
            "g1_walk_flat",
            "mujoco",
            "linux-cpu",
            "--repo",
            str(REPO),
        ],
        cwd=installed,
        env=_clean_env(),
    )
    first = explained.splitlines()[0]
    assert first.startswith("sac/g1_walk_flat/mujoco@linux-cpu: ")
    assert first.rsplit(": ", 1)[1] in ("Registered", "Configured", "Tested", "Benchmarked", "Recommended")
    assert "evidence considered" in explained


@pytest.mark.linux_only
def test_a_harness_only_install_soaks_an_outside_project_without_the_training_stack(
    tmp_path_factory: pytest.TempPathFactory, wheel: Path
) -> None:
    """`pip install .` with no extras: no torch or MuJoCo, yet `soak monitor --cell` watches an outside
    project's command and its artifact names the installed harness's version and that project's commit."""
    root = _install(tmp_path_factory.mktemp("harness-only"), wheel)
    bin_dir, env = root / "venv" / "bin", _clean_env()
    for stack in ("torch", "mujoco", "omegaconf", "tensorboard"):
        found = _run([str(bin_dir / "python"), "-c", f"import importlib.util as u; print(u.find_spec({stack!r}))"],
                     cwd=root, env=env)  # fmt: skip
        assert found.strip() == "None", f"{stack} is installed without the train extra"
    project = root / "outside"
    project.mkdir()
    (project / "job.py").write_text(
        "import pathlib, sys, time\n"
        "log = pathlib.Path(sys.argv[1]) / 'progress.jsonl'\n"
        "for i in range(25):\n"
        "    with log.open('a') as fh: fh.write(f'{{\"iteration\": {i}}}\\n')\n"
        "    time.sleep(0.2)\n"
    )
    git = ["git", "-c", "user.email=ci@example.invalid", "-c", "user.name=ci"]
    _run(["git", "init", "-q"], cwd=project)
    _run([*git, "add", "-A"], cwd=project)
    _run([*git, "commit", "-qm", "an outside trainer"], cwd=project)
    commit = _run(["git", "rev-parse", "HEAD"], cwd=project).strip()
    output = project.parent / "soak.json"
    argv = [
        str(bin_dir / "soak"), "monitor", "--cell", "toy/count/py", "--log-dir", str(root / "log"),
        "--output", str(output), "--sample-interval-seconds", "0.25", "--min-trend-samples", "8",
        "--post-shutdown-grace-seconds", "1", "--live", "off",
        # the suite's fault programs leave /dev/shm litter on purpose, beside this run (xdist)
        "--shm-attribution", "evidence", "--",
        str(bin_dir / "python"), "job.py", str(root / "log"),
    ]  # fmt: skip
    done = subprocess.run(
        argv, cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    artifact = json.loads(output.read_text())
    assert done.returncode == 0 and artifact["status"] == "passed", artifact["failure_reason"]
    assert "PASSED" in done.stdout + done.stderr  # --live off still prints the verdict
    assert artifact["run_settings"]["cell"] == {"algo": "toy", "task": "count", "backend": "py"}
    assert artifact["context"]["source"]["commit"] == commit
    software = artifact["context"]["software"]
    assert software["torch"] is None and software["mujoco"] is None
    assert software["soakbench"] is not None
