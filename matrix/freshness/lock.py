"""A ``uv.lock``'s pins (pure: the lock's text comes in): each package's version and its dependencies."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from typing import Any

from packaging.markers import Marker


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


def _resolved_for(package: Mapping[str, Any], python: str | None) -> bool:
    """True when the lock resolves ``package`` for interpreter ``python`` (``3.11.7``): a package pinned
    at several versions carries the ``resolution-markers`` of the Pythons each version is for. With no
    interpreter named, every version counts."""
    markers = package.get("resolution-markers")
    if python is None or not isinstance(markers, list) or not markers:
        return True
    env = {"python_full_version": python, "python_version": ".".join(python.split(".")[:2])}
    # a marker on another key (sys_platform) is judged for this host's values: evaluate() fills them in
    return any(Marker(str(m)).evaluate(env) for m in markers)


def locked_versions(text: str, python: str | None = None) -> dict[str, str]:
    """``{name: version}`` of every package the lock pins for interpreter ``python`` (every Python when
    None: several versions of one name are joined by ``VERSION_SEPARATOR``). The project itself has no
    registry version and is left out: its files are inputs of their own."""
    found: dict[str, set[str]] = {}
    for package in _packages(text):
        if not isinstance(package.get("version"), str) or "editable" in (package.get("source") or {}):
            continue
        if _resolved_for(package, python):
            found.setdefault(str(package["name"]), set()).add(str(package["version"]))
    return {name: VERSION_SEPARATOR.join(sorted(versions)) for name, versions in found.items()}


def dependency_closure(text: str, roots: Iterable[str], python: str | None = None) -> dict[str, str]:
    """``{name: version}`` of ``roots`` and everything they depend on in the lock (extras included), at
    the versions the lock resolves for interpreter ``python`` (all of them when None)."""
    packages = {str(p["name"]): p for p in _packages(text)}
    locked = locked_versions(text, python)
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
