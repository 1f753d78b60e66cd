"""uv.lock read into typed packages, and the packages reachable from a set of roots in its
dependency graph for one target. Standard library only (tomllib: Python >= 3.11)."""

from __future__ import annotations

import tomllib
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundle_files import BundleError, normalize
from bundle_target import marker_holds


@dataclass(frozen=True)
class Dep:
    name: str
    version: str | None
    marker: str | None
    extras: tuple[str, ...]


@dataclass(frozen=True)
class LockWheel:
    filename: str
    sha256: str
    size: int | None


@dataclass
class LockPackage:
    name: str
    version: str
    source: dict[str, Any]
    dependencies: list[Dep]
    optional: dict[str, list[Dep]]
    dev: dict[str, list[Dep]]
    wheels: list[LockWheel]
    resolution_markers: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return self.name, self.version

    def applies(self, env: Mapping[str, str]) -> bool:
        return not self.resolution_markers or any(marker_holds(m, env) for m in self.resolution_markers)


def _deps(raw: object, where: str) -> list[Dep]:
    if not isinstance(raw, list):
        raise BundleError(f"uv.lock: {where} is not a list")
    out: list[Dep] = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise BundleError(f"uv.lock: {where} has an entry without a name: {item!r}")
        extras = item.get("extra", [])
        out.append(
            Dep(
                name=normalize(item["name"]),
                version=item.get("version"),
                marker=item.get("marker"),
                extras=tuple(normalize(e) for e in extras),
            )
        )
    return out


def _wheel(raw: object, where: str) -> LockWheel:
    if not isinstance(raw, dict):
        raise BundleError(f"uv.lock: {where}: a wheel entry is not a table")
    url, digest = raw.get("url") or raw.get("path") or raw.get("filename"), raw.get("hash")
    if not isinstance(url, str) or not isinstance(digest, str) or not digest.startswith("sha256:"):
        raise BundleError(f"uv.lock: {where}: a wheel entry lacks a url or a sha256 hash: {raw!r}")
    size = raw.get("size")
    return LockWheel(
        filename=url.rsplit("/", 1)[-1].split("#", 1)[0],
        sha256=digest.removeprefix("sha256:"),
        size=size if isinstance(size, int) else None,
    )


@dataclass
class Lock:
    packages: list[LockPackage]

    @classmethod
    def load(cls, path: Path) -> Lock:
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise BundleError(f"{path}: no such lock file") from None
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise BundleError(f"{path}: not a readable TOML lock: {exc}") from None
        if data.get("version") != 1:
            raise BundleError(f"{path}: lock format version {data.get('version')!r}, this tool reads 1")
        raw_packages = data.get("package")
        if not isinstance(raw_packages, list) or not raw_packages:
            raise BundleError(f"{path}: no [[package]] entries")
        packages: list[LockPackage] = []
        for raw in raw_packages:
            if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
                raise BundleError(f"{path}: a [[package]] entry has no name")
            name = normalize(raw["name"])
            version = raw.get("version")
            if not isinstance(version, str):
                raise BundleError(f"{path}: package {name} has no version")
            where = f"package {name} {version}"
            packages.append(
                LockPackage(
                    name=name,
                    version=version,
                    source=dict(raw.get("source", {})),
                    dependencies=_deps(raw.get("dependencies", []), f"{where} dependencies"),
                    optional={
                        normalize(k): _deps(v, f"{where} optional-dependencies.{k}")
                        for k, v in raw.get("optional-dependencies", {}).items()
                    },
                    dev={
                        k: _deps(v, f"{where} dev-dependencies.{k}")
                        for k, v in raw.get("dev-dependencies", {}).items()
                    },
                    wheels=[_wheel(w, where) for w in raw.get("wheels", [])],
                    resolution_markers=list(raw.get("resolution-markers", [])),
                )
            )
        return cls(packages)

    def by_name(self, name: str) -> list[LockPackage]:
        return [p for p in self.packages if p.name == normalize(name)]

    def project(self) -> LockPackage:
        local = [
            p for p in self.packages if p.source.get("editable") == "." or p.source.get("virtual") == "."
        ]
        if len(local) != 1:
            raise BundleError(f"uv.lock: expected one project package (source '.'), found {len(local)}")
        return local[0]

    def resolve(self, dep: Dep, env: Mapping[str, str], needed_by: str) -> LockPackage:
        candidates = self.by_name(dep.name)
        if dep.version is not None:
            candidates = [p for p in candidates if p.version == dep.version]
        if len(candidates) > 1:
            candidates = [p for p in candidates if p.applies(env)]
        if len(candidates) != 1:
            raise BundleError(
                f"uv.lock: {needed_by} needs {dep.name}"
                + (f" {dep.version}" if dep.version else "")
                + f", which matches {len(candidates)} locked packages for this target"
            )
        return candidates[0]

    def pick(self, name: str, env: Mapping[str, str]) -> LockPackage:
        """The locked package called ``name`` that applies to the target."""
        candidates = self.by_name(name)
        if not candidates:
            raise BundleError(f"uv.lock has no package {name!r}")
        applying = [p for p in candidates if p.applies(env)] if len(candidates) > 1 else candidates
        if len(applying) != 1:
            versions = ", ".join(p.version for p in candidates)
            raise BundleError(f"uv.lock: {name} has versions {versions}; none or several apply to the target")
        return applying[0]


def closure(
    lock: Lock, roots: Iterable[tuple[Dep, str]], env: Mapping[str, str]
) -> dict[tuple[str, str], str]:
    """Every locked package reachable from ``roots`` (dep, who needs it) -> the chain that needs it."""
    seen: dict[tuple[str, str], str] = {}
    extras_done: set[tuple[tuple[str, str], str]] = set()
    queue: deque[tuple[Dep, str]] = deque(roots)
    while queue:
        dep, needed_by = queue.popleft()
        if dep.marker is not None and not marker_holds(dep.marker, env):
            continue
        pkg = lock.resolve(dep, env, needed_by)
        chain = f"{needed_by} > {pkg.name}" if needed_by else pkg.name
        first = pkg.key not in seen
        if first:
            seen[pkg.key] = chain
            queue.extend((d, chain) for d in pkg.dependencies)
        for extra in dep.extras:
            if (pkg.key, extra) in extras_done:
                continue
            extras_done.add((pkg.key, extra))
            if extra not in pkg.optional:
                raise BundleError(f"uv.lock: {needed_by} asks for {pkg.name}[{extra}], which is not locked")
            queue.extend((d, f"{chain}[{extra}]") for d in pkg.optional[extra])
    return seen
