"""``extract-metrics RUN_DIR --last 20 --json``: the last N schema-v1 metric windows of one run, and
their averages as named rows with units.

Reads TensorBoard event files with tensorboard's EventFileLoader (no torch import). Fails closed
(exit 2, message naming the file) when a file's metric schema is missing or unsupported, when it holds
tags outside schema v1, or when one run mixes schema-stamped and unstamped files. Historical unversioned
files are read only with ``--legacy-unversioned``. A run is one directory holding event files; a
directory whose tree holds several runs is refused (naming them) unless ``--all-runs`` asks for each
run separately.

Pure core: ``windows_from_records(files, last, legacy_unversioned) -> dict`` and ``runs_of(names)``;
I/O: ``read_event_file``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from soakbench.runtime.metrics_schema import METRIC_SCHEMA_VERSION, SCHEMA_TAG, TAGS, json_number

if TYPE_CHECKING:
    from rich.table import Table

EVENT_GLOB = "events.out.tfevents.*"
ROOT_RUN = "."  # the run whose event files lie directly in RUN_DIR

# Unit of each schema-v1 tag, for the averages rows (TAGS in runtime/metrics_schema.py says what each
# tag means; a test keeps the two key sets equal).
UNITS: dict[str, str] = {
    "loss/critic": "loss",
    "loss/actor": "value units",
    "loss/alpha": "loss",
    "policy/entropy": "nats",
    "policy/alpha": "1",
    "q/mean": "value units",
    "q/min": "value units",
    "q/max": "value units",
    "learner/critic_grad_norm": "L2 norm",
    "learner/reward_scale": "1",
    "learner/updates_total": "updates",
    "learner/replay_size": "rows",
    "learner/updates_per_s": "updates/s",
    "learner/ingress_wait_share": "fraction",
    "episode/reward_mean": "return",
    "episode/length_mean": "control steps",
    "episode/count": "episodes",
    "throughput/env_steps_per_s": "env steps/s",
    "throughput/total_env_steps": "env steps",
    "throughput/iteration": "iterations",
    "replay/occupancy": "slots",
    "replay/high_water_occupancy": "slots",
    "replay/published_sequence": "slots",
    "replay/release_sequence": "slots",
    "replay/backpressure_waits": "waits",
    "replay/backpressure_wait_s": "s",
    "replay/dropped_batches": "batches",
    "replay/early_returns": "returns",
    "inference/queue_depth": "publications",
    "inference/publication_lag": "versions",
    "inference/max_in_flight": "publications",
    "inference/max_publication_lag": "versions",
    "inference/events": "events",
    "inference/published_version": "version",
    "inference/consumed_version": "version",
}


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


def _check_not_mixed(listing: Sequence[Mapping[str, Any]]) -> None:
    """A run is read either as schema v1 or as legacy unversioned, never as a blend of both."""
    stamped = [f["path"] for f in listing if f["schema"] is not None]
    unstamped = [f["path"] for f in listing if f["schema"] is None]
    if stamped and unstamped:
        raise MetricsError(
            f"mixed schema-stamped ({', '.join(stamped)}) and unstamped ({', '.join(unstamped)}) event "
            "files in one run; read them as separate runs or move the historical files away"
        )


def _merge(
    files: Mapping[str, Sequence[Record]], legacy_unversioned: bool
) -> tuple[list[dict[str, Any]], dict[int, dict[str, tuple[float, float]]]]:
    """Per-file listing and step -> tag -> (wall_time, value); a later record of a (step, tag) wins."""
    listing: list[dict[str, Any]] = []
    merged: dict[int, dict[str, tuple[float, float]]] = {}
    for name, records in files.items():
        listing.append({"path": name, "schema": _file_schema(name, records, legacy_unversioned)})
        for r in records:
            if r.tag == SCHEMA_TAG:
                continue
            window = merged.setdefault(r.step, {})
            if r.tag not in window or window[r.tag][0] <= r.wall_time:
                window[r.tag] = (r.wall_time, r.value)
    return listing, merged


def averages(windows: Sequence[Mapping[str, Any]], legacy_unversioned: bool) -> list[dict[str, Any]]:
    """One row per tag seen in ``windows``: the mean of its finite values there, with its unit.

    ``values`` counts the windows averaged, ``non_finite`` those whose value was NaN/inf (null in the
    windows); ``mean`` is null when no value was finite. Unversioned files have no known units (null)."""
    rows = []
    for tag in sorted({t for w in windows for t in w["metrics"]}):
        present = [w["metrics"][tag] for w in windows if tag in w["metrics"]]
        finite = [float(v) for v in present if v is not None]
        rows.append(
            {
                "tag": tag,
                "unit": None if legacy_unversioned else UNITS[tag],
                "mean": json_number(sum(finite) / len(finite)) if finite else None,
                "values": len(finite),
                "non_finite": len(present) - len(finite),
            }
        )
    return rows


def windows_from_records(
    files: Mapping[str, Sequence[Record]], last: int, legacy_unversioned: bool = False
) -> dict[str, Any]:
    """Group one run's scalars by step into windows; return the last ``last`` and their averages.

    ``files`` maps an event-file name to its records. A later record of the same (step, tag) wins
    (a resumed run rewrites a window). Returns ``{metric_schema_version, legacy_unversioned,
    event_files: [{path, schema}], window_count, last, averages: [{tag, unit, mean, values,
    non_finite}], windows: [{step, wall_time, metrics}]}``."""
    if last < 1:
        raise MetricsError(f"--last must be >= 1, got {last}")
    if not files:
        raise MetricsError("no event files to read")
    listing, merged = _merge(files, legacy_unversioned)
    _check_not_mixed(listing)
    any_legacy = any(f["schema"] is None for f in listing)
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
        "last": last,
        "averages": averages(windows, any_legacy),
        "windows": windows,
    }


def runs_of(names: Sequence[str]) -> dict[str, list[str]]:
    """Event-file paths (POSIX, relative to RUN_DIR) grouped by run: the directory that holds them."""
    runs: dict[str, list[str]] = {}
    for name in names:
        parent = name.rpartition("/")[0] or ROOT_RUN
        runs.setdefault(parent, []).append(name)
    return dict(sorted(runs.items()))


def _single_run(runs: Mapping[str, Sequence[str]], run_dir: Path) -> str:
    if len(runs) > 1:
        raise MetricsError(
            f"{run_dir} holds the event files of {len(runs)} runs: {', '.join(runs)}; pass one run "
            "directory, or --all-runs to list each run separately"
        )
    return next(iter(runs))


def extract_metrics(
    run_dir: Path, last: int = 20, legacy_unversioned: bool = False, all_runs: bool = False
) -> dict[str, Any]:
    """Read the event files of ``run_dir``: one run's ``windows_from_records`` output (+ run_dir), or
    with ``all_runs`` ``{run_dir, runs: [{run, ...}]}`` with one entry per run directory."""
    run_dir = run_dir.resolve()
    paths = {p.relative_to(run_dir).as_posix(): p for p in find_event_files(run_dir)}
    runs = runs_of(list(paths))
    chosen = list(runs) if all_runs else [_single_run(runs, run_dir)]
    reports = [{"run": run, **_run_report(run, runs[run], paths, last, legacy_unversioned)} for run in chosen]
    if all_runs:
        return {"run_dir": str(run_dir), "runs": reports}
    (report,) = reports
    del report["run"]
    return {"run_dir": str(run_dir), **report}


def _run_report(
    run: str, names: Sequence[str], paths: Mapping[str, Path], last: int, legacy_unversioned: bool
) -> dict[str, Any]:
    files = {name: read_event_file(paths[name]) for name in names}
    try:
        return windows_from_records(files, last, legacy_unversioned)
    except MetricsError as exc:
        raise MetricsError(f"run {run}: {exc}") from exc


app = typer.Typer(add_completion=False, help=__doc__.splitlines()[0] if __doc__ else None)


@app.command()
def extract(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (log_dir) holding TensorBoard event files")],
    last: Annotated[int, typer.Option("--last", help="Number of most recent windows to print")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table")] = False,
    legacy_unversioned: Annotated[
        bool, typer.Option("--legacy-unversioned", help="Also read historical files without a schema tag")
    ] = False,
    all_runs: Annotated[
        bool, typer.Option("--all-runs", help="RUN_DIR holds several runs: report each one separately")
    ] = False,
) -> None:
    """Print the last N schema-v1 metric windows of RUN_DIR and their averages (one row per tag)."""
    try:
        result = extract_metrics(run_dir, last, legacy_unversioned, all_runs)
    except MetricsError as exc:
        typer.echo(f"extract-metrics: error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(result, indent=2, sort_keys=True, allow_nan=False))
        return
    from rich.console import Console

    console = Console()
    for run, report in _reports(result):
        console.print(_table(f"{run} (schema {report['metric_schema_version']})", report))


def _reports(result: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    if "runs" in result:
        return [(str(Path(result["run_dir"]) / r["run"]), r) for r in result["runs"]]
    return [(result["run_dir"], result)]


def _table(title: str, report: Mapping[str, Any]) -> Table:
    """Rows: tags; columns: unit, mean over the last N windows, then each window."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("tag")
    table.add_column("unit")
    table.add_column(f"mean, last {len(report['windows'])}", justify="right")
    for w in report["windows"]:
        table.add_column(str(w["step"]), justify="right")
    for row in report["averages"]:
        cells = [w["metrics"].get(row["tag"]) for w in report["windows"]]
        table.add_row(row["tag"], row["unit"] or "?", *(_fmt(c) for c in [row["mean"], *cells]))
    return table


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def main() -> None:
    """Console-script entry point ``extract-metrics``."""
    app()


if __name__ == "__main__":
    main()
