"""The trainer's contract, checked on the consumer side: run_summary.json in, typed violations out.

Pure functions over the parsed run_summary (docs/soak-reference.md, "The trainer's contract"). The soak
monitor applies them to the summary it reads from the log dir; ``matrix ingest`` applies them again to the
summary embedded in a soak artifact. Each check returns every ``Violation`` it finds (empty when the
contract holds); a check whose inputs are missing or of the wrong type skips the rules it cannot
evaluate, because the schema check already reports those fields.

==========================  ===============================================================
check                       rules
==========================  ===============================================================
``schema_violations``       ``metric_schema_version`` and ``runtime_manifest.schema_version``
                            are the integer 1 (not "1", 1.0 or true); the summary and its
                            manifest validate against run-summary-1 / runtime-manifest-1
``replay_violations``       occupancy = published − released; 0 ≤ occupancy ≤ high_water ≤
                            depth; high_water > 0 once anything was published; early_returns
                            = dropped_batches = closed_returns + stop_returns; depth > 0 and
                            slot_rows > 0; waits finite and ≥ 0
``inference_violations``    final_publication_lag = published_version − consumed_version;
                            final_queue_depth = min(lag, slot_capacity); max_in_flight ≤
                            slot_capacity
``shutdown_violations``     classification in the closed vocabulary; owner and phase
                            non-empty; exception null or {type, message}; cleanup.errors a
                            list; a non-zero exit never claims ``normal_completion``
==========================  ===============================================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from soakbench.foundation.schema import json_path, sorted_errors
from soakbench.foundation.vocab import SHUTDOWN_CLASSIFICATIONS

RUN_SUMMARY_SCHEMA = "run-summary-1.schema.json"
INGRESS = "runtime_manifest.replay_ingress"
FLIGHT = "runtime_manifest.inference_flight"
SHUTDOWN = "runtime_manifest.shutdown"


@dataclass(frozen=True)
class Violation:
    """One broken rule: the field (dotted path in the run_summary), its value and the rule."""

    classification: str
    field: str
    value: Any
    rule: str

    def message(self) -> str:
        return f"{self.field} = {_show(self.value)}: {self.rule}"

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "value": _plain(self.value), "rule": self.rule}


def _show(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _plain(value: Any) -> Any:
    """``value`` as plain JSON (non-finite floats and other objects as their repr)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    return _show(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _section(summary: Mapping[str, Any], dotted: str) -> Mapping[str, Any]:
    node: Any = summary
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def schema_violations(summary: Any) -> list[Violation]:
    """The version gates, then every schema error of the summary (its manifest included)."""
    found: list[Violation] = []
    manifest = summary.get("runtime_manifest") if isinstance(summary, Mapping) else None
    gates = (
        (
            "metric_schema_version",
            summary.get("metric_schema_version") if isinstance(summary, Mapping) else None,
        ),
        (
            "runtime_manifest.schema_version",
            manifest.get("schema_version") if isinstance(manifest, Mapping) else None,
        ),
    )
    for name, value in gates:
        if not (_is_int(value) and value == 1):
            found.append(Violation("schema_violation", name, value, "must be the integer 1"))
    for error in sorted_errors(summary, RUN_SUMMARY_SCHEMA):
        path = json_path(error.absolute_path).removeprefix("$").removeprefix(".") or "$"
        found.append(Violation("schema_violation", path, error.instance, error.message))
    return found


def _ints(section: Mapping[str, Any], *names: str) -> tuple[int, ...] | None:
    values = tuple(section.get(n) for n in names)
    return values if all(_is_int(v) for v in values) else None  # type: ignore[return-value]  # checked


def _replay_counts(ingress: Mapping[str, Any]) -> list[Violation]:
    out: list[Violation] = []
    counts = _ints(ingress, "published_sequence", "release_sequence", "final_occupancy")
    if counts is not None and counts[2] != counts[0] - counts[1]:
        out.append(
            Violation(
                "run_contract_violation",
                f"{INGRESS}.final_occupancy",
                counts[2],
                f"must equal published_sequence - release_sequence = {counts[0] - counts[1]}",
            )
        )
    bounds = _ints(ingress, "final_occupancy", "high_water_occupancy", "depth")
    if bounds is not None and not 0 <= bounds[0] <= bounds[1] <= bounds[2]:
        out.append(
            Violation(
                "run_contract_violation",
                f"{INGRESS}.high_water_occupancy",
                bounds[1],
                f"must satisfy 0 <= final_occupancy ({bounds[0]}) <= high_water_occupancy <= depth ({bounds[2]})",
            )
        )
    published = _ints(ingress, "published_sequence", "high_water_occupancy")
    if published is not None and published[0] > 0 and published[1] <= 0:
        out.append(
            Violation(
                "run_contract_violation",
                f"{INGRESS}.high_water_occupancy",
                published[1],
                f"must be > 0 on a run that published {published[0]} batches",
            )
        )
    return out


def _replay_returns(ingress: Mapping[str, Any]) -> list[Violation]:
    out: list[Violation] = []
    returns = _ints(ingress, "early_returns", "dropped_batches", "closed_returns", "stop_returns")
    if returns is not None:
        early, dropped, closed, stop = returns
        if dropped != early:
            out.append(
                Violation(
                    "run_contract_violation",
                    f"{INGRESS}.dropped_batches",
                    dropped,
                    f"must equal early_returns ({early}): each early return drops one batch",
                )
            )
        if early != closed + stop:
            out.append(
                Violation(
                    "run_contract_violation",
                    f"{INGRESS}.early_returns",
                    early,
                    f"must equal closed_returns + stop_returns = {closed + stop}",
                )
            )
    return out


def _replay_shape(ingress: Mapping[str, Any]) -> list[Violation]:
    out: list[Violation] = []
    for name in ("depth", "slot_rows"):
        value = ingress.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
            out.append(Violation("run_contract_violation", f"{INGRESS}.{name}", value, "must be > 0"))
    for name in ("backpressure_waits", "backpressure_wait_s", "learner_wait_s"):
        value = ingress.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue  # the schema reports a missing or non-numeric field
        if not (math.isfinite(value) and value >= 0):
            out.append(
                Violation("run_contract_violation", f"{INGRESS}.{name}", value, "must be finite and >= 0")
            )
    return out


def replay_violations(summary: Mapping[str, Any]) -> list[Violation]:
    """The replay ingress cross-invariants of ``runtime_manifest.replay_ingress``."""
    ingress = _section(summary, INGRESS)
    return [*_replay_counts(ingress), *_replay_returns(ingress), *_replay_shape(ingress)]


def inference_violations(summary: Mapping[str, Any]) -> list[Violation]:
    """The inference ring cross-invariants of ``runtime_manifest.inference_flight``."""
    flight = _section(summary, FLIGHT)
    out: list[Violation] = []
    versions = _ints(flight, "published_version", "consumed_version", "final_publication_lag")
    if versions is not None and versions[2] != versions[0] - versions[1]:
        out.append(
            Violation(
                "run_contract_violation",
                f"{FLIGHT}.final_publication_lag",
                versions[2],
                f"must equal published_version - consumed_version = {versions[0] - versions[1]}",
            )
        )
    depth = _ints(flight, "final_queue_depth", "final_publication_lag", "slot_capacity")
    if depth is not None and depth[0] != min(depth[1], depth[2]):
        out.append(
            Violation(
                "run_contract_violation",
                f"{FLIGHT}.final_queue_depth",
                depth[0],
                f"must equal min(final_publication_lag, slot_capacity) = {min(depth[1], depth[2])}",
            )
        )
    peak = _ints(flight, "max_in_flight", "slot_capacity")
    if peak is not None and peak[0] > peak[1]:
        out.append(
            Violation(
                "run_contract_violation",
                f"{FLIGHT}.max_in_flight",
                peak[0],
                f"must be <= slot_capacity ({peak[1]})",
            )
        )
    return out


def _text_problem(value: Any) -> bool:
    return not isinstance(value, str) or not value.strip()


def _exception_problem(value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, Mapping) or set(value) != {"type", "message"}:
        return True
    return not all(isinstance(value[k], str) for k in ("type", "message"))


def shutdown_violations(summary: Mapping[str, Any], exit_code: int | None) -> list[Violation]:
    """The shutdown contract of ``runtime_manifest.shutdown``; ``exit_code`` is the trainer's observed
    return code (the summary's own ``exit_code`` when the monitor did not see one)."""
    shutdown = _section(summary, SHUTDOWN)
    classification = shutdown.get("classification")
    cleanup = shutdown.get("cleanup")
    errors = cleanup.get("errors") if isinstance(cleanup, Mapping) else None
    code = exit_code if exit_code is not None else summary.get("exit_code")
    checks = (
        (
            "classification",
            classification,
            classification not in SHUTDOWN_CLASSIFICATIONS,
            f"must be one of {', '.join(SHUTDOWN_CLASSIFICATIONS)}",
        ),
        ("owner", shutdown.get("owner"), _text_problem(shutdown.get("owner")), "must be a non-empty string"),
        ("phase", shutdown.get("phase"), _text_problem(shutdown.get("phase")), "must be a non-empty string"),
        (
            "exception",
            shutdown.get("exception"),
            _exception_problem(shutdown.get("exception")),
            "must be null or {type: str, message: str}",
        ),
        ("cleanup.errors", errors, not isinstance(errors, list), "must be a list"),
        (
            "classification",
            classification,
            _is_int(code) and code != 0 and classification == "normal_completion",
            f"a trainer that exited {code} cannot claim normal_completion",
        ),
    )
    return [
        Violation("shutdown_contract_violation", f"{SHUTDOWN}.{name}", value, rule)
        for name, value, broken, rule in checks
        if broken
    ]
