"""Wheel file names and platform tags, sha256 digests, and verified copies: what the bundle tools share
on both hosts. Standard library and the checkout's ``foundation`` only, Python >= 3.11."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from soakbench.foundation.atomic import write_atomic

WHEEL_RE = re.compile(
    r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-(?P<build>\d[^-]*))?-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$"
)
LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


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


def copy_verified(src: Path, dst: Path, sha256: str) -> bool:
    """Copy ``src`` to ``dst`` atomically, only if its sha256 is ``sha256`` (parts are at most a few tens
    of MiB, so they are checked in memory before anything is written)."""
    data = src.read_bytes()
    if sha256_bytes(data) != sha256:
        return False
    write_atomic(dst, data)
    return True
