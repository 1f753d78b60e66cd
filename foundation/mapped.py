"""The native libraries a process has mapped, and the distributions that ship them.

Python imports name only part of what a run depends on: torch maps its CUDA and cuDNN libraries, MuJoCo
its plugin libraries, without an ``import`` of their distributions (``nvidia-cudnn-cu13`` ships
``libcudnn``; nothing imports a module of it). The kernel's list of a process's mappings
(``/proc/PID/maps``) names every shared object loaded, so each is mapped back to the installed
distribution whose files hold it, at the version installed: what the process actually loaded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path

#: A mapped file is a native library when its name ends in ``.so`` or carries a version after it.
_LIBRARY_MARK = ".so"


def mapped_paths(maps_text: str) -> set[str]:
    """The files a ``/proc/PID/maps`` text maps (pure): the path column of each file-backed line."""
    found = set()
    for line in maps_text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/"):
            found.add(fields[5].removesuffix(" (deleted)"))
    return found


def is_library(path: str) -> bool:
    """True for a shared object: ``libx.so``, ``libx.so.9``, ``x.cpython-311-x86_64-linux-gnu.so``."""
    name = path.rsplit("/", 1)[-1]
    return name.endswith(_LIBRARY_MARK) or f"{_LIBRARY_MARK}." in name


def owners(paths: Iterable[str], index: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """``{distribution: version}`` of the distributions whose files ``index`` (real path -> (name,
    version)) says hold the native libraries among ``paths`` (pure; a library of no distribution, such as
    the C library, is left out)."""
    return dict(sorted(index[p] for p in paths if is_library(p) and p in index))


#: The folders installed distributions live in; the folder right under one names a top-level package.
_INSTALL_DIRS = ("site-packages", "dist-packages")


def top_level_names(paths: Iterable[str]) -> set[str]:
    """The top-level package (or module) folder each installed path sits in (pure): ``torch`` for
    ``.../site-packages/torch/lib/libtorch_cpu.so``."""
    tops = set()
    for path in paths:
        parts = Path(path).parts
        for folder in _INSTALL_DIRS:
            if folder in parts and parts.index(folder) + 1 < len(parts):
                tops.add(parts[parts.index(folder) + 1].split(".")[0])
    return tops


def library_index(names: Iterable[str]) -> dict[str, tuple[str, str]]:
    """The native library files of the distributions ``names`` by real path -> (name as its metadata
    spells it, version), from their file lists."""
    index: dict[str, tuple[str, str]] = {}
    for name in sorted(set(names)):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for file in dist.files or ():
            if is_library(str(file)):
                index[str(Path(str(dist.locate_file(file))).resolve())] = (name, dist.version)
    return index


def mapped_distributions(pid: int | str = "self") -> dict[str, str] | None:
    """``{distribution: version}`` behind the native libraries process ``pid`` has mapped now; None where
    ``/proc`` cannot be read (not Linux), so that the manifest says native libraries went unrecorded.
    Only the distributions that provide the mapped libraries' top-level folders have their file lists
    read (torch's alone holds twelve thousand files)."""
    try:
        text = Path(f"/proc/{pid}/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    libraries = {p for p in mapped_paths(text) if is_library(p)}
    providers = metadata.packages_distributions()
    names = {name for top in top_level_names(libraries) for name in providers.get(top, ())}
    return owners(libraries, library_index(names))
