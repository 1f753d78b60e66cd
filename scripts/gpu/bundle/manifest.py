"""The bundle's MANIFEST.json: its parsed form, the checks that every copy of it agrees, and that it
was made from the checkout's own lock. Standard library only, Python >= 3.11."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle.files import BundleError, parse_wheel_name, sha256_bytes, sha256_file

FORMAT = "soakbench-gpu-bundle/1"
MANIFEST = "MANIFEST.json"

PART_RE = re.compile(r"^(?P<wheel>.+\.whl)\.part-(?P<index>\d+)-of-(?P<count>\d+)$")


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


def load_manifests(stage: Path, folders: Sequence[Path], expected: str | None) -> Manifest:
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
