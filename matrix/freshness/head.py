"""HEAD's side of per-input freshness, and the judgement of evidence against it (``judge_inputs`` pure).

HEAD holds every committed file's blob id, the lock, and what picks the interpreter: ``requires-python``
in ``pyproject.toml`` and ``.python-version``. Locked versions are compared for the interpreter the
evidence recorded: a forked resolution pins one name at several versions, one per range of Pythons, and
only the version that Python runs is the evidence's input.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from soakbench.matrix.freshness.gitfacts import head_commit, read_blobs, tree_blobs
from soakbench.matrix.freshness.lock import locked_versions
from soakbench.matrix.freshness.manifest import (
    InputChange,
    changed_inputs,
    describe_changes,
    interpreter_change,
)
from soakbench.matrix.model import Binding, EvidenceFacts, InputManifest, MatrixInputError

PYTHON_PIN = ".python-version"


@dataclass(frozen=True)
class HeadInputs:
    """HEAD's blob ids, its lock's text and what picks its interpreter (None: no such file or field)."""

    blobs: dict[str, str]
    lock_text: str = ""
    requires_python: str | None = None
    python_pin: str | None = None
    _locked: dict[str | None, dict[str, str]] = field(default_factory=dict, compare=False, repr=False)

    def locked_for(self, python: str | None) -> dict[str, str]:
        """The lock's versions for interpreter ``python`` (every Python's when None), computed once."""
        if python not in self._locked:
            self._locked[python] = locked_versions(self.lock_text, python) if self.lock_text else {}
        return self._locked[python]

    def changes(self, manifest: InputManifest) -> tuple[InputChange, ...]:
        """Every input of ``manifest`` that differs at HEAD (pure)."""
        python = interpreter_change(manifest.interpreter, self.requires_python, self.python_pin)
        return changed_inputs(manifest, self.blobs, self.locked_for(manifest.interpreter), python)


#: The files whose text HEAD's side needs beyond blob ids: the lock, and what picks the interpreter.
TEXT_FILES = ("uv.lock", "pyproject.toml", PYTHON_PIN)


def inputs_of(blobs: dict[str, str], texts: dict[str, str]) -> HeadInputs:
    """A tree's side of freshness from its blob ids and the text of its ``TEXT_FILES`` (pure; a file
    absent from ``texts`` is absent from the tree)."""
    try:
        project = tomllib.loads(texts.get("pyproject.toml", "")).get("project", {})
    except tomllib.TOMLDecodeError:
        project = {}
    requires = project.get("requires-python") if isinstance(project, dict) else None
    if isinstance(requires, str):
        try:
            SpecifierSet(requires)
        except InvalidSpecifier:
            raise MatrixInputError(
                "pyproject.toml",
                "project.requires-python",
                f"{requires!r} is not a version specifier (PEP 440)",
            ) from None
    pin = texts.get(PYTHON_PIN, "").strip() or None
    return HeadInputs(blobs, texts.get("uv.lock", ""), requires if isinstance(requires, str) else None, pin)


def commit_texts(repo: Path, blobs: dict[str, str]) -> dict[str, str]:
    """The text of the ``TEXT_FILES`` a committed tree holds (one ``git cat-file`` call)."""
    present = [p for p in TEXT_FILES if p in blobs]
    data = read_blobs(repo, [blobs[p] for p in present])
    return {p: data[blobs[p]].decode("utf-8", errors="replace") for p in present}


@cache
def _head_inputs(repo: str, head: str) -> HeadInputs:
    blobs = tree_blobs(Path(repo), head)
    return inputs_of(blobs, commit_texts(Path(repo), blobs))


def head_inputs(repo: Path) -> HeadInputs:
    """HEAD's blob ids, lock and interpreter choice (read once per HEAD)."""
    return _head_inputs(str(repo.resolve()), head_commit(repo))


def judge_inputs(
    facts: EvidenceFacts, head: HeadInputs, since: str, fingerprint_fresh: bool
) -> EvidenceFacts:
    """Freshness from the manifest(s) (pure): fresh while every recorded input is unchanged at HEAD; a
    JUnit summary is judged per bound cell (a cell without a manifest by the runtime fingerprint)."""
    if facts.inputs is not None:
        changes = head.changes(facts.inputs)
        stale: dict[Binding | None, str] = {None: describe_changes(changes, since)} if changes else {}
        return replace(facts, fresh=not changes, stale=stale)
    stale = {}
    for binding, manifest in facts.cell_inputs.items():
        if changes := head.changes(manifest):
            stale[binding] = describe_changes(changes, since)
    if not fingerprint_fresh:
        stale[None] = f"runtime fingerprint at {since} differs from HEAD's (cells without an input manifest)"
    unmanifested = any(b not in facts.cell_inputs for b in facts.tests)
    fresh = any(b not in stale for b in facts.cell_inputs) or (unmanifested and fingerprint_fresh)
    return replace(facts, fresh=fresh, stale=stale)
