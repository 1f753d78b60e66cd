"""scripts/gpu/bundle/export.py and plan.py: uv's export parsed, the plan of what the GPU host lacks
(through a real ``uv export`` of a synthetic project and of the checkout's own lock, offline), and the
downloaded wheels checked against it. Nothing here reaches a package index."""

from __future__ import annotations

import hashlib
import os
import shutil
import tomllib
from pathlib import Path

import pytest
from bundle import plan as bundle_plan
from bundle.export import PlanEntry, parse_export, plan
from bundle.files import BundleError
from bundle.target import Target

ROOT = Path(__file__).resolve().parents[4]
HAVE = "torch numpy matplotlib rich typer jinja2 tensorboard psutil pyyaml pytest hypothesis nvidia-ml-py"


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _uv() -> str:
    """The uv that runs this suite (``uv run`` sets UV), else the one on PATH."""
    found = os.environ.get("UV") or shutil.which("uv")
    if found is None:
        pytest.fail(
            "these tests run uv export: run them through `make test` (uv run sets UV) or put uv on PATH"
        )
    return found


def _pkg(name: str, version: str, files: list[str], deps: str = "", extra: str = "") -> str:
    wheels = ", ".join(
        f'{{ url = "https://example.invalid/{f}", hash = "sha256:{_h(f)}", size = 10 }}' for f in files
    )
    dep_line = f"dependencies = [{deps}]\n" if deps else ""
    return (
        f'[[package]]\nname = "{name}"\nversion = "{version}"\nsource = {{ registry = "https://example.invalid/simple" }}\n'
        f"{dep_line}wheels = [{wheels}]\n{extra}\n"
    )


SYNTHETIC_PYPROJECT = """[project]
name = "proj"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["alpha", "num", "winonly; sys_platform == 'win32'"]

[project.optional-dependencies]
fast = ["beta[io]"]

[dependency-groups]
dev = ["plug>=2", "linter"]
"""

SYNTHETIC_LOCK = (
    'version = 1\nrevision = 3\nrequires-python = ">=3.11"\n'
    "resolution-markers = [\"python_full_version >= '3.12'\", \"python_full_version < '3.12'\"]\n\n"
    '[[package]]\nname = "proj"\nversion = "0.1.0"\nsource = { editable = "." }\ndependencies = [\n'
    '    { name = "alpha" },\n'
    '    { name = "num", version = "1.0", source = { registry = "https://example.invalid/simple" }, marker = "python_full_version < \'3.12\'" },\n'
    '    { name = "num", version = "2.0", source = { registry = "https://example.invalid/simple" }, marker = "python_full_version >= \'3.12\'" },\n'
    "    { name = \"winonly\", marker = \"sys_platform == 'win32'\" },\n]\n\n"
    '[package.optional-dependencies]\nfast = [{ name = "beta", extra = ["io"] }]\n\n'
    '[package.dev-dependencies]\ndev = [{ name = "plug" }, { name = "linter" }]\n\n'
    + _pkg("alpha", "3.1", ["alpha-3.1-py3-none-any.whl"], '{ name = "shared" }')
    + _pkg("num", "1.0", ["num-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"], extra="resolution-markers = [\"python_full_version < '3.12'\"]")
    + _pkg("num", "2.0", ["num-2.0-cp312-cp312-manylinux_2_28_x86_64.whl", "num-2.0-cp312-cp312-manylinux_2_34_x86_64.whl"], extra="resolution-markers = [\"python_full_version >= '3.12'\"]")
    + _pkg("beta", "0.5", ["beta-0.5-py3-none-any.whl"], '{ name = "alpha" }', '[package.optional-dependencies]\nio = [{ name = "zed" }]')
    + _pkg("zed", "9", ["zed-9-py3-none-any.whl"])
    + _pkg("shared", "1.2", ["shared-1.2-py3-none-any.whl"])
    + _pkg("plug", "2.4", ["plug-2.4-py3-none-any.whl"], '{ name = "shared" }')
    + _pkg("linter", "1", ["linter-1-py3-none-any.whl"])
    + _pkg("winonly", "1", ["winonly-1-py3-none-any.whl"])
)  # fmt: skip


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "pyproject.toml").write_text(SYNTHETIC_PYPROJECT)
    (folder / "uv.lock").write_text(SYNTHETIC_LOCK)
    return folder


def _run_plan(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    req = tmp_path / "requirements.txt"
    argv = ["plan", "--uv", _uv(), "--project", str(project), "--requirements", str(req), *args]
    code = bundle_plan.main(argv)
    out, err = capsys.readouterr()
    return code, out, req.read_text() if req.exists() else err


def test_parse_export_joins_continuations_and_keeps_markers_and_hashes() -> None:
    text = (
        "alpha==3.1 \\\n    --hash=sha256:" + _h("a") + "\n"
        "num==2.0 ; python_full_version >= '3.12' \\\n    --hash=sha256:" + _h("n1") + " \\\n"
        "    --hash=sha256:" + _h("n2") + "\n# a comment\n\nplain==1\n"
    )
    alpha, num, plain = parse_export(text)
    assert (alpha.name, alpha.version, alpha.marker, alpha.sha256s) == ("alpha", "3.1", None, (_h("a"),))
    assert num.marker == "python_full_version >= '3.12'" and num.sha256s == (_h("n1"), _h("n2"))
    assert plain.sha256s == ()
    with pytest.raises(BundleError, match=r"not a pinned package: '-e \./local'"):
        parse_export("-e ./local\n")


def test_plan_evaluates_markers_for_the_target_and_wants_hashes() -> None:
    pins = parse_export(
        f"num==1.0 ; python_full_version < '3.12' --hash=sha256:{_h('1')}\n"
        f"num==2.0 ; python_full_version >= '3.12' --hash=sha256:{_h('2')}\n"
        f"winonly==1 ; sys_platform == 'win32' --hash=sha256:{_h('w')}\n"
    )
    assert [(e.name, e.version) for e in plan(pins, Target("3.11"))] == [("num", "1.0")]
    (entry,) = plan(pins, Target("3.12"))
    assert entry.version == "2.0" and entry.requirement() == f"num==2.0 --hash=sha256:{_h('2')}"
    with pytest.raises(BundleError, match="has no --hash"):
        plan(parse_export("bare==1\n"), Target("3.12"))


def test_plan_through_uv_export_follows_extras_dev_picks_and_prunes_what_the_host_has(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, req = _run_plan(
        project,
        tmp_path,
        capsys,
        "--python-version",
        "3.12",
        "--extra",
        "fast",
        "--dev",
        "plug",
        "--have",
        "num",
    )
    assert code == 0
    rows = {line.split("\t")[0]: line.split("\t") for line in out.splitlines()}
    # num: the host has it; linter: a dev tool not asked for; winonly: its marker is false on Linux
    assert set(rows) == {"alpha", "beta", "zed", "plug", "shared"}
    assert rows["alpha"][1] == "3.1" and rows["alpha"][2] == _h("alpha-3.1-py3-none-any.whl")
    assert req.splitlines()[0] == f"alpha==3.1 --hash=sha256:{_h('alpha-3.1-py3-none-any.whl')}"
    assert ";" not in req
    code, out, _ = _run_plan(project, tmp_path, capsys, "--python-version", "3.11")
    assert code == 0 and "num\t1.0\t" in out and "num\t2.0" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--have", "nosuch"], "--have nosuch: not among the lock's packages"),
        (["--dev", "black"], "--dev black: not among the project's dev dependencies"),
        (["--extra", "gpu"], "gpu"),
    ],
)
def test_plan_refuses_unknown_names(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = _run_plan(project, tmp_path, capsys, "--python-version", "3.12", *args)
    assert code == 2 and message in err
    assert not (tmp_path / "requirements.txt").exists()


def test_plan_of_the_real_lock_names_exactly_the_missing_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    have = [a for name in HAVE.split() for a in ("--have", name)]
    dev = ["--dev", "pytest", "--dev", "pytest-timeout", "--dev", "pytest-benchmark", "--dev", "hypothesis"]
    code, out, req = _run_plan(
        ROOT, tmp_path, capsys, "--python-version", "3.12", "--extra", "mjwarp", *dev, *have
    )
    assert code == 0
    entries = {line.split("\t")[0]: line.split("\t") for line in out.splitlines()}
    must = {"mujoco", "mujoco-warp", "warp-lang", "omegaconf", "jsonschema", "jsonschema-specifications"}
    must |= {"referencing", "rpds-py", "attrs", "pytest-timeout", "pytest-benchmark", "etils", "py-spy"}
    assert must <= set(entries)
    assert not set(entries) & {"torch", "numpy", "tensorboard", "soakbench", "mypy", "ruff", "types-pyyaml"}
    # an independent read of the lock: each planned version is locked, with every hash uv exported for it
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    for name, version, hashes in entries.values():
        (pkg,) = [p for p in lock["package"] if p["name"] == name and p["version"] == version]
        files = [*pkg.get("wheels", []), *([pkg["sdist"]] if "sdist" in pkg else [])]
        assert set(hashes.split(",")) <= {f["hash"].removeprefix("sha256:") for f in files}
    assert len(req.splitlines()) == len(entries)


def test_check_wheels_wants_the_pinned_version_and_an_exported_hash(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    good = wheels / "alpha-3.1-py3-none-any.whl"
    good.write_bytes(b"alpha wheel bytes")
    digest = hashlib.sha256(good.read_bytes()).hexdigest()
    entry = PlanEntry("alpha", "3.1", (_h("another file of alpha"), digest))
    (record,) = bundle_plan.check_wheels([entry], wheels, Target("3.12"))
    assert record == {"name": "alpha", "version": "3.1", "filename": good.name, "sha256": digest, "size": 17}
    good.write_bytes(b"alpha wheel bytes, tampered")
    with pytest.raises(BundleError, match=r"alpha-3\.1-py3-none-any\.whl: sha256 \w+ is none of the lock's"):
        bundle_plan.check_wheels([entry], wheels, Target("3.12"))
    (wheels / "stray-1-py3-none-any.whl").write_bytes(b"x")
    with pytest.raises(BundleError, match=r"stray-1-py3-none-any\.whl: not in the plan"):
        bundle_plan.check_wheels([entry], wheels, Target("3.12"))
    with pytest.raises(BundleError, match=r"version 3\.1, the lock pins 3\.2"):
        bundle_plan.check_wheels([PlanEntry("alpha", "3.2", (digest,))], wheels, Target("3.12"))


def test_unreadable_inputs_exit_2_naming_the_file(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "pyproject.toml").write_text("[project\n")
    code, _, err = _run_plan(project, tmp_path, capsys, "--python-version", "3.12")
    assert code == 2 and f"{project / 'pyproject.toml'}: cannot read it" in err
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    argv = [
        "check",
        "--python-version",
        "3.12",
        "--plan",
        str(tmp_path / "missing.tsv"),
        "--wheels",
        str(wheels),
    ]
    assert bundle_plan.main([*argv, "--output", str(tmp_path / "w.json")]) == 2
    assert "missing.tsv" in capsys.readouterr().err
