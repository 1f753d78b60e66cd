"""Re-derive a soak artifact's verdicts from its own evidence, trusting none of its self-declared results.

``matrix ingest``, ``generate`` and ``check`` call ``check_soak_evidence`` on every soak artifact. The
samples file the artifact names is read beside the artifact and must match the recorded sha256; the
samples are judged again by the monitor's own judgement (``harness.soak.verdicts.judgement.judge``),
under the facts and gates the artifact recorded, and every row, trend and summary is diffed with what
was filed. ``disagreements`` is the pure part: artifact and samples in, one sentence per disagreement
out, each naming the row or field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from soakbench.harness.soak.verdicts.judgement import (
    GPU_ROWS,
    GpuAssessment,
    Judgement,
    LeakTrends,
    facts_from_artifact,
    gates_from_artifact,
    judge,
    summary_sections,
)
from soakbench.harness.two_runs.fields import dig
from soakbench.matrix.model import MatrixInputError

#: artifact fields read from the run_summary -> the pass-table row that judges them
_SECTION_ROWS: dict[str, str] = {
    "run_status": "run_status",
    "inference.final_queue_depth": "inference_drained",
    "inference.final_publication_lag": "inference_drained",
    "replay.final_occupancy": "replay_final_occupancy",
    "replay.dropped_batches": "replay_no_drops",
    "replay.early_returns": "replay_no_drops",
    "replay.release_sequence": "replay_release_sequence",
    "replay.published_sequence": "replay_published_sequence",
    "replay.ingress_slot_rows": "replay_published_sequence",
    "replay.total_env_steps": "replay_published_sequence",
    "shutdown.classification": "shutdown_classification",
    "shutdown.cleanup_errors": "shutdown_cleanup_errors",
    "shutdown.exception": "run_failure",
}
#: fields an artifact needs to be re-derived (older artifacts lack them)
REQUIRED = ("samples_sha256", "run_summary", "run_contract", "resource_summary.observation")


def _plain(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value, default=str))


def _flat(section: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {f"{prefix}.{k}": v for k, v in section.items()}


def missing_fields(artifact: Mapping[str, Any]) -> list[str]:
    """The re-derivation fields the artifact lacks."""
    return [name for name in REQUIRED if dig(artifact, name) is None and not _has(artifact, name)]


def _has(artifact: Mapping[str, Any], dotted: str) -> bool:
    *parents, leaf = dotted.split(".")
    node = dig(artifact, ".".join(parents)) if parents else artifact
    return isinstance(node, Mapping) and leaf in node


def section_disagreements(artifact: Mapping[str, Any]) -> list[str]:
    """The artifact's run_summary-derived fields versus what its embedded run_summary says."""
    derived = summary_sections(artifact.get("run_summary"))
    recorded_flat: dict[str, Any] = {"run_status": artifact.get("run_status")}
    derived_flat: dict[str, Any] = {"run_status": derived["run_status"]}
    for name in ("inference", "replay", "shutdown"):
        recorded_flat |= _flat(artifact.get(name) or {}, name)
        derived_flat |= _flat(derived[name], name)
    out = []
    for field, value in derived_flat.items():
        if _plain(recorded_flat.get(field)) != _plain(value):
            row = _SECTION_ROWS.get(field)
            where = f"{field} (row {row})" if row else field
            out.append(
                f"{where}: the artifact records {recorded_flat.get(field)!r}, its run_summary says {value!r}"
            )
    return out


def published_disagreement(artifact: Mapping[str, Any]) -> list[str]:
    """``replay.published_sequence`` versus ``total_env_steps / ingress_slot_rows`` (run artifacts)."""
    replay = artifact.get("replay") or {}
    published, steps, rows = (
        replay.get(k) for k in ("published_sequence", "total_env_steps", "ingress_slot_rows")
    )
    if artifact.get("mode") != "run":
        return []
    if not (isinstance(published, int) and isinstance(steps, int) and isinstance(rows, int)):
        return []  # a failed run may lack them; the section check compares them with the run_summary
    if rows > 0 and steps % rows == 0 and steps // rows == published:
        return []
    return [
        f"replay.published_sequence (row replay_published_sequence): {published} is not total_env_steps / "
        f"ingress_slot_rows = {steps} / {rows}"
    ]


def _leak_disagreements(artifact: Mapping[str, Any], leak: LeakTrends) -> list[str]:
    recorded = dig(artifact, "resource_summary.leak_verdicts") or {}
    out = []
    for name, verdict in leak.verdicts.items():
        if recorded.get(name) != verdict:
            out.append(
                f"resource_summary.leak_verdicts.{name} (row leak_verdicts): recorded {recorded.get(name)!r}, "
                f"the samples say {verdict!r}"
            )
    return out


def _observation_disagreements(artifact: Mapping[str, Any], observation: Mapping[str, Any]) -> list[str]:
    recorded = dig(artifact, "resource_summary.observation.classes") or {}
    out = []
    for name, entry in observation["classes"].items():
        said = recorded.get(name) if isinstance(recorded, Mapping) else None
        if _plain(said) != _plain(entry):
            out.append(
                f"resource_summary.observation.classes.{name} (row trend_observation): recorded "
                f"{said!r}, the samples say {entry!r}"
            )
    return out


def _predates(name: str, artifact: Mapping[str, Any], judgement: Judgement) -> bool:
    """True for a row the artifact is older than: the evidence the row judges is not in it."""
    if name == "throughput_drift":
        return judgement.drift is None
    if name in GPU_ROWS:
        return "gpu_health" not in artifact
    section = {"oom_kills": "oom", "tree_deaths": "tree_exits"}.get(name)
    return section is not None and section not in artifact


def _table_disagreements(artifact: Mapping[str, Any], judgement: Judgement) -> list[str]:
    evaluation = judgement.evaluation
    recorded = {row.get("name"): row for row in artifact.get("criteria") or [] if isinstance(row, Mapping)}
    out = []
    for row in evaluation.criteria_dicts():
        said = recorded.get(row["name"])
        if said is None and _predates(row["name"], artifact, judgement):
            continue
        if said is None:
            out.append(f"row {row['name']}: missing from the recorded pass table")
        elif said.get("result") != row["result"]:
            out.append(
                f"row {row['name']}: recorded {said.get('result')!r}, re-derived {row['result']!r} "
                f"(value {_plain(row['value'])!r})"
            )
        elif judgement.observation.run_summary is not None and _plain(said.get("value")) != _plain(
            row["value"]
        ):
            out.append(
                f"row {row['name']}: recorded value {said.get('value')!r}, re-derived {row['value']!r}"
            )
    extra = sorted(set(recorded) - {row["name"] for row in evaluation.criteria_dicts()}, key=str)
    out += [f"row {name}: not a row of the pass table" for name in extra]
    for field, value in (
        ("status", evaluation.status),
        ("failure_classification", evaluation.failure_classification),
    ):
        if artifact.get(field) != value:
            out.append(f"{field}: recorded {artifact.get(field)!r}, re-derived {value!r}")
    return out


def disagreements(artifact: Mapping[str, Any], samples: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every way ``artifact`` disagrees with its samples and its embedded run_summary (pure): the samples
    are judged again by the monitor's own judgement, under the facts and gates the artifact recorded.

    Args:
        artifact: a schema-valid 0.3.0 or 0.4.0 soak artifact that has every ``REQUIRED`` field.
        samples: the records of the samples file it names, in order.
    """
    judgement = judge(samples, facts=facts_from_artifact(artifact), gates=gates_from_artifact(artifact))
    out: list[str] = []
    count = dig(artifact, "resource_summary.sample_count")
    if count != len(samples):
        out.append(f"resource_summary.sample_count: recorded {count}, the samples file holds {len(samples)}")
    out += section_disagreements(artifact)
    out += published_disagreement(artifact)
    out += _leak_disagreements(artifact, judgement.leak)
    out += _observation_disagreements(artifact, judgement.classes)
    out += _gpu_disagreements(artifact, judgement.gpu)
    said = dig(artifact, "throughput_drift.verdict")
    if judgement.drift is not None and said != judgement.drift["verdict"]:
        out.append(
            f"throughput_drift.verdict: recorded {said!r}, the samples say {judgement.drift['verdict']!r}"
        )
    out += _survival_disagreements(artifact, judgement)
    out += _table_disagreements(artifact, judgement)
    return out


def _survival_disagreements(artifact: Mapping[str, Any], judgement: Judgement) -> list[str]:
    """The survival verdicts the artifact records versus those its samples and limits give (a 0.3.0
    artifact records none)."""
    recorded, derived = artifact.get("survival"), judgement.survival
    if not isinstance(recorded, Mapping) or derived is None:
        return []
    out = []
    if recorded.get("verdict") != derived.verdict:
        out.append(
            f"survival.verdict: recorded {recorded.get('verdict')!r}, the samples say {derived.verdict!r}"
        )
    said = {(c.get("class"), c.get("scope")): c.get("verdict") for c in recorded.get("classes") or ()}
    again = {(c.resource_class, c.scope): c.verdict for c in derived.classes}
    for key in sorted(set(said) | set(again), key=str):
        if said.get(key) != again.get(key):
            out.append(
                f"survival {key[0]} ({key[1]}): recorded {said.get(key)!r}, the samples say {again.get(key)!r}"
            )
    return out


def _gpu_disagreements(artifact: Mapping[str, Any], gpu: GpuAssessment | None) -> list[str]:
    """The GPU summaries the artifact records versus those its samples and counters give."""
    if gpu is None:
        return []
    derived = {
        "throttle": ("gpu_throttle", gpu.throttle),
        "ecc_uncorrected": ("gpu_ecc_uncorrected", gpu.ecc_uncorrected),
    }
    recorded = artifact["gpu_health"]
    return [
        f"gpu_health.{field} (row {row}): recorded {recorded.get(field)!r}, the samples say {value!r}"
        for field, (row, value) in derived.items()
        if _plain(recorded.get(field)) != _plain(value)
    ]


def samples_file(source: Path, artifact: Mapping[str, Any]) -> Path:
    """The samples file the artifact names, looked up beside the artifact (by its file name)."""
    return source.parent / Path(str(artifact.get("samples_path", ""))).name


def read_samples(path: Path, display: str, digest: str) -> list[dict[str, Any]]:
    """The samples at ``path`` after checking their sha256; MatrixInputError naming the path otherwise."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise MatrixInputError(
            display, "samples_path", f"the samples file {path} cannot be read ({exc.strerror or exc})"
        ) from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise MatrixInputError(
            display,
            "samples_sha256",
            f"the samples file {path} has sha256 {actual}, the artifact records {digest}",
        )
    samples = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise MatrixInputError(
                display, "samples_path", f"{path} line {number}: not JSON ({exc.msg})"
            ) from None
        if not isinstance(record, dict):
            raise MatrixInputError(display, "samples_path", f"{path} line {number}: not a JSON object")
        samples.append(record)
    return samples


def check_soak_evidence(source: Path, display: str, artifact: Mapping[str, Any]) -> None:
    """Refuse (MatrixInputError, exit 2) a soak artifact whose verdicts its own evidence does not bear out."""
    missing = missing_fields(artifact)
    if missing:
        raise MatrixInputError(
            display,
            missing[0],
            f"missing ({', '.join(missing)}): the artifact predates re-derivable soak evidence; re-run the "
            "soak with this soakbench and ingest the new artifact",
        )
    samples = read_samples(samples_file(source, artifact), display, str(artifact["samples_sha256"]))
    try:
        found = disagreements(artifact, samples)
    except (ValueError, KeyError, TypeError) as exc:  # a malformed sample or field the schema let through
        raise MatrixInputError(display, "samples_path", f"cannot re-derive the verdicts: {exc}") from None
    if found:
        head, _, first = found[0].partition(": ")
        others = "; ".join(found[1:8]) + (f"; ... and {len(found) - 8} more" if len(found) > 8 else "")
        also = f" (also: {others})" if others else ""
        raise MatrixInputError(display, head, f"{first}; the artifact's own evidence disagrees{also}")
