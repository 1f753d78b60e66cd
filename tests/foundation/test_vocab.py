"""The shipped schemas' enums equal the closed vocabularies defined once in foundation.vocab."""

from __future__ import annotations

from typing import Any

from soakbench.foundation import vocab
from soakbench.foundation.schema import load_schema


def _enum(schema: dict[str, Any], *path: str) -> set[Any]:
    node: Any = schema
    for part in path:
        node = node[part]
    return set(node["enum"])


def test_runtime_manifest_shutdown_vocabulary() -> None:
    manifest = load_schema("runtime-manifest-1.schema.json")
    assert _enum(manifest, "$defs", "classification") == set(vocab.SHUTDOWN_CLASSIFICATIONS)
    shutdown = manifest["properties"]["shutdown"]["properties"]
    assert _enum(shutdown, "owner") == set(vocab.SHUTDOWN_OWNERS)
    assert _enum(shutdown, "phase") == set(vocab.RUN_PHASES)


def test_run_summary_vocabulary() -> None:
    summary = load_schema("run-summary-1.schema.json")["properties"]
    assert _enum(summary, "status") == set(vocab.RUN_STATUSES)
    assert _enum(summary, "failure_classification") == {None, *vocab.SHUTDOWN_FAILURES}


def test_soak_artifact_vocabulary() -> None:
    artifact = load_schema("soak-artifact-0.4.0.schema.json")
    assert _enum(artifact, "$defs", "failure_classification") == {None, *vocab.SOAK_FAILURE_CLASSIFICATIONS}
    older = load_schema("soak-artifact-0.3.0.schema.json")  # frozen: the classes 0.4.0 added are absent
    assert _enum(older, "$defs", "failure_classification") == {
        None,
        *vocab.SOAK_FAILURE_CLASSIFICATIONS,
    } - {"resource_exhaustion"}
    assert _enum(artifact["properties"], "monitor_failure") == {None, *vocab.MONITOR_FAILURES}
    assert _enum(artifact["properties"], "run_status") == {None, *vocab.RUN_STATUSES}


def test_soak_artifact_embedded_shutdown_classification() -> None:
    shutdown = load_schema("soak-artifact-0.3.0.schema.json")["properties"]["shutdown"]["properties"]
    assert _enum(shutdown, "classification") == {None, *vocab.SHUTDOWN_CLASSIFICATIONS}


def test_algorithm_names_have_one_source() -> None:
    from soakbench.runtime.choices import Algo

    assert Algo is vocab.Algo
    assert vocab.ALGOS == ("sac", "flashsac")
