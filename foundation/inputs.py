"""What a collecting process was made of: the project files it loaded and read, and the distributions it imported.

Each process that produces evidence (the trainer, its collector, every rank, the soak monitor's collection
side, a probe worker) records its own inputs; the evidence carries the union as its input manifest, and the
support matrix judges freshness per cell from it: evidence is fresh while every recorded file's git blob id
at HEAD equals the recorded one and every recorded distribution's locked version is unchanged.

A file is named by its path relative to the project root (POSIX) and identified by its git blob id
(``sha1("blob <size>\\0" + bytes)``), computed here from the bytes on disk, so no git is needed at
collection time; evidence only counts from a clean tree, where the disk bytes are the commit's.
Data files the process read outside the import system (configuration YAML, robot assets that MuJoCo's C
loader reads, motion clips, schemas) are declared by the code that reads them with :func:`note_data_file`.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from soakbench.foundation.atomic import write_atomic
from soakbench.foundation.mapped import mapped_distributions

INPUTS_DIR = "inputs"  # under a run's log directory: one record per process, ``<role>-<pid>.json``
RECORD_VERSION = 1
# Set by whoever collects evidence (a test, a soak): processes also file their record in this directory.
INPUTS_DIR_ENV = "SOAKBENCH_INPUTS_DIR"
_IGNORED_PARTS = frozenset({".venv", "site-packages", "dist-packages", "__pycache__", ".git"})

_data_files: set[Path] = set()  # what this process declared it read (see note_data_file)


def note_data_file(path: str | os.PathLike[str]) -> None:
    """Declare that this process read ``path`` (a file, or a directory whose files a C loader reads)."""
    _data_files.add(Path(path).resolve())


def declared_data_files() -> tuple[Path, ...]:
    """The files this process declared, directories expanded to the files under them, sorted."""
    out: set[Path] = set()
    for path in _data_files:
        if path.is_dir():
            out.update(p for p in path.rglob("*") if p.is_file() and not _IGNORED_PARTS & set(p.parts))
        elif path.is_file():
            out.add(path)
    return tuple(sorted(out))


def git_blob_id(data: bytes) -> str:
    """The git object id of a blob with these bytes (what ``git hash-object`` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def project_relative(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` (POSIX) when it is a project file; None for anything outside it or
    inside a virtual environment, site-packages or a cache."""
    try:
        rel = path.resolve().relative_to(root)
    except ValueError:
        return None
    return None if _IGNORED_PARTS & set(rel.parts) else rel.as_posix()


def loaded_module_files(modules: Mapping[str, Any] | None = None) -> tuple[Path, ...]:
    """Source files of the loaded modules (``__file__``), sorted; compiled-only and built-in ones skipped."""
    found = set()
    for module in list((sys.modules if modules is None else modules).values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and file.endswith(".py"):
            found.add(Path(file))
    return tuple(sorted(found))


def imported_distributions(modules: Mapping[str, Any] | None = None) -> dict[str, str]:
    """``{distribution: version}`` of the installed distributions whose top-level modules are loaded."""
    loaded = {name.partition(".")[0] for name in (sys.modules if modules is None else modules)}
    owners = metadata.packages_distributions()
    out: dict[str, str] = {}
    for top in sorted(loaded & owners.keys()):
        for dist in owners[top]:
            try:
                out[canonical_name(dist)] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
    return out


def canonical_name(name: str) -> str:
    """A distribution name as lock files write it (PEP 503: lower case, runs of ``-_.`` as ``-``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class ProcessInputs:
    """One process's inputs: its role and pid, ``files`` (project path -> git blob id: modules it loaded
    and data files it declared) and ``distributions`` (name -> version)."""

    role: str
    pid: int
    files: dict[str, str] = field(default_factory=dict)
    distributions: dict[str, str] = field(default_factory=dict)
    interpreter: str | None = None  # platform.python_version(); None in records made before it
    native_libraries: bool = False  # whether ``distributions`` holds those of the mapped native libraries

    def to_json(self) -> dict[str, Any]:
        """The record as written under a run's ``inputs/`` directory."""
        return {
            "record_version": RECORD_VERSION,
            "role": self.role,
            "pid": self.pid,
            "files": dict(sorted(self.files.items())),
            "distributions": dict(sorted(self.distributions.items())),
            "interpreter": self.interpreter,
            "native_libraries": self.native_libraries,
        }


def hash_files(paths: Iterable[Path], root: Path, exclude: Iterable[str] = ()) -> dict[str, str]:
    """``{project path: git blob id}`` of the project files among ``paths`` (others and ``exclude``d
    prefixes skipped; an unreadable file is skipped: it was deleted after it was loaded)."""
    skip = tuple(exclude)
    out: dict[str, str] = {}
    for path in paths:
        rel = project_relative(path, root)
        if rel is None or rel.startswith(skip) or any(rel == s.rstrip("/") for s in skip):
            continue
        try:
            out[rel] = git_blob_id(path.read_bytes())
        except OSError:
            continue
    return out


def own_inputs(
    role: str, root: Path, exclude: Iterable[str] = (), distributions: bool = True
) -> ProcessInputs:
    """What this process loaded and declared so far, as project files under ``root``."""
    root = root.resolve()
    paths = (*loaded_module_files(), *declared_data_files())
    own = canonical_name(_own_distribution(root) or "")
    mapped = mapped_distributions() if distributions else None
    found = {**imported_distributions(), **{canonical_name(k): v for k, v in (mapped or {}).items()}}
    dists = {k: v for k, v in found.items() if k != own} if distributions else {}
    return ProcessInputs(
        role,
        os.getpid(),
        hash_files(paths, root, exclude),
        dists,
        interpreter=platform.python_version(),
        native_libraries=mapped is not None,
    )


def _own_distribution(root: Path) -> str | None:
    """The distribution installed from ``root`` itself (an editable install), which its files cover."""
    for dist in metadata.distributions():
        direct = dist.read_text("direct_url.json")
        if direct and json.loads(direct).get("url", "").rstrip("/") == root.as_uri():
            return str(dist.metadata["Name"])
    return None


def write_own_inputs(directory: Path, role: str, root: Path, exclude: Iterable[str] = ()) -> Path:
    """Record this process's inputs as ``<directory>/<role>-<pid>.json`` (atomically); also in
    ``$SOAKBENCH_INPUTS_DIR`` when a collector of evidence set it."""
    record = json.dumps(own_inputs(role, root, exclude).to_json(), indent=1) + "\n"
    directory.mkdir(parents=True, exist_ok=True)
    target = write_atomic(directory / f"{role}-{os.getpid()}.json", record)
    extra = os.environ.get(INPUTS_DIR_ENV)
    if extra:
        (Path(extra) / INPUTS_DIR).mkdir(parents=True, exist_ok=True)
        write_atomic(Path(extra) / INPUTS_DIR / f"{role}-{os.getpid()}.json", record)
    return target


def read_records(directory: Path) -> list[ProcessInputs]:
    """Every process record in an ``inputs/`` folder under ``directory`` (any depth); a record that cannot
    be read is an error naming it, since a missing piece would understate the inputs."""
    out = []
    for path in sorted(directory.rglob(f"{INPUTS_DIR}/*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            interpreter = doc.get("interpreter")
            out.append(
                ProcessInputs(
                    str(doc["role"]),
                    int(doc["pid"]),
                    dict(doc["files"]),
                    dict(doc["distributions"]),
                    interpreter=str(interpreter) if interpreter is not None else None,
                    native_libraries=doc.get("native_libraries") is True,
                )
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputsError(f"{path}: not a process inputs record ({exc})") from None
    return out


class InputsError(ValueError):
    """A process record or a merged manifest is unusable; the message names the file or the path."""


def merge_manifest(records: Iterable[ProcessInputs]) -> dict[str, Any]:
    """The evidence's input manifest: the union of every process's files and distributions, and which
    processes recorded them. Two processes that saw different bytes of one file, or different versions
    of one distribution, make the manifest unusable (the tree changed under the run)."""
    listed = list(records)
    files: dict[str, str] = {}
    dists: dict[str, str] = {}
    processes = []
    for record in sorted(listed, key=lambda r: (r.role, r.pid)):
        for table, merged, what in (
            (record.files, files, "file"),
            (record.distributions, dists, "distribution"),
        ):
            for name, value in table.items():
                if merged.setdefault(name, value) != value:
                    raise InputsError(
                        f"{what} {name}: {merged[name]} in one process, {value} in {record.role} {record.pid}"
                    )
        processes.append({"role": record.role, "pid": record.pid, "files": len(record.files)})
    interpreters = {r.interpreter for r in listed if r.interpreter is not None}
    if len(interpreters) > 1:
        raise InputsError(f"interpreter: the processes ran different Pythons: {sorted(interpreters)}")
    # recorded only when every process said which Python it ran (a record that does not say is older)
    every = bool(listed) and all(r.interpreter is not None for r in listed)
    interpreter = interpreters.pop() if every else None
    recorded = ["files", "distributions"]
    recorded += ["interpreter"] if interpreter is not None else []
    recorded += ["native libraries"] if listed and all(r.native_libraries for r in listed) else []
    return {
        "manifest_version": RECORD_VERSION,
        "files": dict(sorted(files.items())),
        "distributions": dict(sorted(dists.items())),
        **({"interpreter": interpreter} if interpreter is not None else {}),
        "recorded": recorded,
        "processes": processes,
    }
