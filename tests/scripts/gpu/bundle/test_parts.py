"""scripts/gpu/bundle/parts.py and its modules: split into transfers, assemble (join and verify) and
install offline. Synthetic wheels only: nothing here reaches a package index."""

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
from bundle import parts as bundle_parts
from bundle.assemble import assemble
from bundle.files import BundleError, parse_wheel_name, sha256_file
from bundle.install import install
from bundle.split import split

ROOT = Path(__file__).resolve().parents[4]
GPU = ROOT / "scripts" / "gpu"

LOCK_SHA = hashlib.sha256((ROOT / "uv.lock").read_bytes()).hexdigest()


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
            "name": parse_wheel_name(p.name).name,
            "version": "1.0",
            "filename": p.name,
            "sha256": sha256_file(p),
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
    split(wheels, records, out, 1 << 20, meta)
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
    with pytest.raises(BundleError, match="exists and is not empty"):
        split(tmp_path / "wheels", manifest["wheels"], out, 1 << 20, {"target": {}})


def test_assemble_across_transfers_names_missing_and_corrupt_parts(tmp_path: Path) -> None:
    out = make_bundle(tmp_path, "3.12")
    stage = tmp_path / "stage"
    arrived = tmp_path / "arrived"
    for name in ("transfer-01", "transfer-02", "transfer-03"):  # each transfer lands in its own folder
        shutil.copytree(out / name, arrived / name)
    first = assemble(stage, [arrived / "transfer-01"], lock=ROOT / "uv.lock")
    assert not first.corrupt and {p.transfer for p in first.missing} == {2, 3}
    assert bundle_parts._print_assemble(first, stage) == bundle_parts.EXIT_MISSING

    part = next(p for p in (arrived / "transfer-02").iterdir() if p.name != "MANIFEST.json")
    good = part.read_bytes()
    part.write_bytes(good[:100] + bytes([good[100] ^ 1]) + good[101:])  # one flipped bit, same size
    second = assemble(stage, [arrived / "transfer-02", arrived / "transfer-03"])
    assert len(second.corrupt) == 1 and part.name in second.corrupt[0] and "transfer 2" in second.corrupt[0]
    assert bundle_parts._print_assemble(second, stage) == 2
    assert not (stage / "wheels").exists() and not (stage / part.name).exists()

    part.write_bytes(good)  # brought again
    third = assemble(stage, [arrived / "transfer-02"])  # the stage holds the rest
    assert not third.corrupt and not third.missing and len(third.joined) == 2
    for w in json.loads((out / "MANIFEST.json").read_text())["wheels"]:
        assert sha256_file(stage / "wheels" / w["filename"]) == w["sha256"]
    again = assemble(stage, [])  # idempotent: nothing rewritten
    assert not again.joined and not again.missing and bundle_parts._print_assemble(again, stage) == 0

    staged = next(p for p in stage.iterdir() if p.name.startswith("fakebig") and ".part-" in p.name)
    staged.write_bytes(b"rot")  # a staged copy that went bad is dropped and then named as missing
    rotted = assemble(stage, [])
    assert [p.file for p in rotted.missing] == [staged.name] and not staged.exists()


def test_assemble_refuses_mixed_bundles_a_wrong_manifest_hash_and_another_lock(tmp_path: Path) -> None:
    one = make_bundle(tmp_path / "a", "3.12")
    two = make_bundle(tmp_path / "b", "3.11")
    with pytest.raises(BundleError, match="parts from two different bundles"):
        assemble(tmp_path / "stage", [one / "transfer-01", two / "transfer-02"])
    with pytest.raises(BundleError, match="--manifest-sha256"):
        assemble(tmp_path / "stage", [one / "transfer-01"], "0" * 64)
    other_lock = tmp_path / "other.lock"
    other_lock.write_text("version = 1\n")
    with pytest.raises(BundleError, match="rebuild the bundle from this checkout"):
        assemble(tmp_path / "stage", [one / "transfer-01"], lock=other_lock)
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
    assert bundle_parts._print_assemble(assemble(stage, sorted(out.glob("transfer-*"))), stage) == 0
    code = "import sys; sys.path[:0] = sys.argv[1:3]; from bundle import parts; sys.exit(parts.main(sys.argv[3:]))"
    cmd = [python, "-c", code, str(GPU), str(ROOT), "install", "--stage", str(stage), "--target"]
    failed = subprocess.run([*cmd, str(tmp_path / "site")], capture_output=True, text=True)
    assert failed.returncode == 2 and "fakesmall 1.0 requires no-such-dist-zz" in failed.stderr
    (tmp_path / "other").mkdir()
    foreign = subprocess.run([*cmd, str(tmp_path / "other")], capture_output=True, text=True)
    assert foreign.returncode == 2 and "holds no install of this bundle" in foreign.stderr


def test_install_refuses_a_bundle_for_another_interpreter(tmp_path: Path) -> None:
    out = make_bundle(tmp_path, "3.9")
    stage = tmp_path / "stage"
    assemble(stage, sorted(out.glob("transfer-*")))
    with pytest.raises(BundleError, match=r"the bundle is for 3\.9"):
        install(stage, tmp_path / "site")
    assert not (tmp_path / "site").exists()
