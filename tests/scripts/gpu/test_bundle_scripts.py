"""scripts/gpu shell scripts: each refuses bad input before touching anything, and every module the
acceptance runs has a main guard."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GPU = ROOT / "scripts" / "gpu"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--python-version", "3"], "--python-version must look like 3.12"),
        (["--platform", "linux_x86_64"], "--platform must look like manylinux_2_28_x86_64"),
        (["--transfer-mib", "3"], "leaves no room"),
        (["--bogus"], "unknown argument '--bogus'"),
    ],
)
def test_bundle_sh_refuses_bad_arguments(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "bundle"
    done = subprocess.run(
        ["bash", str(GPU / "bundle.sh"), "--out", str(out), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and message in done.stderr
    assert not out.exists() and not list(tmp_path.iterdir())


def test_bundle_sh_refuses_a_uv_it_cannot_run(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    done = subprocess.run(
        ["bash", str(GPU / "bundle.sh"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BUNDLE_UV": "/nonexistent/uv"},
    )
    assert done.returncode == 2 and "uv not found" in done.stderr
    assert not out.exists() and not list(tmp_path.iterdir())


def test_bundle_sh_refuses_an_existing_output(tmp_path: Path) -> None:
    done = subprocess.run(
        ["bash", str(GPU / "bundle.sh"), "--out", str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 2 and "pass --force" in done.stderr


@pytest.mark.parametrize(
    ("env", "args", "message"),
    [
        ({"ACCEPTANCE_PYTHON": "/nonexistent/python3"}, [], "is not an executable"),
        ({}, ["--python"], "--python needs an interpreter"),
        ({"ACCEPTANCE_ONLY": "soak,bogus"}, [], "unknown step 'bogus'"),
        ({"ACCEPTANCE_NCCL_GPUS": "0"}, [], "two device indexes like 0,1"),
        ({}, ["--frobnicate"], "usage:"),
    ],
)
def test_acceptance_sh_refuses_bad_settings(
    tmp_path: Path, env: dict[str, str], args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", str(GPU / "acceptance.sh"), *args, *([] if args == ["--python"] else [str(out)])],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )
    assert done.returncode == 2 and message in done.stderr
    assert not out.exists()


def test_every_module_the_acceptance_runs_has_a_main_guard() -> None:
    text = (GPU / "acceptance.sh").read_text()
    modules = {"soakbench.runtime.cli", "soakbench.harness.probe", "soakbench.harness.soak.cli", "pytest"}
    assert all(f"-m {m} " in text for m in modules)
    for module in (
        "soakbench.runtime.cli",
        "soakbench.harness.probe.cli",
        "soakbench.harness.probe.__main__",
        "soakbench.harness.soak.cli",
        "soakbench.matrix.cli",
        "soakbench.harness.cumps.cli",
        "soakbench.harness.metrics",
    ):
        source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        assert 'if __name__ == "__main__":\n    main()' in source, module
