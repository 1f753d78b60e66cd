"""Git queries for freshness: the runtime fingerprint at a commit, and whether a commit is in history.

The runtime fingerprint is ``sha256:<hex>`` over ``"<path> <object id>\\n"`` for each runtime-relevant
path at a commit (``-`` when absent). It is a function of committed trees only, so committing evidence
under ``matrix/`` or outputs under ``docs/``/``reports/`` never changes it.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path

FINGERPRINT_PATHS: tuple[str, ...] = (
    "soakbench",
    "runtime",
    "harness",
    "foundation",
    "pyproject.toml",
    "uv.lock",
)
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


def git_output(repo: Path, *args: str) -> str:
    """What ``git -C repo ARGS`` prints; GitQueryError naming the command when it fails."""
    done = _git(repo, *args)
    if done.returncode != 0:
        raise GitQueryError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


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
def _fingerprint_cached(repo: str, commit: str, paths: tuple[str, ...]) -> str:
    listed = [p.rstrip("/") for p in paths]
    done = _git(Path(repo), "ls-tree", "--full-tree", commit, "--", *listed)
    if done.returncode != 0:
        raise GitQueryError(f"git ls-tree {commit}: {done.stderr.strip()}")
    ids: dict[str, str] = {}
    for line in done.stdout.splitlines():
        meta, _, path = line.partition("\t")
        ids[path] = meta.split()[2]
    text = "".join(f"{path} {ids.get(path, '-')}\n" for path in listed)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def tree_fingerprint(repo: Path, commit: str, paths: tuple[str, ...] = FINGERPRINT_PATHS) -> str:
    """The fingerprint of ``commit`` (a full commit id) in ``repo`` over ``paths`` (this runtime's
    :data:`FINGERPRINT_PATHS` by default; a project's own inventory names its input roots)."""
    if not paths:  # a fingerprint over nothing never changes: evidence judged by it would be fresh for ever
        raise ValueError(
            "a fingerprint needs at least one path (a project's inventory declares project.inputs)"
        )
    return _fingerprint_cached(str(repo.resolve()), commit, tuple(paths))


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


@cache
def _tree_cached(repo: str, commit: str) -> dict[str, str]:
    done = _git(Path(repo), "ls-tree", "-r", "--full-tree", commit)
    if done.returncode != 0:
        raise GitQueryError(f"git ls-tree -r {commit}: {done.stderr.strip()}")
    blobs: dict[str, str] = {}
    for line in done.stdout.splitlines():
        meta, _, path = line.partition("\t")
        kind, object_id = meta.split()[1:3]
        if kind == "blob":
            blobs[path] = object_id
    return blobs


def tree_blobs(repo: Path, commit: str) -> dict[str, str]:
    """``{path: blob id}`` of every file committed at ``commit`` (a full id or a name such as HEAD; a name
    is resolved first, so the cache never answers for a commit the name no longer points at)."""
    full = commit if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit) else _resolved(repo, commit)
    return dict(_tree_cached(str(repo.resolve()), full))


def _resolved(repo: Path, name: str) -> str:
    done = _git(repo, "rev-parse", "--verify", f"{name}^{{commit}}")
    if done.returncode != 0:
        raise GitQueryError(f"git rev-parse {name}: {done.stderr.strip()}")
    return done.stdout.strip()


def read_blobs(repo: Path, object_ids: list[str]) -> dict[str, bytes]:
    """The bytes of each blob, in one ``git cat-file --batch`` call."""
    if not object_ids:
        return {}
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "cat-file", "--batch"],
            input=("\n".join(object_ids) + "\n").encode(),
            capture_output=True,
            check=False,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitQueryError(f"git cat-file --batch: {exc}") from exc
    out, data, at = {}, done.stdout, 0
    for object_id in object_ids:
        header_end = data.index(b"\n", at)
        header = data[at:header_end].split()
        if len(header) < 3 or header[1] != b"blob":
            raise GitQueryError(f"git cat-file --batch: {object_id} is not a blob ({header!r})")
        size = int(header[2])
        out[object_id] = data[header_end + 1 : header_end + 1 + size]
        at = header_end + 1 + size + 1
    return out


def commit_reader(
    repo: Path, commit: str, suffixes: tuple[str, ...] = (".py",)
) -> Callable[[str], bytes | None]:
    """A reader of the files committed at ``commit`` (those ending in ``suffixes`` are read in one call up
    front; any other path is read when asked): ``path -> bytes``, None when no such file. One reader per
    commit: grading asks for the same commit once per filed manifest."""
    full = commit if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit) else _resolved(repo, commit)
    return _reader_cached(str(repo.resolve()), full, suffixes)


@cache
def _reader_cached(repo_text: str, commit: str, suffixes: tuple[str, ...]) -> Callable[[str], bytes | None]:
    repo = Path(repo_text)
    tree = tree_blobs(repo, commit)
    wanted = sorted({object_id for path, object_id in tree.items() if path.endswith(suffixes)})
    cache_by_id = read_blobs(repo, wanted)

    def read(path: str) -> bytes | None:
        object_id = tree.get(path)
        if object_id is None:
            return None
        if object_id not in cache_by_id:
            cache_by_id.update(read_blobs(repo, [object_id]))
        return cache_by_id[object_id]

    return read


def changed_paths(repo: Path, base: str, head: str | None = "HEAD") -> list[str]:
    """Paths that differ between ``base`` and ``head`` (``head=None``: the working tree, untracked files
    left out), renames as a removal and an addition."""
    args = ["diff", "--name-only", "--no-renames", base] + ([head] if head is not None else [])
    done = _git(repo, *args, "--")
    if done.returncode != 0:
        raise GitQueryError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return sorted(line for line in done.stdout.splitlines() if line)


def parse_rev(repo: Path, rev: str) -> str | None:
    """Full id of any revision name (``HEAD~2``, a tag, a short id) that is in HEAD's history, else None."""
    if rev.startswith("-"):
        return None
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if done.returncode != 0:
        return None
    return resolve_commit(repo, done.stdout.strip())
