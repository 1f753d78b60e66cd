"""The Bencher Metric Format schema (``bencher-metric-format.schema.json``) against the format's
documentation (https://bencher.dev/docs/reference/bencher-metric-format): its examples pass, malformed
documents fail with the path of the fault."""

from __future__ import annotations

from typing import Any

import pytest

from soakbench.foundation.schema import schema_validator, validation_errors

SCHEMA = "bencher-metric-format.schema.json"
# The reference page's example: three benchmarks, one with two measures and bounds, two with a value only.
DOCUMENTED = {
    "benchmark_name": {
        "latency": {"value": 88.0, "lower_value": 87.42, "upper_value": 88.88},
        "throughput": {"value": 5.55, "lower_value": 3.14, "upper_value": 6.30},
    },
    "/bin/sh -c ./my_build_script.sh": {"build-time": {"value": 87.0}},
    "my_binary": {"file-size": {"value": 42.0}},
}


def test_the_schema_is_draft_2020_12() -> None:
    assert schema_validator(SCHEMA).schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize(
    "document",
    [
        DOCUMENTED,
        {"benchmark_name": {"latency": {"value": 88.0, "lower_value": 87.42, "upper_value": 88.88}}},
        {"probe/g1_motion_tracking/mujoco/256envs": {"efficiency": {"value": 1}}},  # an integer is a number
        {"b": {"m": {"value": -3.5e-9, "upper_value": 0}}},  # either bound alone
        {"b": {}},
        {},
    ],
)
def test_documented_shapes_are_accepted(document: dict[str, Any]) -> None:
    assert validation_errors(document, SCHEMA) == []


@pytest.mark.parametrize(
    ("document", "where"),
    [
        ({"b": {"latency": {"lower_value": 1.0, "upper_value": 2.0}}}, "$.b.latency"),  # no value
        ({"b": {"latency": {"value": "88.0"}}}, "$.b.latency.value"),
        ({"b": {"latency": {"value": True}}}, "$.b.latency.value"),
        ({"b": {"latency": {"value": None}}}, "$.b.latency.value"),
        ({"b": {"latency": {"value": 1.0, "lower_value": "low"}}}, "$.b.latency.lower_value"),
        ({"b": {"group": {"latency": {"value": 1.0}}}}, "$.b.group"),  # a level too deep
        ({"b": {"latency": {"value": {"value": 1.0}}}}, "$.b.latency.value"),  # nested metric
        ({"b": {"latency": 88.0}}, "$.b.latency"),  # a bare number is not a metric
        ({"b": {"latency": {"value": 1.0, "unit": "ns"}}}, "$.b.latency"),  # a metric has three keys
        ({"b": [{"value": 1.0}]}, "$.b"),
        ({"": {"latency": {"value": 1.0}}}, "$"),  # an empty benchmark name
        ({"b": {"m" * 65: {"value": 1.0}}}, "$.b"),  # a measure slug is at most 64 characters
    ],
)
def test_malformed_documents_are_rejected_at_the_fault(document: dict[str, Any], where: str) -> None:
    errors = validation_errors(document, SCHEMA)
    assert errors and errors[0].startswith(f"{where}: "), errors


def test_a_document_must_be_an_object() -> None:
    assert validation_errors([DOCUMENTED], SCHEMA)
    assert validation_errors("benchmark_name", SCHEMA)
