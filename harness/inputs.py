"""The monitor's side of an evidence input manifest (``foundation.inputs``): what its collection loaded, and
the merge with the records its watched processes left in the run directory.

Judgement code is not an input: ``matrix generate`` re-derives every soak verdict from the filed samples
with HEAD's code, so the modules that only judge and render (verdicts, evidence, comparison, CI outputs,
the matrix) are left out. The verdict pieces that act while the run is collected stay in: hang limits and
the stacks taken before a kill decide what is recorded, and the observation minimum sizes the run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from soakbench.foundation.inputs import (
    InputsError,
    ProcessInputs,
    git_blob_id,
    merge_manifest,
    own_inputs,
    read_records,
)

JUDGEMENT_ONLY: tuple[str, ...] = (
    "harness/soak/evidence/",
    "harness/soak/verdicts/",
    "harness/two_runs/",
    "harness/ci/",
    "matrix/",
)
ACTS_DURING_COLLECTION: tuple[str, ...] = (
    "harness/soak/verdicts/hang.py",
    "harness/soak/verdicts/stacks.py",
    "harness/soak/verdicts/observation.py",
    "harness/soak/verdicts/criterion.py",
)


def project_root() -> Path:
    """The checkout the harness runs from (the folder holding ``harness/``)."""
    return Path(__file__).resolve().parents[1]


def collection_inputs(role: str, schemas: tuple[str, ...] = (), root: Path | None = None) -> ProcessInputs:
    """This process's collection side: loaded project modules less judgement-only code, plus the verdict
    pieces that act during collection and the ``schemas`` (project paths) its output is validated against.
    ``root``: the project the evidence speaks about (default: this checkout); files outside it are not
    its inputs (an outside project's soak records none of the harness's own files)."""
    root = project_root() if root is None else root
    own = own_inputs(role, root, exclude=JUDGEMENT_ONLY)
    files = dict(own.files)
    for rel in (*ACTS_DURING_COLLECTION, *schemas):
        path = root / rel
        if path.is_file():
            files[rel] = git_blob_id(path.read_bytes())
    return replace(own, files=files)  # its interpreter and mapped libraries kept


def run_manifest(log_dir: Path, monitor: ProcessInputs) -> tuple[dict[str, Any] | None, str | None]:
    """(manifest, None) from the monitor's side and every record under ``log_dir``; (None, why) when a
    record is unreadable or two processes saw different bytes of one input."""
    try:
        records = read_records(log_dir) if log_dir.is_dir() else []
        manifest = merge_manifest([monitor, *records])
    except InputsError as exc:
        return None, str(exc)
    if not manifest["files"]:  # an installed harness watching a command that records nothing
        return None, "no process recorded a project file (the harness runs from an installed package)"
    return manifest, None
