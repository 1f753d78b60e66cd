"""scripts/gpu/bundle_lock.py and bundle_lockfile.py: the lock read, the plan of what the GPU host
lacks, and the downloaded wheels checked against the lock. Synthetic inputs only (and the real lock,
read offline): nothing here reaches a package index."""

from __future__ import annotations

import hashlib
from pathlib import Path

import bundle_lock
import pytest
from bundle_files import BundleError
from bundle_lockfile import Lock
from bundle_target import Target

ROOT = Path(__file__).resolve().parents[3]


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


SYNTHETIC_LOCK = f"""
version = 1
revision = 3
requires-python = ">=3.11"
resolution-markers = ["python_full_version >= '3.12'", "python_full_version < '3.12'"]

[[package]]
name = "proj"
version = "0.1.0"
source = {{ editable = "." }}
dependencies = [
    {{ name = "alpha" }},
    {{ name = "num", version = "1.0", source = {{ registry = "https://example.invalid/simple" }}, marker = "python_full_version < '3.12'" }},
    {{ name = "num", version = "2.0", source = {{ registry = "https://example.invalid/simple" }}, marker = "python_full_version >= '3.12'" }},
    {{ name = "winonly", marker = "sys_platform == 'win32'" }},
]

[package.optional-dependencies]
fast = [{{ name = "beta", extra = ["io"] }}]

[package.dev-dependencies]
dev = [{{ name = "plug" }}, {{ name = "linter" }}]

[[package]]
name = "alpha"
version = "3.1"
source = {{ registry = "https://example.invalid/simple" }}
dependencies = [{{ name = "shared" }}]
wheels = [{{ url = "https://example.invalid/alpha-3.1-py3-none-any.whl", hash = "sha256:{_h("alpha")}", size = 10 }}]

[[package]]
name = "num"
version = "1.0"
source = {{ registry = "https://example.invalid/simple" }}
resolution-markers = ["python_full_version < '3.12'"]
wheels = [
    {{ url = "https://example.invalid/num-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", hash = "sha256:{_h("num1-311")}", size = 10 }},
    {{ url = "https://example.invalid/num-1.0-cp311-cp311-macosx_11_0_arm64.whl", hash = "sha256:{_h("num1-mac")}", size = 10 }},
]

[[package]]
name = "num"
version = "2.0"
source = {{ registry = "https://example.invalid/simple" }}
resolution-markers = ["python_full_version >= '3.12'"]
wheels = [
    {{ url = "https://example.invalid/num-2.0-cp312-cp312-manylinux_2_34_x86_64.whl", hash = "sha256:{_h("num2-234")}", size = 10 }},
    {{ url = "https://example.invalid/num-2.0-cp312-cp312-manylinux_2_28_x86_64.whl", hash = "sha256:{_h("num2-228")}", size = 10 }},
]

[[package]]
name = "beta"
version = "0.5"
source = {{ registry = "https://example.invalid/simple" }}
dependencies = [{{ name = "alpha" }}]
wheels = [{{ url = "https://example.invalid/beta-0.5-py3-none-any.whl", hash = "sha256:{_h("beta")}", size = 10 }}]

[package.optional-dependencies]
io = [{{ name = "zed" }}]

[[package]]
name = "zed"
version = "9"
source = {{ registry = "https://example.invalid/simple" }}
wheels = [{{ url = "https://example.invalid/zed-9-py3-none-any.whl", hash = "sha256:{_h("zed")}", size = 10 }}]

[[package]]
name = "shared"
version = "1.2"
source = {{ registry = "https://example.invalid/simple" }}
wheels = [{{ url = "https://example.invalid/shared-1.2-py3-none-any.whl", hash = "sha256:{_h("shared")}", size = 10 }}]

[[package]]
name = "hostpkg"
version = "4"
source = {{ registry = "https://example.invalid/simple" }}
dependencies = [{{ name = "shared" }}]
wheels = [{{ url = "https://example.invalid/hostpkg-4-py3-none-any.whl", hash = "sha256:{_h("hostpkg")}", size = 10 }}]

[[package]]
name = "plug"
version = "2.4"
source = {{ registry = "https://example.invalid/simple" }}
wheels = [{{ url = "https://example.invalid/plug-2.4-py3-none-any.whl", hash = "sha256:{_h("plug")}", size = 10 }}]

[[package]]
name = "linter"
version = "1"
source = {{ registry = "https://example.invalid/simple" }}
wheels = [{{ url = "https://example.invalid/linter-1-py3-none-any.whl", hash = "sha256:{_h("linter")}", size = 10 }}]

[[package]]
name = "winonly"
version = "1"
source = {{ registry = "https://example.invalid/simple" }}
sdist = {{ url = "https://example.invalid/winonly-1.tar.gz", hash = "sha256:{_h("winonly")}", size = 10 }}
"""


@pytest.fixture
def lock(tmp_path: Path) -> Lock:
    path = tmp_path / "uv.lock"
    path.write_text(SYNTHETIC_LOCK)
    return Lock.load(path)


def _plan(lock: Lock, version: str, **kw: list[str]) -> dict[str, bundle_lock.PlanEntry]:
    entries = bundle_lock.plan(
        lock, Target(version), kw.get("extras", []), kw.get("dev", []), kw.get("have", [])
    )
    return {e.name: e for e in entries}


def test_plan_picks_the_locked_version_for_the_target_interpreter(lock: Lock) -> None:
    on311 = _plan(lock, "3.11")
    on312 = _plan(lock, "3.12")
    assert on311["num"].version == "1.0" and on311["num"].sha256s == (_h("num1-311"),)
    # glibc 2.34 is above the default 2.28: only the 2.28 wheel fits
    assert on312["num"].version == "2.0" and on312["num"].sha256s == (_h("num2-228"),)
    assert "winonly" not in on311  # its marker is false on Linux (and it has no wheel at all)
    assert on312["shared"].needed_by == "proj > alpha > shared"


def test_plan_follows_extras_dev_picks_and_subtracts_what_the_host_has(lock: Lock) -> None:
    plan = _plan(lock, "3.12", extras=["fast"], dev=["plug"], have=["hostpkg", "num"])
    assert set(plan) == {"alpha", "beta", "zed", "plug"}  # shared comes with hostpkg; no linter
    assert plan["zed"].needed_by == "proj[fast] > beta[io] > zed"
    assert plan["alpha"].version == "3.1" and plan["alpha"].sha256s == (_h("alpha"),)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"have": ["nosuch"]}, "no package 'nosuch'"),
        ({"extras": ["gpu"]}, "no such extra"),
        ({"dev": ["black"]}, "not among the project's dev dependencies"),
    ],
)
def test_plan_refuses_unknown_names(lock: Lock, kw: dict[str, list[str]], message: str) -> None:
    with pytest.raises(BundleError, match=message):
        _plan(lock, "3.12", **kw)


def test_plan_of_the_real_lock_names_exactly_the_missing_stack() -> None:
    lock = Lock.load(ROOT / "uv.lock")
    have = "torch numpy pandas matplotlib rich typer jinja2 tensorboard psutil pyyaml pytest hypothesis nvidia-ml-py"
    plan = _plan(
        lock, "3.12", extras=["mjwarp"], dev=["pytest-timeout", "pytest-benchmark"], have=have.split()
    )
    must = {"mujoco", "mujoco-warp", "warp-lang", "omegaconf", "jsonschema", "jsonschema-specifications"}
    must |= {"referencing", "rpds-py", "attrs", "pytest-timeout", "etils"}
    assert must <= set(plan)
    assert not set(plan) & {"torch", "numpy", "absl-py", "typing-extensions", "fsspec", "soakbench", "mypy"}
    for entry in plan.values():
        (locked,) = [p for p in lock.by_name(entry.name) if p.version == entry.version]
        assert entry.sha256s and set(entry.sha256s) <= {w.sha256 for w in locked.wheels}


def test_check_wheels_wants_the_locked_file_and_hash(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    good = wheels / "alpha-3.1-py3-none-any.whl"
    good.write_bytes(b"alpha wheel bytes")
    digest = hashlib.sha256(good.read_bytes()).hexdigest()
    lock_path = tmp_path / "uv.lock"
    old = f'hash = "sha256:{_h("alpha")}", size = 10'
    lock_path.write_text(
        SYNTHETIC_LOCK.replace(old, f'hash = "sha256:{digest}", size = {good.stat().st_size}')
    )
    lock = Lock.load(lock_path)
    entry = bundle_lock.PlanEntry("alpha", "3.1", (digest,), "proj > alpha")
    (record,) = bundle_lock.check_wheels(lock, [entry], wheels, Target("3.12"))
    assert record["sha256"] == digest and record["filename"] == good.name
    good.write_bytes(b"alpha wheel bytes, tampered")
    with pytest.raises(BundleError, match=r"alpha-3\.1-py3-none-any\.whl: sha256"):
        bundle_lock.check_wheels(lock, [entry], wheels, Target("3.12"))
    (wheels / "stray-1-py3-none-any.whl").write_bytes(b"x")
    with pytest.raises(BundleError, match=r"stray-1-py3-none-any\.whl: not in the plan"):
        bundle_lock.check_wheels(lock, [entry], wheels, Target("3.12"))


def test_lock_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "uv.lock"
    bad.write_text("version = 1\n[[package]]\nname = 'x'\n")
    with pytest.raises(BundleError, match="package x has no version"):
        Lock.load(bad)
    with pytest.raises(BundleError, match="no such lock file"):
        Lock.load(tmp_path / "missing.lock")
