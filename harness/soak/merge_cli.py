"""``soak merge A.json B.json ... [--output M.json]``: the verdict of a job of several nodes, from the soak
artifact of each node's torchrun agent (harness.soak.verdicts.merge).

Exit codes: 0 every node passed; 1 a node failed (the first failure is named), or the verdict broke its
own schema (nothing written); 2 bad input (an unreadable or schema-invalid artifact, artifacts of
different runs or of no ranks, an --output that is not a new .json file beside them or cannot be
written), nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from soakbench.foundation.atomic import write_atomic
from soakbench.foundation.schema import sorted_errors
from soakbench.harness.soak.evidence.artifact import ArtifactError, load_artifact
from soakbench.harness.soak.verdicts.merge import MergeError, merge
from soakbench.harness.two_runs.output_path import OutputPathError, json_output_path

MERGE_SCHEMA = "soak-merge-1.schema.json"


def merge_command(
    artifacts: Annotated[list[Path], typer.Argument(help="the soak artifact of each node")],
    output: Annotated[
        Path | None, typer.Option("--output", help="write the merged verdict (JSON) here")
    ] = None,
) -> None:
    """Merge the soak artifacts of one torchrun job's nodes into the job's verdict."""
    try:
        target = json_output_path("--output", output)
        if target is not None and any(target.resolve() == a.resolve() for a in artifacts):
            raise OutputPathError("--output", f"{target} is one of the artifacts being merged")
        verdict = merge([(str(path), load_artifact(path)) for path in artifacts])
    except (OutputPathError, ArtifactError, MergeError) as exc:
        raise _fail(str(exc), 2) from None
    errors = sorted_errors(verdict, MERGE_SCHEMA)
    if errors:  # our own bug: say so, write nothing
        raise _fail(f"the verdict breaks its schema: {errors[0].message}", 1)
    if target is not None:
        try:
            write_atomic(target, json.dumps(verdict, indent=2) + "\n")
        except OSError as exc:
            raise _fail(f"--output {target}: cannot write: {exc.strerror or exc}", 2) from None
    _print_verdict(verdict)
    raise typer.Exit({"passed": 0, "failed": 1, "inconclusive": 3}[verdict["status"]])


def _fail(message: str, code: int) -> typer.Exit:
    Console(stderr=True).print(f"[bold red]soak merge: error:[/] {escape(message)}", soft_wrap=True)
    return typer.Exit(code)


def _print_verdict(verdict: dict[str, Any]) -> None:
    out = Console(soft_wrap=True)
    out.print(f"job {escape(verdict['run_id'])}: {len(verdict['nodes'])} nodes, {verdict['status'].upper()}")
    if verdict["failure_reason"]:
        out.print(escape(verdict["failure_reason"]))
    for node in verdict["nodes"]:
        ranks = ", ".join(str(r["rank"]) for r in node["ranks"])
        out.print(f"  node {node['node_rank']} ({escape(node['artifact'])}): {node['status']}, ranks {ranks}")
