"""Git queries for freshness: the runtime fingerprint at a commit, and whether a commit is in history.

The runtime fingerprint is ``sha256:<hex>`` over ``"<path> <object id>\\n"`` for each runtime-relevant
path at a commit (``-`` when absent). It is a function of committed trees only, so committing evidence
under ``matrix/`` or outputs under ``docs/``/``reports/`` never changes it.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from functools import cache
from pathlib import Path

FINGERPRINT_PATHS: tuple[str, ...] = ("runtime", "harness", "foundation", "pyproject.toml", "uv.lock")
_COMMIT_RE = re.compile(r"^[0-9a-f]{7,64}$")


class GitQueryError(RuntimeError):
    """git could not answer (not a repository, git missing); the message names the command."""


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitQueryError(f"git {' '.join(args)}: {exc}") from exc


def head_commit(repo: Path) -> str:
    """Full id of HEAD."""
    done = _git(repo, "rev-parse", "--verify", "HEAD^{commit}")
    if done.returncode != 0:
        raise GitQueryError(f"{repo} has no HEAD commit: {done.stderr.strip()}")
    return done.stdout.strip()


def resolve_commit(repo: Path, commit: str) -> str | None:
    """Full id of ``commit`` when it names a commit in HEAD's history; None otherwise."""
    if not _COMMIT_RE.match(commit):
        return None
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    if done.returncode != 0:
        return None
    full = done.stdout.strip()
    ancestor = _git(repo, "merge-base", "--is-ancestor", full, "HEAD")
    return full if ancestor.returncode == 0 else None


@cache
def _fingerprint_cached(repo: str, commit: str) -> str:
    done = _git(Path(repo), "ls-tree", "--full-tree", commit, "--", *FINGERPRINT_PATHS)
    if done.returncode != 0:
        raise GitQueryError(f"git ls-tree {commit}: {done.stderr.strip()}")
    ids: dict[str, str] = {}
    for line in done.stdout.splitlines():
        meta, _, path = line.partition("\t")
        ids[path] = meta.split()[2]
    text = "".join(f"{path} {ids.get(path, '-')}\n" for path in FINGERPRINT_PATHS)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def runtime_fingerprint(repo: Path, commit: str) -> str:
    """The runtime fingerprint of ``commit`` (a full commit id) in ``repo``."""
    return _fingerprint_cached(str(repo.resolve()), commit)


def commits_since(repo: Path, commit: str) -> int:
    """How many commits HEAD is ahead of ``commit`` (0 for HEAD itself): how old evidence is in history."""
    done = _git(repo, "rev-list", "--count", f"{commit}..HEAD")
    if done.returncode != 0:
        raise GitQueryError(f"git rev-list --count {commit}..HEAD: {done.stderr.strip()}")
    return int(done.stdout.strip())


def repo_root(start: Path) -> Path:
    """Top level of the git work tree containing ``start``."""
    done = _git(start, "rev-parse", "--show-toplevel")
    if done.returncode != 0:
        raise GitQueryError(f"{start} is not inside a git work tree: {done.stderr.strip()}")
    return Path(done.stdout.strip())
