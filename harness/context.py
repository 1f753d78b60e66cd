"""Run context shared by the soak and probe artifacts: source tree, GPU, software, environment, host.

No torch import: versions come from ``importlib.metadata`` so the soak monitor stays light.

``source.worktree_digest`` is ``"sha256:<hex>"`` over the working tree as it is on disk, independent of
commits: the sorted list of every path git would consider (tracked, plus untracked files that are not
ignored), each contributing ``path NUL state NUL`` where ``state`` is the sha256 of the file's bytes, the
link target for a symlink (``link:<target>``), or ``deleted`` for a tracked path missing on disk. Two
checkouts with the same files have the same digest whatever their history; any edit, new unignored file
or deletion changes it. Submodule contents are not descended into (the gitlink path is hashed as a
directory marker).
"""

from __future__ import annotations

import hashlib
import os
import platform
import socket
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from soakbench.foundation.gpu_health import health_at_start as read_health
from soakbench.foundation.nvml import device_summary, gpu_snapshot

REPO_ROOT = Path(__file__).resolve().parents[1]
SOFTWARE_DISTRIBUTIONS: tuple[str, ...] = ("torch", "mujoco", "warp-lang", "mujoco-warp", "soakbench")
ENVIRONMENT_VARIABLES: tuple[str, ...] = ("CUDA_VISIBLE_DEVICES",)


class GitError(RuntimeError):
    """A git query failed; the message says which command and why."""


def _git(repo_root: Path, *args: str) -> bytes:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo_root), *args], capture_output=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {' '.join(args)}: {type(exc).__name__}: {exc}") from exc
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip()
        raise GitError(f"git {' '.join(args)} exited {done.returncode}: {err}")
    return done.stdout


def worktree_digest(repo_root: Path) -> str:
    """Digest of the on-disk tracked + untracked-unignored files (definition in the module docstring)."""
    listing = _git(repo_root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    paths = sorted({p for p in listing.decode("utf-8", errors="surrogateescape").split("\0") if p})
    digest = hashlib.sha256()
    for rel in paths:
        full = repo_root / rel
        if full.is_symlink():
            state = "link:" + os.readlink(full)
        elif full.is_dir():
            state = "dir"  # a submodule gitlink
        elif full.is_file():
            file_hash = hashlib.sha256()
            with full.open("rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    file_hash.update(chunk)
            state = file_hash.hexdigest()
        else:
            state = "deleted"
        digest.update(rel.encode("utf-8", errors="surrogateescape") + b"\0" + state.encode() + b"\0")
    return "sha256:" + digest.hexdigest()


# What an evidence collection writes as it goes and no evidence depends on (outside the runtime
# fingerprint and never in an input manifest): filing one cell's evidence leaves the tree clean for the next.
COLLECTION_OUTPUTS: tuple[str, ...] = (
    "matrix/evidence",
    "docs/support-matrix.md",
    "reports/support-matrix.html",
    "reports/support-matrix.json",
)
_NOT_DIRTYING = tuple(f":(exclude){path}" for path in COLLECTION_OUTPUTS)


def source_context(repo_root: Path) -> dict[str, Any]:
    """``{commit, branch, dirty, worktree_digest, reason}``; all null with a reason if git cannot answer.

    ``branch`` is null on a detached HEAD; ``dirty`` counts untracked unignored files too, but not the
    :data:`COLLECTION_OUTPUTS` (``worktree_digest`` covers every file).
    """
    try:
        commit = _git(repo_root, "rev-parse", "HEAD").decode().strip()
        branch = _git(repo_root, "rev-parse", "--abbrev-ref", "HEAD").decode().strip()
        status = _git(
            repo_root, "status", "--porcelain", "--untracked-files=normal", "--", ".", *_NOT_DIRTYING
        )
        digest = worktree_digest(repo_root)
    except GitError as exc:
        return {"commit": None, "branch": None, "dirty": None, "worktree_digest": None, "reason": str(exc)}
    return {
        "commit": commit,
        "branch": None if branch == "HEAD" else branch,
        "dirty": bool(status.strip()),
        "worktree_digest": digest,
        "reason": None,
    }


def software_context() -> dict[str, str | None]:
    """Python version and installed distribution versions (null when not installed)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in SOFTWARE_DISTRIBUTIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def host_context() -> dict[str, Any]:
    """Hostname, CPU model, logical cores, cores this process may run on, platform string."""
    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "affinity_cores": affinity,
        "platform": platform.platform(),
    }


def source_root(cwd: Path | None = None) -> Path:
    """The work tree the evidence speaks about: this checkout when the harness runs from one; installed
    (a wheel in site-packages), the git work tree of the working directory, where an outside trainer's
    repository is; this folder when neither is a work tree (``source`` then says why)."""
    if (REPO_ROOT / ".git").exists():
        return REPO_ROOT
    try:
        top = _git(cwd or Path.cwd(), "rev-parse", "--show-toplevel").decode().strip()
    except GitError:
        return REPO_ROOT
    return Path(top)


def cell_source_root(cwd: Path | None = None) -> Path:
    """The work tree a run that names its matrix cell (`soak monitor --cell`) speaks about: the git work
    tree of the working directory, where the cell's project is (this checkout's own cells are run from
    it), else :func:`source_root`."""
    try:
        return Path(_git(cwd or Path.cwd(), "rev-parse", "--show-toplevel").decode().strip())
    except GitError:
        return source_root(cwd)


def collect_context(
    repo_root: Path | None = None,
    *,
    nvml: Any | None = None,
    health_at_start: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The context block: ``{source, gpu, software, environment, host}`` (plain JSON).

    ``gpu`` is ``{available, reason, devices: [{index, uuid, name, driver}], health_at_start}`` from NVML;
    ``health_at_start`` (foundation.gpu_health.health_at_start: the clock-event reasons and temperature of
    the GPUs ``CUDA_VISIBLE_DEVICES`` selects) is read now unless the caller took it when its run started.
    ``nvml`` lets tests inject a fake module.
    """
    root = source_root() if repo_root is None else repo_root
    if health_at_start is None:
        health_at_start = read_health(nvml, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return {
        "source": source_context(root),
        "gpu": {**device_summary(gpu_snapshot(nvml)), "health_at_start": dict(health_at_start)},
        "software": software_context(),
        "environment": {name: os.environ.get(name) for name in ENVIRONMENT_VARIABLES},
        "host": host_context(),
    }
