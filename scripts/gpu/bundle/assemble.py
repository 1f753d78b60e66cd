"""On the GPU host: stage the verified parts that arrived, in whatever transfers, and once all are
there join and verify each wheel. Standard library only, Python >= 3.11."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bundle.files import BundleError, copy_verified, sha256_bytes, sha256_file
from bundle.manifest import MANIFEST, PART_RE, Manifest, Part, Wheel, check_lock, load_manifests
from soakbench.foundation.atomic import write_atomic


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


def _open_stage(stage: Path, folders: Sequence[Path], expected: str | None, lock: Path | None) -> Manifest:
    for folder in folders:
        if not folder.is_dir():
            raise BundleError(f"{folder}: no such folder")
    if stage.exists() and not stage.is_dir():
        raise BundleError(f"--stage {stage}: exists and is not a folder")
    manifest = load_manifests(stage, folders, expected)
    check_lock(manifest, lock)
    stage.mkdir(parents=True, exist_ok=True)
    if not (stage / MANIFEST).is_file():
        source = next(f / MANIFEST for f in folders if (f / MANIFEST).is_file())
        write_atomic(stage / MANIFEST, source.read_bytes())
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
        elif path.stat().st_size == known.size and copy_verified(path, stage / path.name, known.sha256):
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
    joined = b"".join((stage / name).read_bytes() for name in wheel.parts)  # a wheel is < 200 MiB
    digest = sha256_bytes(joined)
    if digest != wheel.sha256:
        return f"{wheel.filename}: joined sha256 {digest}, the manifest records {wheel.sha256}"
    write_atomic(dst, joined)
    return True


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
