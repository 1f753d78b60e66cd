"""``python -m bundle.plan``: which wheels an air-gapped GPU host lacks, at the versions and hashes
of uv's export of the lock (used by bundle.sh).

The host already has an interpreter with a set of packages (``--have``); the project needs its runtime
dependencies, the extras it is run with (``--extra``) and the dev packages its pytest configuration
loads (``--dev``). The plan is uv's export of the lock with what the host has pruned (and whatever only
those packages need), and with the dev group's other members (the linters) pruned; its markers are
evaluated for the target interpreter, so the right one of several locked versions is picked.

  plan  --uv UV --project DIR --python-version 3.12 [--machine x86_64] [--max-glibc 2.28] \
        --extra mjwarp --dev pytest-timeout ... --have torch ... --requirements REQ.txt
        -> one TSV line per package on stdout (name, version, sha256s), and REQ.txt, the same
           packages as pip's hash-checked requirement lines
  check --plan plan.tsv --python-version 3.12 --max-glibc 2.28 --wheels DIR --output wheels.json
        -> every planned package has exactly one downloaded wheel, of its pinned version, compatible
           with the target, whose sha256 is one of the export's for that package

Exit 2 with a message naming the thing on any error.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bundle.export import (
    PlanEntry,
    dev_members,
    export_argv,
    parse_export,
    plan,
    read_plan,
    unknown_names,
)
from bundle.files import BundleError, normalize, parse_wheel_name, sha256_file
from bundle.target import Target, parse_glibc, parse_python_version, wheel_fits
from soakbench.foundation.atomic import write_atomic


def run_export(argv: list[str]) -> str:
    """uv's export, or BundleError with what uv said."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise BundleError(f"--uv {argv[0]}: cannot run it ({exc})") from None
    if done.returncode != 0:
        raise BundleError(f"{' '.join(argv[:3])} ... failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def plan_for_host(args: argparse.Namespace, target: Target) -> list[PlanEntry]:
    project: Path = args.project
    dev_group = dev_members(project / "pyproject.toml")
    problems = [
        f"--dev {n}: not among the project's dev dependencies"
        for n in args.dev
        if normalize(n) not in dev_group
    ]
    full = parse_export(run_export(export_argv(args.uv, project, args.extra, (), hashes=False)))
    problems += unknown_names(args.have, full, "--have")
    if problems:
        raise BundleError("; ".join(problems))
    prune = {normalize(n) for n in args.have} | (set(dev_group) - {normalize(n) for n in args.dev})
    return plan(parse_export(run_export(export_argv(args.uv, project, args.extra, prune))), target)


def _check_one(entry: PlanEntry, path: Path, target: Target) -> dict[str, Any]:
    """The record of one downloaded wheel, or BundleError saying why it is not the exported file."""
    wheel = parse_wheel_name(path.name)
    if wheel.version != entry.version:
        raise BundleError(f"{path.name}: version {wheel.version}, the lock pins {entry.version}")
    if not wheel_fits(wheel, target):
        raise BundleError(
            f"{path.name}: does not fit {target.cp_tag} glibc<={target.max_glibc} {target.machine}"
        )
    digest = sha256_file(path)
    if digest not in entry.sha256s:
        raise BundleError(
            f"{path.name}: sha256 {digest} is none of the lock's for {entry.name} {entry.version}"
        )
    return {
        "name": entry.name,
        "version": entry.version,
        "filename": path.name,
        "sha256": digest,
        "size": path.stat().st_size,
    }


def check_wheels(entries: Sequence[PlanEntry], wheels_dir: Path, target: Target) -> list[dict[str, Any]]:
    """Match the downloaded wheels one to one with the plan and the lock's hashes of each package."""
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
            out.append(_check_one(entry, found[0], target))
        except BundleError as exc:
            problems.append(str(exc))
    if problems:
        raise BundleError("downloaded wheels do not match the lock:\n  " + "\n  ".join(problems))
    return out


# ---- command line -------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bundle.plan", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("plan", "check"):
        p = sub.add_parser(name)
        p.add_argument("--python-version", required=True)
        p.add_argument("--machine", default="x86_64")
        p.add_argument("--max-glibc", default="2.28")
    p_plan = sub.choices["plan"]
    p_plan.add_argument("--uv", required=True, help="the uv executable")
    p_plan.add_argument("--project", type=Path, required=True, help="the checkout (pyproject.toml, uv.lock)")
    p_plan.add_argument("--extra", action="append", default=[])
    p_plan.add_argument("--dev", action="append", default=[])
    p_plan.add_argument("--have", action="append", default=[])
    p_plan.add_argument("--requirements", type=Path, required=True, help="pip's requirement file to write")
    p_check = sub.choices["check"]
    p_check.add_argument("--plan", type=Path, required=True)
    p_check.add_argument("--wheels", type=Path, required=True)
    p_check.add_argument("--output", type=Path, required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        target = Target(parse_python_version(args.python_version), args.machine, parse_glibc(args.max_glibc))
        if args.command == "plan":
            if not (args.project / "uv.lock").is_file():
                raise BundleError(f"--project {args.project}: no uv.lock there")
            entries = plan_for_host(args, target)
            write_atomic(args.requirements, "".join(e.requirement() + "\n" for e in entries))
            for entry in entries:
                print(entry.tsv())
            return 0
        if not args.wheels.is_dir():
            raise BundleError(f"--wheels {args.wheels}: not a folder")
        wheels = check_wheels(read_plan(args.plan), args.wheels, target)
        write_atomic(args.output, json.dumps(wheels, indent=1) + "\n")
        return 0
    except (BundleError, OSError) as exc:  # OSError: a --plan or --output path that cannot be used
        print(f"bundle: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
