"""``extract-metrics RUN_DIR --last 20 --json``: the last N schema-v1 metric windows of a run.

Reads TensorBoard event files with tensorboard's EventFileLoader (no torch import). Fails closed
(exit 2, message naming the file) when a file's metric schema is missing or unsupported, or when it
holds tags outside schema v1. Historical unversioned files are read only with ``--legacy-unversioned``.

Pure core: ``windows_from_records(files, last, legacy_unversioned) -> dict``; I/O: ``read_event_file``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from runtime.metrics_schema import METRIC_SCHEMA_VERSION, SCHEMA_TAG, TAGS, json_number

EVENT_GLOB = "events.out.tfevents.*"


class MetricsError(Exception):
    """User-facing extraction failure; the CLI prints it and exits 2."""


@dataclass(frozen=True)
class Record:
    """One scalar from an event file: wall time (unix s), step (total_env_steps), tag, value."""

    wall_time: float
    step: int
    tag: str
    value: float


def find_event_files(run_dir: Path) -> list[Path]:
    """Event files under ``run_dir`` (recursively), sorted by path."""
    if not run_dir.is_dir():
        raise MetricsError(f"RUN_DIR {run_dir} is not a directory")
    files = sorted(p for p in run_dir.rglob(EVENT_GLOB) if p.is_file())
    if not files:
        raise MetricsError(f"no TensorBoard event files ({EVENT_GLOB}) under {run_dir}")
    return files


def read_event_file(path: Path) -> list[Record]:
    """Scalar records of one event file: legacy ``simple_value`` scalars and tensor scalars of the
    ``scalars`` plugin (what torch.utils.tensorboard writes today); text/other summaries are skipped."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util.tensor_util import make_ndarray

    records: list[Record] = []
    try:
        for event in EventFileLoader(str(path)).Load():
            if not event.HasField("summary"):
                continue
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    scalar = float(value.simple_value)
                elif value.HasField("tensor") and value.metadata.plugin_data.plugin_name == "scalars":
                    scalar = float(make_ndarray(value.tensor).reshape(()))
                else:
                    continue
                records.append(Record(event.wall_time, int(event.step), value.tag, scalar))
    except Exception as exc:  # a corrupt file is a user-facing error, not a crash
        raise MetricsError(f"cannot read event file {path}: {type(exc).__name__}: {exc}") from exc
    return records


def _file_schema(name: str, records: Sequence[Record], legacy_unversioned: bool) -> int | None:
    """Schema version of one file (None = accepted legacy unversioned); raises MetricsError otherwise."""
    versions = {r.value for r in records if r.tag == SCHEMA_TAG}
    if not versions:
        if legacy_unversioned:
            return None
        raise MetricsError(
            f"{name}: no '{SCHEMA_TAG}' tag: unversioned TensorBoard events are not read by default; "
            "pass --legacy-unversioned to read historical unversioned files explicitly"
        )
    if versions != {float(METRIC_SCHEMA_VERSION)}:
        found = ", ".join(f"{v:g}" for v in sorted(versions))
        raise MetricsError(
            f"{name}: unsupported metric schema version {found}; this extractor supports "
            f"version {METRIC_SCHEMA_VERSION} only"
        )
    unknown = sorted({r.tag for r in records if r.tag not in TAGS})
    if unknown:
        raise MetricsError(
            f"{name}: tags outside metric schema v{METRIC_SCHEMA_VERSION}: {', '.join(unknown)}"
        )
    return METRIC_SCHEMA_VERSION


def windows_from_records(
    files: Mapping[str, Sequence[Record]], last: int, legacy_unversioned: bool = False
) -> dict[str, Any]:
    """Group scalars by step into windows and return the last ``last`` of them.

    ``files`` maps an event-file name to its records. A later record of the same (step, tag) wins
    (a resumed run rewrites a window). Returns ``{metric_schema_version, legacy_unversioned,
    event_files: [{path, schema}], window_count, windows: [{step, wall_time, metrics}]}``."""
    if last < 1:
        raise MetricsError(f"--last must be >= 1, got {last}")
    if not files:
        raise MetricsError("no event files to read")
    listing = []
    merged: dict[int, dict[str, tuple[float, float]]] = {}
    any_legacy = False
    for name, records in files.items():
        schema = _file_schema(name, records, legacy_unversioned)
        any_legacy |= schema is None
        listing.append({"path": name, "schema": schema})
        for r in records:
            if r.tag == SCHEMA_TAG:
                continue
            window = merged.setdefault(r.step, {})
            if r.tag not in window or window[r.tag][0] <= r.wall_time:
                window[r.tag] = (r.wall_time, r.value)
    steps = sorted(merged)
    windows = [
        {
            "step": step,
            "wall_time": max(w for w, _ in merged[step].values()),
            "metrics": {tag: json_number(v) for tag, (_, v) in sorted(merged[step].items())},
        }
        for step in steps[-last:]
    ]
    return {
        "metric_schema_version": None if any_legacy else METRIC_SCHEMA_VERSION,
        "legacy_unversioned": any_legacy,
        "event_files": listing,
        "window_count": len(steps),
        "windows": windows,
    }


def extract_metrics(run_dir: Path, last: int = 20, legacy_unversioned: bool = False) -> dict[str, Any]:
    """Read every event file of ``run_dir`` and return ``windows_from_records`` output (+ run_dir)."""
    run_dir = run_dir.resolve()
    files = {str(p.relative_to(run_dir)): read_event_file(p) for p in find_event_files(run_dir)}
    result = windows_from_records(files, last, legacy_unversioned)
    return {"run_dir": str(run_dir), **result}


app = typer.Typer(add_completion=False, help=__doc__.splitlines()[0] if __doc__ else None)


@app.command()
def extract(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (log_dir) holding TensorBoard event files")],
    last: Annotated[int, typer.Option("--last", help="Number of most recent windows to print")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")] = False,
    legacy_unversioned: Annotated[
        bool, typer.Option("--legacy-unversioned", help="Also read historical files without a schema tag")
    ] = False,
) -> None:
    """Print the last N schema-v1 metric windows of RUN_DIR."""
    try:
        result = extract_metrics(run_dir, last, legacy_unversioned)
    except MetricsError as exc:
        typer.echo(f"extract-metrics: error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(result, indent=2, sort_keys=True))
        return
    from rich.console import Console
    from rich.table import Table

    tags = sorted({t for w in result["windows"] for t in w["metrics"]})
    table = Table(title=f"{result['run_dir']} (schema {result['metric_schema_version']})")
    table.add_column("tag")
    for w in result["windows"]:
        table.add_column(str(w["step"]), justify="right")
    for tag in tags:
        cells = [w["metrics"].get(tag) for w in result["windows"]]
        table.add_row(tag, *("" if c is None else f"{c:.4g}" for c in cells))
    Console().print(table)


def main() -> None:
    """Console-script entry point ``extract-metrics``."""
    app()


if __name__ == "__main__":
    main()
