"""Cut a folder of verified wheels into transfer-sized parts and write the manifest that describes
them. Standard library only, Python >= 3.11."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bundle.files import BundleError, sha256_bytes, sha256_file, wheel_glibc
from bundle.manifest import FORMAT, MANIFEST
from soakbench.foundation.atomic import write_atomic


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
        write_atomic(folder / piece["file"], data)


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
        write_atomic(out / f"transfer-{t:02d}" / MANIFEST, text)
    write_atomic(out / MANIFEST, text)
    return manifest
