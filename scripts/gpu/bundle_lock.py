"""Which wheels an air-gapped GPU host lacks, at exactly the versions uv.lock pins (used by bundle.sh).

The host already has an interpreter with a set of packages (``--have``); the project needs its runtime
dependencies, the extras it is run with (``--extra``) and the dev packages its pytest configuration
loads (``--dev``). The bundle is every package reachable from those roots in the lock's dependency
graph, less everything reachable from what the host has: a package pulled in by one the host has (say
``absl-py`` by ``tensorboard``) is taken to be there already. Markers are evaluated for the target
interpreter (``--python-version``, Linux x86_64), so the right one of several locked versions is picked.

  python3 scripts/gpu/bundle_lock.py plan --lock uv.lock --python-version 3.12 --extra mjwarp \
      --dev pytest-timeout --have torch --have numpy ...
      -> one TSV line per package: name, version, wheel sha256s (comma-separated), needed-by chain
  python3 scripts/gpu/bundle_lock.py check --lock uv.lock --plan plan.tsv --python-version 3.12 \
      --max-glibc 2.28 --wheels DIR --output wheels.json
      -> every planned package has exactly one downloaded wheel, compatible with the target, whose
         sha256 is the one the lock records for that very file

Standard library only (tomllib: Python >= 3.11). Exit 2 with a message naming the thing on any error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the sibling module, also used on the GPU host
from bundle_parts import (
    BundleError,
    WheelName,
    normalize,
    parse_wheel_name,
    platform_glibc,
    sha256_file,
)

# ---- markers ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The interpreter and platform the bundle is for."""

    python_version: str  # "3.12" or "3.12.4"
    machine: str = "x86_64"
    max_glibc: tuple[int, int] = (2, 28)

    @property
    def minor(self) -> tuple[int, int]:
        major, minor = self.python_version.split(".")[:2]
        return int(major), int(minor)

    @property
    def cp_tag(self) -> str:
        return f"cp{self.minor[0]}{self.minor[1]}"

    def marker_env(self) -> dict[str, str]:
        parts = self.python_version.split(".")
        full = ".".join([*parts, "0"]) if len(parts) == 2 else self.python_version
        return {
            "python_version": ".".join(parts[:2]),
            "python_full_version": full,
            "sys_platform": "linux",
            "platform_system": "Linux",
            "platform_machine": self.machine,
            "platform_python_implementation": "CPython",
            "implementation_name": "cpython",
            "os_name": "posix",
        }


def parse_python_version(text: str) -> str:
    if not re.fullmatch(r"3\.\d{1,2}(\.\d{1,2})?", text):
        raise BundleError(f"--python-version must look like 3.12 or 3.12.4, got {text!r}")
    return text


def parse_glibc(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)\.(\d+)", text)
    if not match:
        raise BundleError(f"--max-glibc must look like 2.28, got {text!r}")
    return int(match.group(1)), int(match.group(2))


_TOKEN = re.compile(r"\s*(\(|\)|'[^']*'|\"[^\"]*\"|[A-Za-z_][A-Za-z0-9_.]*|===|==|!=|<=|>=|<|>)")


def _tokens(marker: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(marker):
        if marker[pos:].strip() == "":
            break
        match = _TOKEN.match(marker, pos)
        if match is None:
            raise BundleError(f"cannot parse marker {marker!r} at {marker[pos:]!r}")
        out.append(match.group(1))
        pos = match.end()
    return out


def _version_tuple(text: str) -> tuple[int, ...]:
    if not re.fullmatch(r"\d+(\.\d+)*", text):
        raise BundleError(f"marker version {text!r} is not a plain release number")
    return tuple(int(p) for p in text.split("."))


def _compare(var: str, left: str, op: str, right: str) -> bool:
    if var in ("python_version", "python_full_version"):
        if op in ("==", "!=") and right.endswith(".*"):
            prefix = _version_tuple(right[:-2])
            hit = _version_tuple(left)[: len(prefix)] == prefix
            return hit if op == "==" else not hit
        a, b = _version_tuple(left), _version_tuple(right)
        width = max(len(a), len(b))
        a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
        table = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}
        if op not in table:
            raise BundleError(f"unsupported marker operator {op!r} for {var}")
        return table[op]
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    raise BundleError(f"unsupported marker operator {op!r} for {var}")


class _MarkerParser:
    """Recursive descent over the marker grammar uv writes: or / and / parentheses / ``a op b``."""

    def __init__(self, marker: str, env: Mapping[str, str], extras: frozenset[str]) -> None:
        self.marker, self.env, self.extras = marker, env, extras
        self.tokens = _tokens(marker)
        self.pos = 0

    def parse(self) -> bool:
        result = self.disjunction()
        if self.pos != len(self.tokens):
            raise BundleError(f"trailing text in marker {self.marker!r}: {' '.join(self.tokens[self.pos :])}")
        return result

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        if self.pos >= len(self.tokens):
            raise BundleError(f"marker {self.marker!r} ends early")
        self.pos += 1
        return self.tokens[self.pos - 1]

    def value(self, tok: str) -> tuple[str, str | None]:
        """(value, variable name or None for a literal)."""
        if tok[0] in "'\"":
            return tok[1:-1], None
        if tok == "extra":
            return "", "extra"
        if tok not in self.env:
            raise BundleError(f"marker {self.marker!r} uses {tok!r}, which this tool does not evaluate")
        return self.env[tok], tok

    def atom(self) -> bool:
        tok = self.take()
        if tok == "(":
            result = self.disjunction()
            if self.take() != ")":
                raise BundleError(f"unbalanced parentheses in marker {self.marker!r}")
            return result
        left, lvar = self.value(tok)
        op = self.take()
        if op == "not":
            if self.take() != "in":
                raise BundleError(f"bad operator in marker {self.marker!r}")
            op = "not in"
        right, rvar = self.value(self.take())
        return self.compare(left, lvar, op, right, rvar)

    def compare(self, left: str, lvar: str | None, op: str, right: str, rvar: str | None) -> bool:
        var = lvar or rvar or ""
        if var == "extra":
            if op not in ("==", "!="):
                raise BundleError(f"unsupported operator {op!r} on extra in marker {self.marker!r}")
            hit = normalize(right if lvar else left) in self.extras
            return hit if op == "==" else not hit
        if op in ("in", "not in"):
            hit = left in right
            return hit if op == "in" else not hit
        return _compare(var, left, op, right) if lvar else _compare(var, right, _flip(op), left)

    def conjunction(self) -> bool:
        result = self.atom()
        while self.peek() == "and":
            self.take()
            result = self.atom() and result
        return result

    def disjunction(self) -> bool:
        result = self.conjunction()
        while self.peek() == "or":
            self.take()
            result = self.conjunction() or result
        return result


def marker_holds(marker: str, env: Mapping[str, str], extras: frozenset[str] = frozenset()) -> bool:
    """Evaluate a PEP 508 marker of the shapes uv writes (and/or, parentheses, ``var op 'value'``)."""
    return _MarkerParser(marker, env, extras).parse()


def _flip(op: str) -> str:
    return {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(op, op)


# ---- the lock -----------------------------------------------------------------------------------


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


# ---- wheels -------------------------------------------------------------------------------------


def _platform_ok(tag: str, target: Target) -> bool:
    glibc = platform_glibc(tag)
    if glibc is None:
        return False
    return (tag == "any" or tag.endswith("_" + target.machine)) and glibc <= target.max_glibc


def wheel_fits(wheel: WheelName, target: Target) -> bool:
    """True when the wheel installs on the target (CPython, Linux glibc <= max_glibc, the machine)."""
    major, minor = target.minor
    py_ok = any(
        t in (target.cp_tag, f"py{major}", f"py{major}{minor}")
        or (t.startswith("cp3") and t[2:].isdigit() and "abi3" in wheel.abi_tags and int(t[3:]) <= minor)
        for t in wheel.python_tags
    )
    abi_ok = any(t in (target.cp_tag, "abi3", "none") for t in wheel.abi_tags)
    return py_ok and abi_ok and any(_platform_ok(t, target) for t in wheel.platform_tags)


# ---- plan ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanEntry:
    name: str
    version: str
    sha256s: tuple[str, ...]  # the lock's hashes of the wheels that fit the target
    needed_by: str

    def tsv(self) -> str:
        return f"{self.name}\t{self.version}\t{','.join(self.sha256s)}\t{self.needed_by}"


def plan(
    lock: Lock, target: Target, extras: Sequence[str], dev: Sequence[str], have: Sequence[str]
) -> list[PlanEntry]:
    env = target.marker_env()
    project = lock.project()
    roots: list[tuple[Dep, str]] = [(d, project.name) for d in project.dependencies]
    for extra in extras:
        key = normalize(extra)
        if key not in project.optional:
            known = ", ".join(sorted(project.optional)) or "none"
            raise BundleError(f"--extra {extra}: the project has no such extra (it has: {known})")
        roots += [(d, f"{project.name}[{key}]") for d in project.optional[key]]
    dev_deps = {d.name: d for group in project.dev.values() for d in group}
    for name in dev:
        key = normalize(name)
        if key not in dev_deps:
            raise BundleError(f"--dev {name}: not among the project's dev dependencies in the lock")
        roots.append((dev_deps[key], f"{project.name} (dev)"))
    have_roots: list[tuple[Dep, str]] = []
    for name in have:
        pkg = lock.pick(name, env)  # a typo in --have fails here instead of bundling too much
        have_roots.append((Dep(pkg.name, pkg.version, None, ()), "host"))
    needed = closure(lock, roots, env)
    present = {name for name, _ in closure(lock, have_roots, env)}
    entries: list[PlanEntry] = []
    for (name, version), chain in sorted(needed.items()):
        if name in present or name == project.name:
            continue
        pkg = next(p for p in lock.by_name(name) if p.version == version)
        fitting = [w for w in pkg.wheels if wheel_fits(parse_wheel_name(w.filename), target)]
        if not fitting:
            raise BundleError(
                f"uv.lock: {name} {version} (needed by {chain}) has no wheel for "
                f"{target.cp_tag} manylinux (glibc <= {target.max_glibc[0]}.{target.max_glibc[1]}) "
                f"{target.machine}"
            )
        entries.append(PlanEntry(name, version, tuple(w.sha256 for w in fitting), chain))
    return entries


def read_plan(path: Path) -> list[PlanEntry]:
    entries: list[PlanEntry] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 4 or not all(fields[:3]):
            raise BundleError(f"{path}:{number}: not a plan line: {line!r}")
        entries.append(PlanEntry(fields[0], fields[1], tuple(fields[2].split(",")), fields[3]))
    return entries


def _check_one(lock: Lock, entry: PlanEntry, path: Path, target: Target) -> dict[str, Any]:
    """The record of one downloaded wheel, or BundleError saying why it is not the locked file."""
    wheel = parse_wheel_name(path.name)
    if wheel.version != entry.version:
        raise BundleError(f"{path.name}: version {wheel.version}, the lock pins {entry.version}")
    if not wheel_fits(wheel, target):
        raise BundleError(
            f"{path.name}: does not fit {target.cp_tag} glibc<={target.max_glibc} {target.machine}"
        )
    pkg = next(p for p in lock.by_name(entry.name) if p.version == entry.version)
    locked = [w for w in pkg.wheels if w.filename == path.name]
    if not locked:
        raise BundleError(f"{path.name}: the lock records no such file for {entry.name} {entry.version}")
    digest, size = sha256_file(path), path.stat().st_size
    if digest != locked[0].sha256:
        raise BundleError(f"{path.name}: sha256 {digest} but the lock records {locked[0].sha256}")
    if locked[0].size is not None and size != locked[0].size:
        raise BundleError(f"{path.name}: {size} bytes but the lock records {locked[0].size}")
    return {
        "name": entry.name,
        "version": entry.version,
        "filename": path.name,
        "sha256": digest,
        "size": size,
        "needed_by": entry.needed_by,
    }


def check_wheels(
    lock: Lock, entries: Sequence[PlanEntry], wheels_dir: Path, target: Target
) -> list[dict[str, Any]]:
    """Match the downloaded wheels one to one with the plan and the lock's hash of each very file."""
    problems: list[str] = []
    by_name: dict[str, list[Path]] = {}
    for path in sorted(p for p in wheels_dir.iterdir() if p.is_file()):
        try:
            by_name.setdefault(parse_wheel_name(path.name).name, []).append(path)
        except BundleError as exc:
            problems.append(str(exc))
    planned = {e.name for e in entries}
    problems += [
        f"{', '.join(p.name for p in by_name[n])}: not in the plan" for n in sorted(set(by_name) - planned)
    ]
    out: list[dict[str, Any]] = []
    for entry in entries:
        found = by_name.get(entry.name, [])
        if len(found) != 1:
            problems.append(f"{entry.name} {entry.version}: expected one wheel, found {len(found)}")
            continue
        try:
            out.append(_check_one(lock, entry, found[0], target))
        except BundleError as exc:
            problems.append(str(exc))
    if problems:
        raise BundleError("downloaded wheels do not match the lock:\n  " + "\n  ".join(problems))
    return out


# ---- command line -------------------------------------------------------------------------------


def _target(args: argparse.Namespace) -> Target:
    return Target(parse_python_version(args.python_version), args.machine, parse_glibc(args.max_glibc))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bundle_lock.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("plan", "check"):
        p = sub.add_parser(name)
        p.add_argument("--lock", type=Path, required=True)
        p.add_argument("--python-version", required=True)
        p.add_argument("--machine", default="x86_64")
        p.add_argument("--max-glibc", default="2.28")
    p_plan = sub.choices["plan"]
    p_plan.add_argument("--extra", action="append", default=[])
    p_plan.add_argument("--dev", action="append", default=[])
    p_plan.add_argument("--have", action="append", default=[])
    p_check = sub.choices["check"]
    p_check.add_argument("--plan", type=Path, required=True)
    p_check.add_argument("--wheels", type=Path, required=True)
    p_check.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        target = _target(args)
        lock = Lock.load(args.lock)
        if args.command == "plan":
            for entry in plan(lock, target, args.extra, args.dev, args.have):
                print(entry.tsv())
            return 0
        if not args.wheels.is_dir():
            raise BundleError(f"--wheels {args.wheels}: not a folder")
        wheels = check_wheels(lock, read_plan(args.plan), args.wheels, target)
        args.output.write_text(json.dumps(wheels, indent=1) + "\n")
        return 0
    except BundleError as exc:
        print(f"bundle_lock: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
