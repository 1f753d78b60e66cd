"""``soak merge A.json B.json ... [--output M.json]``: the verdict of a job of several nodes, from the soak
artifact of each node's torchrun agent (harness.soak.verdicts.merge).

Exit codes: 0 every node passed; 1 a node failed (the first failure is named); 2 bad input (an
unreadable or schema-invalid artifact, artifacts of different runs or of no ranks, a bad --output),
nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from foundation.atomic import write_atomic
from foundation.schema import sorted_errors
from harness.soak.evidence.artifact import ArtifactError, load_artifact
from harness.soak.verdicts.merge import MergeError, merge

MERGE_SCHEMA = "soak-merge-1.schema.json"


def merge_command(
    artifacts: Annotated[list[Path], typer.Argument(help="the soak artifact of each node")],
    output: Annotated[
        Path | None, typer.Option("--output", help="write the merged verdict (JSON) here")
    ] = None,
) -> None:
    """Merge the soak artifacts of one torchrun job's nodes into the job's verdict."""
    err = Console(stderr=True)
    if output is not None and (
        not output.is_absolute() or output.suffix != ".json" or not output.parent.is_dir()
    ):
        err.print(f"[bold red]soak merge: error:[/] --output {escape(str(output))}: must be an absolute path "
                  "ending in .json in an existing folder")  # fmt: skip
        raise typer.Exit(2)
    try:
        verdict = merge([(str(path), load_artifact(path)) for path in artifacts])
    except (ArtifactError, MergeError) as exc:
        err.print(f"[bold red]soak merge: error:[/] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(2) from None
    errors = sorted_errors(verdict, MERGE_SCHEMA)
    if errors:  # our own bug: say so, write nothing
        err.print(f"[bold red]soak merge: the verdict breaks its schema:[/] {escape(errors[0].message)}")
        raise typer.Exit(1)
    if output is not None:
        write_atomic(output, json.dumps(verdict, indent=2) + "\n")
    out = Console(soft_wrap=True)
    out.print(f"job {escape(verdict['run_id'])}: {len(verdict['nodes'])} nodes, {verdict['status'].upper()}")
    if verdict["failure_reason"]:
        out.print(escape(verdict["failure_reason"]))
    for node in verdict["nodes"]:
        ranks = ", ".join(str(r["rank"]) for r in node["ranks"])
        out.print(f"  node {node['node_rank']} ({escape(node['artifact'])}): {node['status']}, ranks {ranks}")
    raise typer.Exit(0 if verdict["status"] == "passed" else 1)
