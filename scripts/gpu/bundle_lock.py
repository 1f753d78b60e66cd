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
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the sibling modules below (a script's folder is on sys.path only when it is run, not imported) and the
# checkout's foundation package (its one atomic writer; standard library only, so the GPU host has it)
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))
from bundle_files import BundleError, normalize, parse_wheel_name, sha256_file
from bundle_lockfile import Dep, Lock, closure
from bundle_target import Target, parse_glibc, parse_python_version, wheel_fits


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
