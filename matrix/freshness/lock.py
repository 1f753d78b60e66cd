"""A ``uv.lock``'s pins (pure: the lock's text comes in): each package's version and its dependencies."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from typing import Any


class LockError(ValueError):
    """The lock text is not a readable uv lock; the message says where."""


def _packages(text: str) -> list[Mapping[str, Any]]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LockError(f"uv.lock: not TOML: {exc}") from None
    packages = doc.get("package", [])
    if not isinstance(packages, list):
        raise LockError("uv.lock: package: not a list of tables")
    return [p for p in packages if isinstance(p, Mapping) and isinstance(p.get("name"), str)]


# A resolution forked by environment markers pins one name at several versions (uv.lock holds numpy
# 2.4.6 and 2.5.5 for different Pythons): such a name's entry is every version, sorted, joined by this.
VERSION_SEPARATOR = " or "


def versions_of(entry: str) -> frozenset[str]:
    """The versions a ``locked_versions`` entry (or a recorded version) stands for."""
    return frozenset(entry.split(VERSION_SEPARATOR))


def locked_versions(text: str) -> dict[str, str]:
    """``{name: version}`` of every package the lock pins, several versions of one name joined by
    ``VERSION_SEPARATOR`` (the project itself has no registry version and is left out: its files are
    inputs of their own)."""
    found: dict[str, set[str]] = {}
    for package in _packages(text):
        if isinstance(package.get("version"), str) and "editable" not in (package.get("source") or {}):
            found.setdefault(str(package["name"]), set()).add(str(package["version"]))
    return {name: VERSION_SEPARATOR.join(sorted(versions)) for name, versions in found.items()}


def dependency_closure(text: str, roots: Iterable[str]) -> dict[str, str]:
    """``{name: version}`` of ``roots`` and everything they depend on in the lock (extras included)."""
    packages = {str(p["name"]): p for p in _packages(text)}
    locked = locked_versions(text)
    seen: set[str] = set()
    todo = [r for r in roots if r in packages]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        package = packages[name]
        deps = list(package.get("dependencies") or [])
        for extra in (package.get("optional-dependencies") or {}).values():
            deps += list(extra)
        todo += [str(d["name"]) for d in deps if isinstance(d, Mapping) and d.get("name") in packages]
    return {name: locked[name] for name in sorted(seen) if name in locked}
