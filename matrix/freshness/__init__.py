"""Freshness: what each piece of evidence depends on (input manifests, a project's import closure, the
lock's pins), what git says about it (commits, trees, the fingerprint over the paths that judge evidence
without a manifest), and which cells a change stales (``matrix affected``, ``matrix stale``).

Pure where it can be (manifests, closures, what a change stales); git is asked in ``gitfacts`` and
``trees``. May import: foundation, matrix.model, matrix.freshness.
"""

from soakbench.matrix.freshness.affected import affected_cells, stale_cells
from soakbench.matrix.freshness.closure import import_closure
from soakbench.matrix.freshness.gitfacts import (
    FINGERPRINT_PATHS,
    GitQueryError,
    commit_reader,
    commits_since,
    head_commit,
    read_blobs,
    repo_root,
    resolve_commit,
    tree_blobs,
    tree_fingerprint,
)
from soakbench.matrix.freshness.head import HeadInputs, head_inputs, judge_inputs
from soakbench.matrix.freshness.junit_inputs import junit_manifest
from soakbench.matrix.freshness.lock import locked_versions
from soakbench.matrix.freshness.manifest import changed_inputs, describe_changes, parse_manifest
from soakbench.matrix.freshness.trees import commit_state, worktree_state

__all__ = [
    "FINGERPRINT_PATHS",
    "GitQueryError",
    "HeadInputs",
    "affected_cells",
    "changed_inputs",
    "commit_reader",
    "commit_state",
    "commits_since",
    "describe_changes",
    "head_commit",
    "head_inputs",
    "import_closure",
    "judge_inputs",
    "junit_manifest",
    "locked_versions",
    "parse_manifest",
    "read_blobs",
    "repo_root",
    "resolve_commit",
    "stale_cells",
    "tree_blobs",
    "tree_fingerprint",
    "worktree_state",
]
