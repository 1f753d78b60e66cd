"""An evidence input manifest and its freshness at HEAD (pure: blob ids and locked versions come in as data).

Evidence is fresh when every file it recorded has the same git blob id at HEAD and every distribution it
recorded is locked at the same version at HEAD. A distribution HEAD's lock does not name (the project's
own, or one installed outside the lock) is not judged, and :func:`describe_changes` never lists it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion

from soakbench.matrix.freshness.lock import versions_of
from soakbench.matrix.model import InputManifest, under_roots

MANIFEST_VERSION = 1
ADDED = "-"  # the recorded blob of a file that did not exist then (added under a derived manifest's roots)


@dataclass(frozen=True, order=True)
class InputChange:
    """One input that differs at HEAD: ``what`` is ``file`` or ``distribution``; ``now`` is None when
    the file is gone at HEAD."""

    what: str
    name: str
    recorded: str
    now: str | None

    def sentence(self, since: str) -> str:
        """``runtime/learners/sac.py changed since 43e1c9f`` (or ``removed``; a distribution names both
        versions)."""
        if self.what == "distribution":
            return f"{self.name} {self.recorded} -> {self.now} in the lock since {since}"
        if self.what == "interpreter":
            return f"Python {self.recorded} no longer runs it: {self.now} since {since}"
        if self.recorded == ADDED:
            return f"{self.name} added since {since}"
        return f"{self.name} {'changed' if self.now is not None else 'removed'} since {since}"


def parse_manifest(doc: Any) -> tuple[InputManifest | None, str | None]:
    """(manifest, None), or (None, why) when ``doc`` is absent or not a usable manifest (the schema
    checks its shape; this checks what a reader relies on)."""
    if doc is None:
        return None, "no input manifest"
    if not isinstance(doc, Mapping) or doc.get("manifest_version") != MANIFEST_VERSION:
        return None, f"input manifest is not version {MANIFEST_VERSION}"
    files, dists = doc.get("files"), doc.get("distributions")
    if not isinstance(files, Mapping) or not files or not isinstance(dists, Mapping):
        return None, "input manifest has no files"
    roles = tuple(sorted({str(p.get("role")) for p in doc.get("processes") or [] if isinstance(p, Mapping)}))
    interpreter = doc.get("interpreter") if isinstance(doc.get("interpreter"), str) else None
    recorded = doc.get("recorded")
    kinds = (
        frozenset(str(k) for k in recorded)
        if isinstance(recorded, list)
        else frozenset({"files", "distributions"})
    )
    return InputManifest(dict(files), dict(dists), roles, interpreter=interpreter, recorded=kinds), None


def interpreter_change(
    recorded: str | None, requires_python: str | None, pin: str | None
) -> InputChange | None:
    """The interpreter as a changed input (pure): HEAD's ``requires-python`` no longer admits the Python
    the evidence ran on, or HEAD's ``.python-version`` pins another one (uv would run another Python and
    resolve other versions). None when it still holds, or when the evidence did not record it."""
    if recorded is None:
        return None
    if pin is not None and not (recorded == pin or recorded.startswith(pin + ".")):
        return InputChange("interpreter", "python", recorded, f".python-version {pin}")
    try:
        admitted = requires_python is None or SpecifierSet(requires_python).contains(
            recorded, prereleases=True
        )
    except InvalidVersion:  # a recorded interpreter that is no version cannot be shown to still run it
        admitted = False
    if not admitted:
        return InputChange("interpreter", "python", recorded, f"requires-python {requires_python}")
    return None


def changed_inputs(
    manifest: InputManifest,
    head_blobs: Mapping[str, str],
    head_locked: Mapping[str, str],
    interpreter: InputChange | None = None,
) -> tuple[InputChange, ...]:
    """Every recorded input that differs at HEAD, sorted (files first). ``head_blobs`` holds HEAD's blob
    id of each recorded path that exists there (and, for a manifest derived from input roots, of every
    file under them: one the manifest lacks was added since, recorded as ``-``); ``head_locked`` HEAD's
    locked versions."""
    out = [
        InputChange("file", path, blob, head_blobs.get(path))
        for path, blob in manifest.files.items()
        if head_blobs.get(path) != blob
    ]
    out += [  # a manifest derived from input roots: a file added under them since is a change too
        InputChange("file", path, ADDED, blob)
        for path, blob in head_blobs.items()
        if path not in manifest.files and under_roots(path, manifest.roots)
    ]
    out += [
        InputChange("distribution", name, version, head_locked[name])
        for name, version in manifest.distributions.items()
        if name in head_locked and not versions_of(version) <= versions_of(head_locked[name])
    ]
    out += [interpreter] if interpreter is not None else []
    return tuple(sorted(out, key=lambda c: (c.what != "file", c.name)))


def describe_changes(changes: tuple[InputChange, ...], since: str, limit: int = 3) -> str:
    """The first ``limit`` changes as one clause, then how many more: what made the evidence historical."""
    said = [c.sentence(since) for c in changes[:limit]]
    more = len(changes) - len(said)
    return "; ".join(said) + (f"; and {more} more input{'s' if more > 1 else ''}" if more > 0 else "")
