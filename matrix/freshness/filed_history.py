"""What git history says about filed evidence: the commits that wrote each file under ``matrix/evidence/``.

Evidence is written once: ``matrix ingest`` adds a file and nothing changes it after. Git already keeps
who wrote what and when, so the matrix reads that record rather than trusting a digest a later hand could
recompute. A shallow clone cuts history: a file whose earliest visible commit is a boundary commit may
have been written before it, so its record cannot be read there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from soakbench.matrix.freshness.gitfacts import git_output

EVIDENCE_ROOT = "matrix/evidence/"
_RECORD = "\x00commit "


@dataclass(frozen=True)
class FiledHistory:
    """``writes``: per path under the evidence root, the commits (oldest first) that added or modified
    it; ``boundary``: the commits a shallow clone's history stops at (empty for a full clone)."""

    writes: Mapping[str, tuple[str, ...]]
    boundary: frozenset[str]


def parse_log(text: str) -> dict[str, tuple[str, ...]]:
    """``git log --reverse --format=%x00commit %H --name-status --no-renames`` -> path -> writing commits
    (pure). Deletions are not writes; a path added again after one is a second write."""
    writes: dict[str, list[str]] = {}
    commit = ""
    for line in text.splitlines():
        if line.startswith(_RECORD):
            commit = line[len(_RECORD) :].strip()
            continue
        status, _, path = line.partition("\t")
        if path and status[:1] in ("A", "M", "T"):
            writes.setdefault(path, []).append(commit)
    return {path: tuple(commits) for path, commits in writes.items()}


@cache
def _history_cached(repo: str, head: str) -> FiledHistory:
    root = Path(repo)
    log = git_output(
        root,
        "log",
        "--reverse",
        "--format=%x00commit %H",
        "--name-status",
        "--no-renames",
        head,
        "--",
        EVIDENCE_ROOT,
    )
    # a shallow clone lists the commits its history stops at in this file; a full clone has none
    shallow = root / git_output(root, "rev-parse", "--git-path", "shallow").strip()
    boundary = frozenset(shallow.read_text().split()) if shallow.is_file() else frozenset()
    return FiledHistory(parse_log(log), boundary)


def filed_history(repo: Path, head: str) -> FiledHistory:
    """The writes of every evidence file in ``head``'s history (read once per HEAD)."""
    return _history_cached(str(repo.resolve()), head)
