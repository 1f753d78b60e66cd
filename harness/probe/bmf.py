"""Bencher Metric Format (BMF) JSON of a probe and of a probe comparison: ``probe --bmf PATH`` and
``probe compare --bmf PATH``.

    { "probe/<task>/<backend>/<num_envs>envs": { "<measure slug>": {"value": v, "lower_value": lo,
                                                                   "upper_value": hi} } }

Per backend: ``env_steps_per_s`` (env control steps/s) and ``efficiency``, each the median of the
artifact's raw per-round samples (the artifact's own ``summary`` median) with the 95 % two-level
bootstrap interval of that median (:func:`harness.two_runs.stats.median_interval`, seeded, the interval
``probe history`` shows); a comparison adds ``env_steps_per_s_ratio`` and ``efficiency_ratio``, the
report's ratio NEW/BASE with its interval. A figure without an interval gets no ``lower_value`` /
``upper_value``. The document is validated against ``bencher-metric-format.schema.json`` before an
atomic write. See docs/probe.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from soakbench.foundation.atomic import write_atomic
from soakbench.foundation.schema import validation_errors
from soakbench.harness.probe.samples import measure_groups
from soakbench.harness.two_runs.stats import median_interval

BMF_SCHEMA = "bencher-metric-format.schema.json"
# probe measure -> BMF measure slug (Bencher: at most 64 characters, kebab or snake case)
SLUGS: dict[str, str] = {"env_control_steps_per_s": "env_steps_per_s", "efficiency": "efficiency"}
RATIO_SUFFIX = "_ratio"


class BmfPathError(Exception):
    """``--bmf`` does not name a writable place for the document: exit 2 before anything runs."""


def bmf_output(value: str | None) -> Path | None:
    """``--bmf``'s value as an absolute ``.json`` path in an existing, writable directory (None: not
    asked); BmfPathError naming ``--bmf`` otherwise."""
    if value is None:
        return None
    out = Path(value)
    if not out.is_absolute() or out.suffix != ".json" or out.is_dir() or not out.parent.is_dir():
        raise BmfPathError(
            f"--bmf must be an absolute .json file path in an existing directory, got {value!r}"
        )
    if not os.access(out.parent, os.W_OK):
        raise BmfPathError(f"--bmf parent directory {out.parent} is not writable")
    return out


def benchmark_name(settings: Mapping[str, Any], backend: str) -> str:
    """``probe/<task>/<backend>/<num_envs>envs``: stable across runs of one workload and unique per
    backend; mjwarp on Warp's CPU device (a diagnostic lane) is ``mjwarp-cpu``."""
    lane = f"{backend}-cpu" if backend == "mjwarp" and settings.get("mjwarp_device") == "cpu" else backend
    return f"probe/{settings['task']}/{lane}/{settings['num_envs']}envs"


def metric(value: float, interval: tuple[float, float] | None) -> dict[str, float]:
    """One BMF metric; ``lower_value``/``upper_value`` only when there is an interval."""
    out = {"value": float(value)}
    if interval is not None:
        out["lower_value"], out["upper_value"] = float(interval[0]), float(interval[1])
    return out


def backend_metrics(entry: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """The headline measures of one ``backends.<name>`` entry of a 0.4.0 artifact: the summary's median
    with the two-level bootstrap interval of the raw samples (no interval without raw samples)."""
    out = {}
    for measure, slug in SLUGS.items():
        median = float(entry["summary"][measure]["median"])
        processes = entry.get("processes")
        interval = None
        if processes:
            _, low, high = median_interval(measure_groups(processes, measure))
            interval = (low, high)
        out[slug] = metric(median, interval)
    return out


def probe_bmf(artifact: Mapping[str, Any]) -> dict[str, Any]:
    """The BMF document of one probe artifact: one benchmark per backend."""
    settings = artifact["settings"]
    return {
        benchmark_name(settings, backend): backend_metrics(entry)
        for backend, entry in artifact["backends"].items()
    }


def compare_bmf(report: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The BMF document of a comparison: the NEW probe's measures plus, per backend, the ratio NEW/BASE
    of each headline measure the report compared, with its interval."""
    document = probe_bmf(new)
    for row in report["measures"]:
        slug = SLUGS.get(row["measure"])
        if slug is not None:
            name = benchmark_name(new["settings"], row["backend"])
            document[name][slug + RATIO_SUFFIX] = metric(row["ratio"], (row["ci_low"], row["ci_high"]))
    return document


def bmf_text(document: Mapping[str, Any]) -> str:
    """``document`` as strict JSON text once it is valid BMF; ValueError naming the first violation."""
    errors = validation_errors(document, BMF_SCHEMA)
    if errors:
        raise ValueError(f"BMF document violates {BMF_SCHEMA}: {errors[0]}")
    return json.dumps(document, indent=2, allow_nan=False) + "\n"


def write_bmf(path: Path, document: Mapping[str, Any]) -> None:
    """Validate ``document`` (ValueError, nothing written), then write it atomically."""
    write_atomic(path, bmf_text(document))


def write_probe_bmf(path: Path, artifact: Mapping[str, Any]) -> str | None:
    """Write the BMF document of a probe artifact; why it was not written (None: it was)."""
    try:
        write_bmf(path, probe_bmf(artifact))
    except (ValueError, OSError) as exc:  # an invalid document is our bug; nothing written
        return f"BMF not written: {exc}"
    return None
