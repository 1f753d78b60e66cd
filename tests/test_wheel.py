"""The installed wheel is self-sufficient: built, installed into a fresh venv outside the checkout, and run
from an unrelated folder, it composes configs, trains, validates its own artifacts against the schemas it
ships, soaks a command and reads a checkout's support matrix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel and the locked training stack (the train extra; no dev group, no mjwarp)."""
    root = tmp_path_factory.mktemp("wheel")
    uv = _uv()
    _run([*uv, "build", "--wheel", "--out-dir", str(root / "dist"), str(REPO)], cwd=root)
    wheels = sorted((root / "dist").glob("soakbench-*.whl"))
    assert len(wheels) == 1
    requirements = root / "requirements.txt"
    _run(
        [*uv, "export", "--frozen", "--no-dev", "--extra", "train", "--no-emit-project", "--no-hashes", "-o",
         str(requirements)],
        cwd=REPO,
    )
    _run([*uv, "venv", "--quiet", "--python", sys.executable, str(root / "venv")], cwd=root)
    python = root / "venv" / "bin" / "python"
    _run(
        [*uv, "pip", "install", "--quiet", "--python", str(python), "-r", str(requirements), str(wheels[0])],
        root,
    )
    return root


def _clean_env() -> dict[str, str]:
    """The environment without anything that would point imports back at the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def test_the_installed_code_is_not_the_checkout(installed: Path) -> None:
    python = installed / "venv" / "bin" / "python"
    code = "import foundation, runtime, harness, matrix; print(runtime.__file__)"
    where = Path(_run([str(python), "-c", code], cwd=installed, env=_clean_env()).strip())
    assert REPO not in where.parents
    assert "site-packages" in where.parts


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
    assert artifact["artifact_schema_version"] == "0.3.0" and artifact["mode"] == "monitor"
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
