"""Both sides of a change as :class:`matrix.affected.TreeState`: a commit, or the working tree."""

from __future__ import annotations

from pathlib import Path

from foundation.inputs import git_blob_id
from matrix.affected import TreeState, touches_fingerprint
from matrix.gitfacts import (
    GitQueryError,
    changed_paths,
    parse_rev,
    read_blobs,
    runtime_fingerprint,
    tree_blobs,
)
from matrix.inputs import locked_versions
from matrix.model import MatrixInputError


def commit_state(repo: Path, rev: str, display: str = "--since") -> TreeState:
    """The tree of ``rev`` (a commit in HEAD's history); an unknown one is an input error naming it."""
    full = parse_rev(repo, rev)
    if full is None:
        raise MatrixInputError(
            display, rev, "not a commit in HEAD's history (git log shows the ones allowed)"
        )
    blobs = tree_blobs(repo, full)
    lock = read_blobs(repo, [blobs["uv.lock"]])[blobs["uv.lock"]].decode() if "uv.lock" in blobs else ""
    return TreeState(blobs, locked_versions(lock) if lock else {}, runtime_fingerprint(repo, full))


def worktree_state(repo: Path) -> TreeState:
    """HEAD with the working tree's uncommitted changes to tracked files on top (a deleted file is gone);
    its fingerprint differs from HEAD's exactly when a change touches the fingerprint's paths."""
    head = commit_state(repo, "HEAD")
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
    lock_path = repo / "uv.lock"
    locked = locked_versions(lock_path.read_text()) if lock_path.is_file() else {}
    moved = touches_fingerprint(changed)
    return TreeState(blobs, locked, head.fingerprint if moved is None else f"{head.fingerprint}+worktree")
