"""Split a folder of verified wheels into transfer-sized parts, and on the GPU host verify, join and
install them (used by bundle.sh and device_install.sh). Standard library only, Python >= 3.11.

  split    --wheels DIR --wheels-json FILE --out DIR --part-bytes N [--target-json JSON] [--lock-sha256 HEX]
           -> DIR/transfer-NN/ (each <= N bytes of parts plus a copy of MANIFEST.json), DIR/MANIFEST.json
  assemble --stage DIR [--manifest-sha256 HEX] [FOLDER ...]
           -> copies every verified part found in the FOLDERs into the stage, then joins and verifies
              each wheel into DIR/wheels/; exit 0 when all wheels are there, 3 when parts are missing
              (they are named, by transfer), 2 on anything wrong (corrupt parts are named)
  install  --stage DIR --target DIR
           -> checks this interpreter and host against the manifest, installs the joined wheels with
              pip --no-index --no-deps --target (into a temporary folder renamed at the end), then
              imports every bundled module and runs pip check with DIR on PYTHONPATH

Every command is idempotent: verified parts, joined wheels and a completed install are kept and
re-verified, never rewritten. Nothing is left half-written: files are written under a temporary name
and renamed into place only after their sha256 matches.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = "soakbench-gpu-bundle/1"
MANIFEST = "MANIFEST.json"
STAMP = ".soakbench-bundle.json"
PART_RE = re.compile(r"^(?P<wheel>.+\.whl)\.part-(?P<index>\d+)-of-(?P<count>\d+)$")
WHEEL_RE = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$"
)
LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
EXIT_MISSING = 3


class BundleError(Exception):
    """A problem with the inputs; the message names the file, part or setting."""


def normalize(name: str) -> str:
    """PEP 503 name normalization."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class WheelName:
    name: str
    version: str
    python_tags: tuple[str, ...]
    abi_tags: tuple[str, ...]
    platform_tags: tuple[str, ...]


def parse_wheel_name(filename: str) -> WheelName:
    match = WHEEL_RE.match(filename)
    if match is None:
        raise BundleError(f"{filename}: not a wheel file name")
    return WheelName(
        name=normalize(match.group("name")),
        version=match.group("version"),
        python_tags=tuple(match.group("py").split(".")),
        abi_tags=tuple(match.group("abi").split(".")),
        platform_tags=tuple(match.group("plat").split(".")),
    )


def platform_glibc(tag: str) -> tuple[int, int] | None:
    """The glibc a platform tag needs: (0, 0) for ``any``, None for a tag that is not manylinux."""
    if tag == "any":
        return (0, 0)
    legacy = re.fullmatch(r"(manylinux1|manylinux2010|manylinux2014)_.+", tag)
    if legacy:
        return LEGACY_MANYLINUX[legacy.group(1)]
    modern = re.fullmatch(r"manylinux_(\d+)_(\d+)_.+", tag)
    if modern:
        return int(modern.group(1)), int(modern.group(2))
    return None


def wheel_glibc(filename: str) -> tuple[int, int]:
    """The lowest glibc any of the wheel's (compressed) platform tags accepts."""
    needs = [
        g for g in (platform_glibc(t) for t in parse_wheel_name(filename).platform_tags) if g is not None
    ]
    if not needs:
        raise BundleError(f"{filename}: no manylinux or 'any' platform tag")
    return min(needs)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary name, renamed into place."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _copy_verified(src: Path, dst: Path, sha256: str) -> bool:
    """Copy ``src`` to ``dst`` through a temporary name; keep it only if its sha256 is ``sha256``."""
    tmp = dst.with_name(f".{dst.name}.tmp-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with src.open("rb") as fin, tmp.open("wb") as fout:
            for block in iter(lambda: fin.read(1 << 20), b""):
                digest.update(block)
                fout.write(block)
            fout.flush()
            os.fsync(fout.fileno())
        if digest.hexdigest() != sha256:
            return False
        os.replace(tmp, dst)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def top_level_modules(path: Path) -> list[str]:
    """The importable top-level names a wheel installs (packages, modules, extension modules)."""
    names: set[str] = set()
    with zipfile.ZipFile(path) as zf:
        for entry in zf.namelist():
            head, _, rest = entry.partition("/")
            if head.endswith((".dist-info", ".data", ".libs")) or head.startswith(("_", ".")):
                continue
            if rest:
                if rest == "__init__.py":
                    names.add(head)
            elif head.endswith(".py"):
                names.add(head[:-3])
            elif head.endswith(".so"):
                names.add(head.split(".", 1)[0])
    return sorted(n for n in names if n.isidentifier())


# ---- split --------------------------------------------------------------------------------------


def _check_inputs(wheels_dir: Path, wheels: Sequence[dict[str, Any]], out: Path, part_bytes: int) -> None:
    if part_bytes < 1 << 20:
        raise BundleError(f"--part-bytes {part_bytes}: must be at least 1 MiB")
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"{out}: exists and is not empty")
    if not wheels:
        raise BundleError("no wheels to split")
    for w in wheels:
        path = wheels_dir / w["filename"]
        if not path.is_file():
            raise BundleError(f"{path}: missing")
        if path.stat().st_size != w["size"] or sha256_file(path) != w["sha256"]:
            raise BundleError(f"{path}: does not match its recorded size and sha256")


def cut(ordered: Sequence[dict[str, Any]], part_bytes: int) -> list[dict[str, Any]]:
    """Where each wheel's pieces fall when the wheels are laid end to end in transfers of part_bytes."""
    pieces: list[dict[str, Any]] = []
    transfer, room = 1, part_bytes
    for w in ordered:
        offset, left = 0, int(w["size"])
        spans: list[tuple[int, int, int]] = []
        while left > 0:
            if room == 0:
                transfer, room = transfer + 1, part_bytes
            take = min(left, room)
            spans.append((transfer, offset, take))
            offset, left, room = offset + take, left - take, room - take
        pieces += [
            {
                "file": f"{w['filename']}.part-{index:02d}-of-{len(spans):02d}",
                "wheel": w["filename"],
                "index": index,
                "count": len(spans),
                "offset": off,
                "size": size,
                "transfer": t,
            }
            for index, (t, off, size) in enumerate(spans, 1)
        ]
    return pieces


def _write_pieces(wheels_dir: Path, pieces: list[dict[str, Any]], out: Path) -> None:
    """Write every piece into its transfer folder, recording its sha256 in the piece."""
    for piece in pieces:
        folder = out / f"transfer-{piece['transfer']:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        with (wheels_dir / piece["wheel"]).open("rb") as fh:
            fh.seek(piece["offset"])
            data = fh.read(piece["size"])
        if len(data) != piece["size"]:
            raise BundleError(f"{piece['wheel']}: short read at offset {piece['offset']}")
        piece["sha256"] = sha256_bytes(data)
        _fsync_write(folder / piece["file"], data)


def split(
    wheels_dir: Path,
    wheels: Sequence[dict[str, Any]],
    out: Path,
    part_bytes: int,
    meta: dict[str, Any],
) -> dict[str, Any]:
    """Lay the wheels end to end (largest first) and cut the stream into transfers of at most
    ``part_bytes``: each piece of a wheel inside one transfer is one part file."""
    _check_inputs(wheels_dir, wheels, out, part_bytes)
    ordered = sorted(wheels, key=lambda w: (-int(w["size"]), str(w["filename"])))
    pieces = cut(ordered, part_bytes)
    _write_pieces(wheels_dir, pieces, out)
    wheel_entries = [
        {
            **w,
            "parts": [p["file"] for p in pieces if p["wheel"] == w["filename"]],
            "imports": top_level_modules(wheels_dir / w["filename"]),
            "glibc": "{}.{}".format(*wheel_glibc(w["filename"])),
        }
        for w in ordered
    ]
    requires_glibc = max(wheel_glibc(w["filename"]) for w in ordered)
    transfers = sorted({int(p["transfer"]) for p in pieces})
    manifest = {
        "format": FORMAT,
        **meta,
        "requires_glibc": f"{requires_glibc[0]}.{requires_glibc[1]}",
        "part_bytes": part_bytes,
        "total_bytes": sum(int(w["size"]) for w in ordered),
        "transfers": [
            {
                "folder": f"transfer-{t:02d}",
                "bytes": sum(p["size"] for p in pieces if p["transfer"] == t),
                "parts": [p["file"] for p in pieces if p["transfer"] == t],
            }
            for t in transfers
        ],
        "wheels": wheel_entries,
        "parts": pieces,
    }
    text = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    for t in transfers:
        _fsync_write(out / f"transfer-{t:02d}" / MANIFEST, text)
    _fsync_write(out / MANIFEST, text)
    return manifest


# ---- manifest -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    file: str
    wheel: str
    index: int
    count: int
    size: int
    sha256: str
    transfer: int


@dataclass(frozen=True)
class Wheel:
    filename: str
    name: str
    sha256: str
    size: int
    parts: tuple[str, ...]
    imports: tuple[str, ...]


@dataclass(frozen=True)
class Manifest:
    raw: dict[str, Any]
    sha256: str
    parts: dict[str, Part]
    wheels: list[Wheel]

    @property
    def python_version(self) -> str:
        return str(self.raw["target"]["python_version"])


def _hex(value: object, where: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-f]{64}", value):
        raise BundleError(f"{where}: not a sha256 hex digest: {value!r}")
    return value


def parse_manifest(text: bytes, where: str) -> Manifest:
    try:
        raw = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(f"{where}: not JSON ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise BundleError(f"{where}: not a {FORMAT} manifest")
    try:
        parts: dict[str, Part] = {}
        for p in raw["parts"]:
            part = Part(
                file=str(p["file"]),
                wheel=str(p["wheel"]),
                index=int(p["index"]),
                count=int(p["count"]),
                size=int(p["size"]),
                sha256=_hex(p["sha256"], f"{where}: part {p['file']}"),
                transfer=int(p["transfer"]),
            )
            if not PART_RE.match(part.file) or "/" in part.file or part.file in parts:
                raise BundleError(f"{where}: bad or repeated part name {part.file!r}")
            parts[part.file] = part
        wheels = [
            Wheel(
                filename=str(w["filename"]),
                name=str(w["name"]),
                sha256=_hex(w["sha256"], f"{where}: wheel {w['filename']}"),
                size=int(w["size"]),
                parts=tuple(str(x) for x in w["parts"]),
                imports=tuple(str(x) for x in w["imports"]),
            )
            for w in raw["wheels"]
        ]
        str(raw["target"]["python_version"])
    except (KeyError, TypeError, ValueError) as exc:
        raise BundleError(f"{where}: malformed manifest ({type(exc).__name__}: {exc})") from None
    for w in wheels:
        parse_wheel_name(w.filename)
        if (
            "/" in w.filename
            or not w.parts
            or any(p not in parts or parts[p].wheel != w.filename for p in w.parts)
        ):
            raise BundleError(f"{where}: wheel {w.filename} lists parts the manifest does not describe")
        if sum(parts[p].size for p in w.parts) != w.size:
            raise BundleError(f"{where}: the parts of {w.filename} do not add up to its size")
    return Manifest(raw=raw, sha256=sha256_bytes(text), parts=parts, wheels=wheels)


def _load_manifests(stage: Path, folders: Sequence[Path], expected: str | None) -> Manifest:
    copies: list[tuple[Path, bytes]] = []
    for folder in [stage, *folders]:
        path = folder / MANIFEST
        if path.is_file():
            copies.append((path, path.read_bytes()))
    if not copies:
        where = ", ".join(str(f) for f in [stage, *folders])
        raise BundleError(f"no {MANIFEST} in any of: {where}")
    first_path, first = copies[0]
    for path, data in copies[1:]:
        if data != first:
            raise BundleError(
                f"{path} differs from {first_path} (sha256 {sha256_bytes(data)} vs {sha256_bytes(first)}): "
                "parts from two different bundles"
            )
    manifest = parse_manifest(first, str(first_path))
    if expected is not None and manifest.sha256 != expected:
        raise BundleError(f"{first_path}: sha256 {manifest.sha256}, expected {expected} (--manifest-sha256)")
    return manifest


# ---- assemble -----------------------------------------------------------------------------------


@dataclass
class AssembleReport:
    manifest: Manifest
    staged: list[str]
    missing: list[Part]
    corrupt: list[str]
    notes: list[str]
    joined: list[str]


def _part_ok(path: Path, part: Part) -> bool:
    return path.is_file() and path.stat().st_size == part.size and sha256_file(path) == part.sha256


def check_lock(manifest: Manifest, lock: Path | None) -> None:
    """The bundle must have been made from the very lock of the checkout it is installed for."""
    if lock is None:
        return
    if not lock.is_file():
        raise BundleError(f"--lock {lock}: no such file")
    have, want = sha256_file(lock), manifest.raw.get("lock_sha256")
    if have != want:
        raise BundleError(
            f"the bundle was made from a lock with sha256 {want}, but {lock} has sha256 {have}: "
            "rebuild the bundle from this checkout (scripts/gpu/bundle.sh)"
        )


def _open_stage(stage: Path, folders: Sequence[Path], expected: str | None, lock: Path | None) -> Manifest:
    for folder in folders:
        if not folder.is_dir():
            raise BundleError(f"{folder}: no such folder")
    if stage.exists() and not stage.is_dir():
        raise BundleError(f"--stage {stage}: exists and is not a folder")
    manifest = _load_manifests(stage, folders, expected)
    check_lock(manifest, lock)
    stage.mkdir(parents=True, exist_ok=True)
    if not (stage / MANIFEST).is_file():
        source = next(f / MANIFEST for f in folders if (f / MANIFEST).is_file())
        _fsync_write(stage / MANIFEST, source.read_bytes())
    return manifest


def _reverify_stage(stage: Path, manifest: Manifest, report: AssembleReport) -> set[str]:
    """The staged parts that still verify; a staged copy that no longer does is removed."""
    good: set[str] = set()
    for name, part in manifest.parts.items():
        path = stage / name
        if not path.exists():
            continue
        if _part_ok(path, part):
            good.add(name)
        else:
            path.unlink()
            report.notes.append(f"removed a corrupt staged copy of {name} (transfer {part.transfer})")
    return good


def _collect(
    folder: Path, stage: Path, manifest: Manifest, good: set[str], report: AssembleReport
) -> dict[str, str]:
    """Stage every verified part of ``folder`` not staged yet; returns the corrupt ones (name -> why)."""
    corrupt: dict[str, str] = {}
    for path in sorted(folder.iterdir()):
        if path.name == MANIFEST or path.name.startswith("."):
            continue
        known = manifest.parts.get(path.name)
        if known is None:
            if PART_RE.match(path.name):
                report.corrupt.append(f"{path}: a part this bundle's manifest does not list")
            else:
                report.notes.append(f"ignored {path} (not a part)")
        elif path.name in good:
            if not _part_ok(path, known):
                report.notes.append(f"ignored a corrupt copy {path} (a verified copy is staged)")
        elif path.stat().st_size == known.size and _copy_verified(path, stage / path.name, known.sha256):
            good.add(path.name)
            report.staged.append(path.name)
        else:
            corrupt[path.name] = (
                f"{path}: size {path.stat().st_size} or sha256 does not match the manifest "
                f"(expected {known.size} bytes, sha256 {known.sha256}; transfer {known.transfer})"
            )
    return corrupt


def _join_one(stage: Path, wheel: Wheel) -> bool | str:
    """Join one wheel into stage/wheels: False when already there, True when joined, else why not."""
    dst = stage / "wheels" / wheel.filename
    if dst.is_file() and dst.stat().st_size == wheel.size and sha256_file(dst) == wheel.sha256:
        return False
    tmp = dst.with_name(f".{dst.name}.tmp-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as fout:
            for name in wheel.parts:
                data = (stage / name).read_bytes()
                digest.update(data)
                fout.write(data)
            fout.flush()
            os.fsync(fout.fileno())
        if digest.hexdigest() != wheel.sha256:
            return (
                f"{wheel.filename}: joined sha256 {digest.hexdigest()}, the manifest records {wheel.sha256}"
            )
        os.replace(tmp, dst)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def assemble(
    stage: Path, folders: Sequence[Path], expected_manifest: str | None = None, lock: Path | None = None
) -> AssembleReport:
    """Stage the verified parts found in ``folders``; once all are staged, join and verify the wheels."""
    manifest = _open_stage(stage, folders, expected_manifest, lock)
    report = AssembleReport(manifest, [], [], [], [], [])
    good = _reverify_stage(stage, manifest, report)
    corrupt: dict[str, list[str]] = {}
    for folder in folders:
        if folder.resolve() != stage.resolve():
            for name, why in _collect(folder, stage, manifest, good, report).items():
                corrupt.setdefault(name, []).append(why)
    report.corrupt += [why for name, whys in corrupt.items() if name not in good for why in whys]
    report.missing = [p for n, p in manifest.parts.items() if n not in good and n not in corrupt]
    if report.corrupt or report.missing:
        return report
    (stage / "wheels").mkdir(exist_ok=True)
    for wheel in manifest.wheels:
        outcome = _join_one(stage, wheel)
        if isinstance(outcome, str):
            report.corrupt.append(outcome)
        elif outcome:
            report.joined.append(wheel.filename)
    return report


def _print_assemble(report: AssembleReport, stage: Path) -> int:
    m = report.manifest
    print(f"bundle manifest sha256 {m.sha256}: {len(m.wheels)} wheels in {len(m.parts)} parts")
    for note in report.notes:
        print(f"  note: {note}")
    if report.staged:
        print(f"  staged {len(report.staged)} verified part(s) into {stage}")
    if report.corrupt:
        for line in report.corrupt:
            print(f"  CORRUPT: {line}", file=sys.stderr)
        print("bundle: corrupt parts (above); bring those transfers again", file=sys.stderr)
        return 2
    if report.missing:
        by_transfer: dict[int, list[str]] = {}
        for p in report.missing:
            by_transfer.setdefault(p.transfer, []).append(p.file)
        for t, files in sorted(by_transfer.items()):
            more = f" and {len(files) - 3} more" if len(files) > 3 else ""
            print(f"  missing from transfer-{t:02d}: {len(files)} part(s): {', '.join(files[:3])}{more}")
        return EXIT_MISSING
    joined = f"joined {len(report.joined)}, " if report.joined else ""
    print(f"  all {len(m.wheels)} wheels verified in {stage / 'wheels'} ({joined}sha256 of each checked)")
    return 0


# ---- install ------------------------------------------------------------------------------------


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
    manifest = _load_manifests(stage, [], None)
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


# ---- command line -------------------------------------------------------------------------------


def _paths(values: Iterable[str]) -> list[Path]:
    return [Path(v).absolute() for v in values]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bundle_parts.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("split")
    p.add_argument("--wheels", type=Path, required=True)
    p.add_argument("--wheels-json", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--part-bytes", type=int, required=True)
    p.add_argument("--meta-json", default="{}", help="extra manifest fields (JSON object)")
    p = sub.add_parser("assemble")
    p.add_argument("--stage", type=Path, required=True)
    p.add_argument("--manifest-sha256")
    p.add_argument("--lock", type=Path, help="the checkout's uv.lock: the bundle must come from it")
    p.add_argument("folders", nargs="*")
    p = sub.add_parser("install")
    p.add_argument("--stage", type=Path, required=True)
    p.add_argument("--target", type=Path, required=True)
    p.add_argument("--lock", type=Path, help="the checkout's uv.lock: the bundle must come from it")
    args = parser.parse_args(argv)
    try:
        if args.command == "split":
            meta = json.loads(args.meta_json)
            if not isinstance(meta, dict) or "target" not in meta:
                raise BundleError("--meta-json must be an object with a 'target' entry")
            wheels = json.loads(args.wheels_json.read_text())
            manifest = split(args.wheels, wheels, args.out, args.part_bytes, meta)
            for t in manifest["transfers"]:
                print(
                    f"{t['folder']}: {t['bytes']} bytes ({t['bytes'] / 2**20:.1f} MiB) in {len(t['parts'])} parts"
                )
            return 0
        if args.command == "assemble":
            stage = args.stage.absolute()
            report = assemble(stage, _paths(args.folders), args.manifest_sha256, args.lock)
            return _print_assemble(report, stage)
        for line in install(args.stage.absolute(), args.target.absolute(), args.lock):
            print(line)
        return 0
    except BundleError as exc:
        print(f"bundle: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"bundle: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
