"""The probe filed at a base commit, for a CI gate: ``probe compare BASE NEW --fail-on-regression``.

    uv run --frozen python scripts/ci/base_probe.py --at BASE_SHA --platform linux-cuda \\
        --task g1_walk_flat --backend mjwarp --num-envs 4096 --output /abs/base-probe.json

Reads ``matrix/evidence/index.json`` as it was at ``--at`` (git, no checkout) and writes the newest filed
probe of that workload there. Exit 2, naming what is filed, when there is none: a gate with nothing to
compare against must not pass by default.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from soakbench.foundation.atomic import write_atomic
from soakbench.harness.probe.artifact import SCHEMA_VERSION

INDEX = "matrix/evidence/index.json"


def matches(artifact: Mapping[str, Any], task: str, backend: str, num_envs: int) -> bool:
    """Whether a probe artifact measured exactly this workload, as `probe compare` requires: the same
    task, env count and backend set (this backend alone), on the production device (an MJWarp probe on
    Warp's CPU device is a diagnostic), at the schema `probe compare` reads."""
    settings = artifact.get("settings") if isinstance(artifact, Mapping) else None
    if not isinstance(settings, Mapping):
        return False
    return bool(
        artifact.get("schema_version") == SCHEMA_VERSION
        and settings.get("task") == task
        and settings.get("backends") == [backend]
        and settings.get("num_envs") == num_envs
        and (backend != "mjwarp" or settings.get("mjwarp_device") == "cuda")
    )


def newest(
    candidates: Sequence[tuple[str, Mapping[str, Any]]], task: str, backend: str, num_envs: int
) -> tuple[str, Mapping[str, Any]] | None:
    """The newest (by ``created_unix_s``) of the candidates that measured the workload, or None."""
    fitting = [c for c in candidates if matches(c[1], task, backend, num_envs)]
    return max(fitting, key=lambda c: _created(c[1]), default=None)


def _created(artifact: Mapping[str, Any]) -> float:
    value = artifact.get("created_unix_s")
    return float(value) if isinstance(value, int | float) else 0.0


def _show(repo: Path, rev: str, path: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "show", f"{rev}:{path}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        raise FileNotFoundError(f"{rev}:{path}: {done.stderr.strip()}")
    return done.stdout


def filed_probes(repo: Path, rev: str, platform: str) -> list[tuple[str, dict[str, Any]]]:
    """Every probe filed for ``platform`` at ``rev``: (file, artifact)."""
    index = json.loads(_show(repo, rev, INDEX))
    entries = index["entries"] if isinstance(index, Mapping) else None
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
        raise ValueError(f"{INDEX}: 'entries' must be a list of objects")
    files = [e["file"] for e in entries if e.get("kind") == "probe" and e.get("platform") == platform]
    return [(f, json.loads(_show(repo, rev, f))) for f in files]


def _described(artifact: Any) -> str:
    settings = artifact.get("settings") if isinstance(artifact, Mapping) else None
    if not isinstance(settings, Mapping):
        return "a probe without settings"
    backends = settings.get("backends")
    shown = ",".join(map(str, backends)) if isinstance(backends, list) else backends
    return f"{settings.get('task')}/{shown}/{settings.get('num_envs')} envs"


def main(  # noqa: PLR0913 — typer declares one parameter per option
    at: Annotated[str, typer.Option("--at", help="the base commit (any git revision)")],
    platform: Annotated[str, typer.Option("--platform", help="e.g. linux-cuda, linux-cpu")],
    task: Annotated[str, typer.Option("--task")],
    backend: Annotated[str, typer.Option("--backend", help="mujoco or mjwarp")],
    num_envs: Annotated[int, typer.Option("--num-envs", min=1)],
    output: Annotated[Path, typer.Option("--output", help="where to write the base probe (.json)")],
    repo: Annotated[Path, typer.Option("--repo", help="the git repository holding the evidence")] = Path("."),
) -> None:
    """Write the base commit's filed probe of the workload to --output (exit 2 when none is filed)."""
    if at.startswith("-"):  # git would read it as an option
        _refuse(f"--at {at!r}: not a revision")
    if output.suffix != ".json" or not output.parent.is_dir():
        _refuse(f"--output {output}: must be a .json path in an existing directory")
    try:
        candidates = filed_probes(repo, at, platform)
        found = newest(candidates, task, backend, num_envs)
    except (OSError, ValueError, KeyError, TypeError, subprocess.TimeoutExpired) as exc:
        _refuse(f"--at {at}: cannot read the filed evidence: {exc}")
    if found is None:
        filed = [_described(a) for _f, a in candidates]
        typer.echo(
            f"base_probe: no {platform} probe of {task}/{backend} at {num_envs} envs is filed at {at} "
            f"(filed: {', '.join(filed) or 'none'}); file one with `matrix ingest` first",
            err=True,
        )
        raise typer.Exit(2)
    write_atomic(output, json.dumps(found[1], indent=2) + "\n")
    typer.echo(f"base probe: {found[0]} -> {output}")


def _refuse(message: str) -> NoReturn:
    typer.echo(f"base_probe: {message}", err=True)
    raise typer.Exit(2)


if __name__ == "__main__":
    typer.run(main)
