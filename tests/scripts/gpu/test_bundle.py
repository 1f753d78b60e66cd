"""scripts/gpu bundle tooling: lock parsing, split/join/verify, install, and the scripts' fail-closed
argument checks. Synthetic inputs only: nothing here reaches a package index."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GPU = ROOT / "scripts" / "gpu"
sys.path.insert(0, str(GPU))

import bundle_lock  # noqa: E402
import bundle_parts  # noqa: E402

LOCK_SHA = hashlib.sha256((ROOT / "uv.lock").read_bytes()).hexdigest()


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
def lock(tmp_path: Path) -> bundle_lock.Lock:
    path = tmp_path / "uv.lock"
    path.write_text(SYNTHETIC_LOCK)
    return bundle_lock.Lock.load(path)


def _plan(lock: bundle_lock.Lock, version: str, **kw: list[str]) -> dict[str, bundle_lock.PlanEntry]:
    entries = bundle_lock.plan(
        lock, bundle_lock.Target(version), kw.get("extras", []), kw.get("dev", []), kw.get("have", [])
    )
    return {e.name: e for e in entries}


# ---- lock ---------------------------------------------------------------------------------------


def test_plan_picks_the_locked_version_for_the_target_interpreter(lock: bundle_lock.Lock) -> None:
    on311 = _plan(lock, "3.11")
    on312 = _plan(lock, "3.12")
    assert on311["num"].version == "1.0" and on311["num"].sha256s == (_h("num1-311"),)
    # glibc 2.34 is above the default 2.28: only the 2.28 wheel fits
    assert on312["num"].version == "2.0" and on312["num"].sha256s == (_h("num2-228"),)
    assert "winonly" not in on311  # its marker is false on Linux (and it has no wheel at all)
    assert on312["shared"].needed_by == "proj > alpha > shared"


def test_plan_follows_extras_dev_picks_and_subtracts_what_the_host_has(lock: bundle_lock.Lock) -> None:
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
def test_plan_refuses_unknown_names(lock: bundle_lock.Lock, kw: dict[str, list[str]], message: str) -> None:
    with pytest.raises(bundle_lock.BundleError, match=message):
        _plan(lock, "3.12", **kw)


def test_plan_of_the_real_lock_names_exactly_the_missing_stack() -> None:
    lock = bundle_lock.Lock.load(ROOT / "uv.lock")
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


@pytest.mark.parametrize(
    ("marker", "version", "expected"),
    [
        ("python_full_version < '3.12'", "3.11", True),
        ("python_full_version >= '3.12' and python_full_version < '3.14'", "3.12", True),
        ("python_full_version == '3.14.*' and sys_platform != 'win32'", "3.14", True),
        ("python_full_version == '3.14.*'", "3.12", False),
        ("sys_platform == 'emscripten' or sys_platform == 'win32'", "3.12", False),
        (
            "(platform_machine == 'aarch64' or platform_machine == 'x86_64') and sys_platform == 'linux'",
            "3.12",
            True,
        ),
        ("platform_python_implementation != 'PyPy'", "3.12", True),
        ("'3.12' <= python_version", "3.12", True),
    ],
)
def test_markers(marker: str, version: str, expected: bool) -> None:
    assert bundle_lock.marker_holds(marker, bundle_lock.Target(version).marker_env()) is expected


def test_unknown_marker_variable_fails_closed() -> None:
    with pytest.raises(bundle_lock.BundleError, match="does not evaluate"):
        bundle_lock.marker_holds("platform_release == '6'", bundle_lock.Target("3.12").marker_env())


@pytest.mark.parametrize(
    ("filename", "fits"),
    [
        ("rpds_py-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", True),
        ("w-1-py3-none-manylinux_2_28_x86_64.whl", True),
        ("w-1-py3-none-manylinux_2_34_x86_64.whl", False),
        ("w-1-py3-none-manylinux_2_28_aarch64.whl", False),
        ("w-1-cp311-cp311-manylinux_2_28_x86_64.whl", False),
        ("w-1-cp310-abi3-manylinux_2_17_x86_64.whl", True),
        ("w-1-cp312-cp312-musllinux_1_2_x86_64.whl", False),
        ("w-1-py2.py3-none-any.whl", True),
    ],
)
def test_wheel_fits_cp312_glibc_228_x86_64(filename: str, fits: bool) -> None:
    assert bundle_lock.wheel_fits(bundle_lock.parse_wheel_name(filename), bundle_lock.Target("3.12")) is fits


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
    lock = bundle_lock.Lock.load(lock_path)
    entry = bundle_lock.PlanEntry("alpha", "3.1", (digest,), "proj > alpha")
    (record,) = bundle_lock.check_wheels(lock, [entry], wheels, bundle_lock.Target("3.12"))
    assert record["sha256"] == digest and record["filename"] == good.name
    good.write_bytes(b"alpha wheel bytes, tampered")
    with pytest.raises(bundle_lock.BundleError, match=r"alpha-3\.1-py3-none-any\.whl: sha256"):
        bundle_lock.check_wheels(lock, [entry], wheels, bundle_lock.Target("3.12"))
    (wheels / "stray-1-py3-none-any.whl").write_bytes(b"x")
    with pytest.raises(bundle_lock.BundleError, match=r"stray-1-py3-none-any\.whl: not in the plan"):
        bundle_lock.check_wheels(lock, [entry], wheels, bundle_lock.Target("3.12"))


def test_lock_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "uv.lock"
    bad.write_text("version = 1\n[[package]]\nname = 'x'\n")
    with pytest.raises(bundle_lock.BundleError, match="package x has no version"):
        bundle_lock.Lock.load(bad)
    with pytest.raises(bundle_lock.BundleError, match="no such lock file"):
        bundle_lock.Lock.load(tmp_path / "missing.lock")


# ---- split / assemble / install -----------------------------------------------------------------


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(folder: Path, name: str, blob_bytes: int, requires: tuple[str, ...] = ()) -> Path:
    """A real, installable pure-Python wheel with a (stored, incompressible) data file of blob_bytes."""
    files = {
        f"{name}/__init__.py": f"VALUE = {name!r}\n".encode(),
        f"{name}/blob.bin": random.Random(name).randbytes(blob_bytes),
        f"{name}-1.0.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires)
        ).encode(),
        f"{name}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{p},{_record_hash(d)},{len(d)}\n" for p, d in files.items())
    files[f"{name}-1.0.dist-info/RECORD"] = (record + f"{name}-1.0.dist-info/RECORD,,\n").encode()
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for p, d in files.items():
            zf.writestr(p, d)
    return path


def make_bundle(tmp_path: Path, python_version: str, requires: tuple[str, ...] = ()) -> Path:
    wheels = tmp_path / "wheels"
    wheels.mkdir(parents=True)
    paths = [make_wheel(wheels, "fakebig", 2_600_000), make_wheel(wheels, "fakesmall", 1000, requires)]
    records = [
        {
            "name": bundle_parts.parse_wheel_name(p.name).name,
            "version": "1.0",
            "filename": p.name,
            "sha256": bundle_parts.sha256_file(p),
            "size": p.stat().st_size,
            "needed_by": "test",
        }
        for p in paths
    ]
    meta = {
        "target": {"python_version": python_version, "machine": os.uname().machine},
        "lock_sha256": LOCK_SHA,
    }
    out = tmp_path / "bundle"
    bundle_parts.split(wheels, records, out, 1 << 20, meta)
    return out


def test_split_cuts_transfers_of_at_most_the_part_size(tmp_path: Path) -> None:
    out = make_bundle(tmp_path, "3.12")
    manifest = json.loads((out / "MANIFEST.json").read_text())
    folders = sorted(p.name for p in out.glob("transfer-*"))
    assert folders == ["transfer-01", "transfer-02", "transfer-03"]
    for name in folders:
        assert (out / name / "MANIFEST.json").read_bytes() == (out / "MANIFEST.json").read_bytes()
        assert sum(p.stat().st_size for p in (out / name).iterdir() if p.name != "MANIFEST.json") <= 1 << 20
    big = next(w for w in manifest["wheels"] if w["name"] == "fakebig")
    assert len(big["parts"]) == 3 and big["imports"] == ["fakebig"]
    assert manifest["requires_glibc"] == "0.0" and manifest["total_bytes"] == sum(
        w["size"] for w in manifest["wheels"]
    )
    with pytest.raises(bundle_parts.BundleError, match="exists and is not empty"):
        bundle_parts.split(tmp_path / "wheels", manifest["wheels"], out, 1 << 20, {"target": {}})


def test_assemble_across_transfers_names_missing_and_corrupt_parts(tmp_path: Path) -> None:
    out = make_bundle(tmp_path, "3.12")
    stage = tmp_path / "stage"
    arrived = tmp_path / "arrived"
    for name in ("transfer-01", "transfer-02", "transfer-03"):  # each transfer lands in its own folder
        shutil.copytree(out / name, arrived / name)
    first = bundle_parts.assemble(stage, [arrived / "transfer-01"], lock=ROOT / "uv.lock")
    assert not first.corrupt and {p.transfer for p in first.missing} == {2, 3}
    assert bundle_parts._print_assemble(first, stage) == bundle_parts.EXIT_MISSING

    part = next(p for p in (arrived / "transfer-02").iterdir() if p.name != "MANIFEST.json")
    good = part.read_bytes()
    part.write_bytes(good[:100] + bytes([good[100] ^ 1]) + good[101:])  # one flipped bit, same size
    second = bundle_parts.assemble(stage, [arrived / "transfer-02", arrived / "transfer-03"])
    assert len(second.corrupt) == 1 and part.name in second.corrupt[0] and "transfer 2" in second.corrupt[0]
    assert bundle_parts._print_assemble(second, stage) == 2
    assert not (stage / "wheels").exists() and not (stage / part.name).exists()

    part.write_bytes(good)  # brought again
    third = bundle_parts.assemble(stage, [arrived / "transfer-02"])  # the stage holds the rest
    assert not third.corrupt and not third.missing and len(third.joined) == 2
    for w in json.loads((out / "MANIFEST.json").read_text())["wheels"]:
        assert bundle_parts.sha256_file(stage / "wheels" / w["filename"]) == w["sha256"]
    again = bundle_parts.assemble(stage, [])  # idempotent: nothing rewritten
    assert not again.joined and not again.missing and bundle_parts._print_assemble(again, stage) == 0

    staged = next(p for p in stage.iterdir() if p.name.startswith("fakebig") and ".part-" in p.name)
    staged.write_bytes(b"rot")  # a staged copy that went bad is dropped and then named as missing
    rotted = bundle_parts.assemble(stage, [])
    assert [p.file for p in rotted.missing] == [staged.name] and not staged.exists()


def test_assemble_refuses_mixed_bundles_a_wrong_manifest_hash_and_another_lock(tmp_path: Path) -> None:
    one = make_bundle(tmp_path / "a", "3.12")
    two = make_bundle(tmp_path / "b", "3.11")
    with pytest.raises(bundle_parts.BundleError, match="parts from two different bundles"):
        bundle_parts.assemble(tmp_path / "stage", [one / "transfer-01", two / "transfer-02"])
    with pytest.raises(bundle_parts.BundleError, match="--manifest-sha256"):
        bundle_parts.assemble(tmp_path / "stage", [one / "transfer-01"], "0" * 64)
    other_lock = tmp_path / "other.lock"
    other_lock.write_text("version = 1\n")
    with pytest.raises(bundle_parts.BundleError, match="rebuild the bundle from this checkout"):
        bundle_parts.assemble(tmp_path / "stage", [one / "transfer-01"], lock=other_lock)
    assert not (tmp_path / "stage").exists()


def _python_with_pip() -> str:
    for candidate in (sys.executable, getattr(sys, "_base_executable", ""), shutil.which("python3") or ""):
        if (
            candidate
            and subprocess.run([candidate, "-m", "pip", "--version"], capture_output=True).returncode == 0
        ):
            return candidate
    pytest.skip("no interpreter with pip on this host")


def _version_of(python: str) -> str:
    code = "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.slow
def test_device_install_joins_installs_offline_and_is_idempotent(tmp_path: Path) -> None:
    python = _python_with_pip()
    out = make_bundle(tmp_path, _version_of(python))
    stage, target = tmp_path / "stage", tmp_path / "site"
    script = [
        "bash", str(GPU / "device_install.sh"), "--python", python, "--stage", str(stage), "--target", str(target),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    partial = subprocess.run(
        [*script, "--partial", str(out / "transfer-01")], capture_output=True, text=True, env=env
    )
    assert partial.returncode == 0, partial.stderr
    assert "missing from transfer-02" in partial.stdout and not target.exists()
    early = subprocess.run([*script, str(out / "transfer-02")], capture_output=True, text=True, env=env)
    assert early.returncode == 2 and "missing from transfer-03" in early.stdout and not target.exists()

    done = subprocess.run([*script, str(out / "transfer-03")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"export PYTHONPATH={target}" in done.stdout and "imported 2 bundled modules" in done.stdout
    check = f"import fakebig, fakesmall; assert fakebig.__file__.startswith({str(target)!r})"
    subprocess.run([python, "-c", check], env={**env, "PYTHONPATH": str(target)}, check=True)

    rerun = subprocess.run(script, capture_output=True, text=True, env=env)  # nothing new: all staged
    assert rerun.returncode == 0 and "already installed from this bundle" in rerun.stdout


@pytest.mark.slow
def test_install_fails_closed_on_unmet_requirements_and_foreign_targets(tmp_path: Path) -> None:
    python = _python_with_pip()
    out = make_bundle(tmp_path, _version_of(python), requires=("no-such-dist-zz>=1",))
    stage = tmp_path / "stage"
    assert (
        bundle_parts._print_assemble(bundle_parts.assemble(stage, sorted(out.glob("transfer-*"))), stage) == 0
    )
    code = "import sys; sys.path.insert(0, sys.argv[1]); import bundle_parts; sys.exit(bundle_parts.main(sys.argv[2:]))"
    cmd = [python, "-c", code, str(GPU), "install", "--stage", str(stage), "--target"]
    failed = subprocess.run([*cmd, str(tmp_path / "site")], capture_output=True, text=True)
    assert failed.returncode == 2 and "fakesmall 1.0 requires no-such-dist-zz" in failed.stderr
    (tmp_path / "other").mkdir()
    foreign = subprocess.run([*cmd, str(tmp_path / "other")], capture_output=True, text=True)
    assert foreign.returncode == 2 and "holds no install of this bundle" in foreign.stderr


def test_install_refuses_a_bundle_for_another_interpreter(tmp_path: Path) -> None:
    out = make_bundle(tmp_path, "3.9")
    stage = tmp_path / "stage"
    bundle_parts.assemble(stage, sorted(out.glob("transfer-*")))
    with pytest.raises(bundle_parts.BundleError, match=r"the bundle is for 3\.9"):
        bundle_parts.install(stage, tmp_path / "site")
    assert not (tmp_path / "site").exists()


# ---- the scripts refuse bad input before touching anything ---------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--python-version", "3"], "--python-version must look like 3.12"),
        (["--platform", "linux_x86_64"], "--platform must look like manylinux_2_28_x86_64"),
        (["--lock", "/nonexistent/uv.lock"], "no such file"),
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
    modules = {"runtime.cli", "harness.probe", "harness.soak.cli", "pytest"}
    assert all(f"-m {m} " in text for m in modules)
    for module in (
        "runtime.cli",
        "harness.probe",
        "harness.soak.cli",
        "matrix.cli",
        "harness.cumps",
        "harness.metrics",
    ):
        source = (ROOT / (module.replace(".", "/") + ".py")).read_text()
        assert 'if __name__ == "__main__":\n    main()' in source, module
