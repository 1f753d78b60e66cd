"""On the GPU host: check the interpreter and host against the manifest, install the joined wheels
offline, and prove they import from the install. Standard library only, Python >= 3.11."""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

from bundle.files import BundleError, normalize, sha256_file
from bundle.manifest import Manifest, check_lock, load_manifests

STAMP = ".soakbench-bundle.json"


def host_problems(manifest: Manifest) -> list[str]:
    """Why this interpreter and host cannot use the bundle (empty when they can)."""
    problems = []
    want = tuple(int(x) for x in manifest.python_version.split(".")[:2])
    if sys.version_info[:2] != want:
        problems.append(
            f"this interpreter is Python {sys.version_info[0]}.{sys.version_info[1]} ({sys.executable}); "
            f"the bundle is for {manifest.python_version}"
        )
    if sys.implementation.name != "cpython":
        problems.append(f"this interpreter is {sys.implementation.name}; the bundle is for CPython")
    machine = str(manifest.raw["target"].get("machine", "x86_64"))
    if platform.machine() != machine:
        problems.append(f"this host is {platform.machine()}; the bundle is for {machine}")
    need = tuple(int(x) for x in str(manifest.raw.get("requires_glibc", "0.0")).split("."))
    libc = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names else None
    match = re.fullmatch(r"glibc (\d+)\.(\d+).*", libc or "")
    if match is None:
        problems.append(f"cannot read this host's glibc version ({libc!r}); the bundle needs glibc")
    elif (int(match.group(1)), int(match.group(2))) < need:
        problems.append(f"this host has {libc}; the bundle needs glibc >= {need[0]}.{need[1]}")
    return problems


def _pip_env(extra_path: Path | None = None) -> dict[str, str]:
    """The environment without pip settings of the host (no index, no find-links, no config)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def _installed_ok(target: Path, manifest: Manifest) -> bool:
    stamp = target / STAMP
    if not stamp.is_file():
        return False
    try:
        data = json.loads(stamp.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and data.get("manifest_sha256") == manifest.sha256


def install(stage: Path, target: Path, lock: Path | None = None) -> list[str]:
    """Install the joined wheels into ``target`` (once); returns lines to print."""
    manifest = load_manifests(stage, [], None)
    check_lock(manifest, lock)
    problems = host_problems(manifest)
    if problems:
        raise BundleError("this host cannot use the bundle:\n  " + "\n  ".join(problems))
    wheels = []
    for wheel in manifest.wheels:
        path = stage / "wheels" / wheel.filename
        if not (path.is_file() and path.stat().st_size == wheel.size and sha256_file(path) == wheel.sha256):
            raise BundleError(f"{path}: missing or corrupt; run the assemble step again")
        wheels.append(path)
    lines: list[str] = []
    if target.exists():
        if not _installed_ok(target, manifest):
            raise BundleError(
                f"--target {target}: exists but holds no install of this bundle ({STAMP} missing or for "
                "another manifest); remove it or choose another folder"
            )
        lines.append(f"already installed from this bundle: {target}")
    else:
        if importlib.util.find_spec("pip") is None:
            raise BundleError(f"{sys.executable} has no pip module; the install needs pip")
        tmp = target.with_name(f".{target.name}.partial-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [
            sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir",
            "--disable-pip-version-check", "--no-warn-script-location", "--target", str(tmp),
            *(str(w) for w in wheels),
        ]  # fmt: skip
        done = subprocess.run(cmd, env=_pip_env(), capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise BundleError(
                f"pip install failed (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
        stamp = {"manifest_sha256": manifest.sha256, "wheels": [w.filename for w in manifest.wheels]}
        (tmp / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(tmp, target)
        lines.append(f"installed {len(wheels)} wheels into {target}")
    lines += verify_install(target, manifest)
    return lines


def verify_install(target: Path, manifest: Manifest) -> list[str]:
    """Import every bundled top-level module and run pip check, with ``target`` first on sys.path."""
    modules = sorted({m for w in manifest.wheels for m in w.imports})
    code = (
        "import importlib, os, sys\n"
        "root = os.path.realpath(sys.argv[1])\n"
        "bad = []\n"
        "for name in sys.argv[2:]:\n"
        "    try:\n"
        "        mod = importlib.import_module(name)\n"
        "    except Exception as exc:\n"
        "        bad.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "        continue\n"
        "    where = getattr(mod, '__file__', None) or next(iter(getattr(mod, '__path__', [])), '')\n"
        "    if not os.path.realpath(where).startswith(root + os.sep):\n"
        "        bad.append(f'{name}: imported from {where}, not from the bundle')\n"
        "print('\\n'.join(bad))\n"
        "sys.exit(1 if bad else 0)\n"
    )
    env = _pip_env(target)
    done = subprocess.run(
        [sys.executable, "-c", code, str(target), *modules], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise BundleError(
            f"bundled modules fail to import from {target}:\n{done.stdout}{done.stderr[-3000:]}"
        )
    lines = [f"imported {len(modules)} bundled modules from {target}: {', '.join(modules)}"]
    check = subprocess.run(
        [sys.executable, "-m", "pip", "check", "--disable-pip-version-check"],
        env=env,
        capture_output=True,
        text=True,
    )
    bundled = {normalize(w.name) for w in manifest.wheels}
    ours: list[str] = []
    for line in check.stdout.splitlines():
        if normalize(line.split(" ", 1)[0]) in bundled:
            ours.append(line)
        elif line.strip() and not line.startswith("No broken requirements"):
            lines.append(f"pip check, about a host package (not fatal): {line}")
    if ours:
        raise BundleError("bundled packages have unmet requirements on this host:\n  " + "\n  ".join(ours))
    lines.append("pip check: every bundled package's requirements are met")
    return lines
