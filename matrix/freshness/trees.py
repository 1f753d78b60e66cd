"""Both sides of a change as :class:`matrix.freshness.affected.TreeState`: a commit, or the working tree, with the
fingerprint over this runtime's paths or a project's own input roots."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from soakbench.foundation.inputs import git_blob_id
from soakbench.matrix.freshness.affected import TreeState, touches_fingerprint
from soakbench.matrix.freshness.gitfacts import (
    FINGERPRINT_PATHS,
    GitQueryError,
    changed_paths,
    parse_rev,
    tree_blobs,
    tree_fingerprint,
)
from soakbench.matrix.freshness.head import TEXT_FILES, commit_texts, inputs_of
from soakbench.matrix.model import MatrixInputError


def commit_state(
    repo: Path, rev: str, display: str = "--since", paths: Sequence[str] = FINGERPRINT_PATHS
) -> TreeState:
    """The tree of ``rev`` (a commit in HEAD's history), its fingerprint over ``paths`` (this runtime's, or
    a project's own input roots); an unknown one is an input error naming it."""
    full = parse_rev(repo, rev)
    if full is None:
        raise MatrixInputError(
            display, rev, "not a commit in HEAD's history (git log shows the ones allowed)"
        )
    blobs = tree_blobs(repo, full)
    fingerprint = tree_fingerprint(repo, full, tuple(paths))
    return TreeState(inputs_of(blobs, commit_texts(repo, blobs)), fingerprint, tuple(paths))


def worktree_state(repo: Path, paths: Sequence[str] = FINGERPRINT_PATHS) -> TreeState:
    """HEAD with the working tree's uncommitted changes to tracked files on top (a deleted file is gone);
    its fingerprint differs from HEAD's exactly when a change touches the fingerprint's ``paths``."""
    head = commit_state(repo, "HEAD", paths=paths)
    blobs = dict(head.blobs)
    changed = changed_paths(repo, "HEAD", None)
    for rel in changed:
        path = repo / rel
        try:
            blobs[rel] = git_blob_id(path.read_bytes())
        except FileNotFoundError:
            blobs.pop(rel, None)
        except OSError as exc:
            raise GitQueryError(f"cannot read the working tree's {rel}: {exc}") from None
    texts = {p: (repo / p).read_text(encoding="utf-8") for p in TEXT_FILES if (repo / p).is_file()}
    moved = touches_fingerprint(changed, head.paths)
    fingerprint = head.fingerprint if moved is None else f"{head.fingerprint}+worktree"
    return TreeState(inputs_of(blobs, texts), fingerprint, head.paths)
