"""Split a folder of verified wheels into transfer-sized parts, and on the GPU host verify, join and
install them (used by bundle.sh and device_install.sh). Standard library only, Python >= 3.11.

  split    --wheels DIR --wheels-json FILE --out DIR --part-bytes N [--target-json JSON] [--lock-sha256 HEX]
           -> DIR/transfer-NN/ (each <= N bytes of parts plus a copy of MANIFEST.json), DIR/MANIFEST.json
  assemble --stage DIR [--manifest-sha256 HEX] [FOLDER ...]
           -> copies every verified part found in the FOLDERs into the stage, then joins and verifies
              each wheel into DIR/wheels/; exit 0 when all wheels are there, 3 when parts are missing
              (they are named, by transfer), 2 on anything wrong (corrupt parts are named)
  install  --stage DIR --target DIR
           -> checks this interpreter and host against the manifest, installs the joined wheels with
              pip --no-index --no-deps --target (into a temporary folder renamed at the end), then
              imports every bundled module and runs pip check with DIR on PYTHONPATH

Every command is idempotent: verified parts, joined wheels and a completed install are kept and
re-verified, never rewritten. Nothing is left half-written: files are written under a temporary name
and renamed into place only after their sha256 matches.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from bundle.assemble import AssembleReport, assemble
from bundle.files import BundleError
from bundle.install import install
from bundle.split import split

EXIT_MISSING = 3


def _print_assemble(report: AssembleReport, stage: Path) -> int:
    m = report.manifest
    print(f"bundle manifest sha256 {m.sha256}: {len(m.wheels)} wheels in {len(m.parts)} parts")
    for note in report.notes:
        print(f"  note: {note}")
    if report.staged:
        print(f"  staged {len(report.staged)} verified part(s) into {stage}")
    if report.corrupt:
        for line in report.corrupt:
            print(f"  CORRUPT: {line}", file=sys.stderr)
        print("bundle: corrupt parts (above); bring those transfers again", file=sys.stderr)
        return 2
    if report.missing:
        by_transfer: dict[int, list[str]] = {}
        for p in report.missing:
            by_transfer.setdefault(p.transfer, []).append(p.file)
        for t, files in sorted(by_transfer.items()):
            more = f" and {len(files) - 3} more" if len(files) > 3 else ""
            print(f"  missing from transfer-{t:02d}: {len(files)} part(s): {', '.join(files[:3])}{more}")
        return EXIT_MISSING
    joined = f"joined {len(report.joined)}, " if report.joined else ""
    print(f"  all {len(m.wheels)} wheels verified in {stage / 'wheels'} ({joined}sha256 of each checked)")
    return 0


# ---- command line -------------------------------------------------------------------------------


def _paths(values: Iterable[str]) -> list[Path]:
    return [Path(v).absolute() for v in values]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bundle.parts", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("split")
    p.add_argument("--wheels", type=Path, required=True)
    p.add_argument("--wheels-json", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--part-bytes", type=int, required=True)
    p.add_argument("--meta-json", default="{}", help="extra manifest fields (JSON object)")
    p = sub.add_parser("assemble")
    p.add_argument("--stage", type=Path, required=True)
    p.add_argument("--manifest-sha256")
    p.add_argument("--lock", type=Path, help="the checkout's uv.lock: the bundle must come from it")
    p.add_argument("folders", nargs="*")
    p = sub.add_parser("install")
    p.add_argument("--stage", type=Path, required=True)
    p.add_argument("--target", type=Path, required=True)
    p.add_argument("--lock", type=Path, help="the checkout's uv.lock: the bundle must come from it")
    args = parser.parse_args(argv)
    try:
        if args.command == "split":
            meta = json.loads(args.meta_json)
            if not isinstance(meta, dict) or "target" not in meta:
                raise BundleError("--meta-json must be an object with a 'target' entry")
            wheels = json.loads(args.wheels_json.read_text())
            manifest = split(args.wheels, wheels, args.out, args.part_bytes, meta)
            for t in manifest["transfers"]:
                print(
                    f"{t['folder']}: {t['bytes']} bytes ({t['bytes'] / 2**20:.1f} MiB) in {len(t['parts'])} parts"
                )
            return 0
        if args.command == "assemble":
            stage = args.stage.absolute()
            report = assemble(stage, _paths(args.folders), args.manifest_sha256, args.lock)
            return _print_assemble(report, stage)
        for line in install(args.stage.absolute(), args.target.absolute(), args.lock):
            print(line)
        return 0
    except BundleError as exc:
        print(f"bundle: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"bundle: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
