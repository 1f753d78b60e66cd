"""foundation.schema: every shipped schema is a valid Draft 2020-12 schema, found as package data."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from soakbench.foundation import schema

EXPECTED = {
    "bencher-metric-format.schema.json",
    "evidence-index.schema.json",
    "inventory.schema.json",
    "junit-summary-1.schema.json",
    "learning-parity-1.schema.json",
    "probe-0.3.0.schema.json",
    "probe-0.4.0.schema.json",
    "probe-compare-1.schema.json",
    "project-inventory.schema.json",
    "run-config-1.schema.json",
    "run-summary-1.schema.json",
    "runtime-manifest-1.schema.json",
    "soak-artifact-0.3.0.schema.json",
    "soak-artifact-0.4.0.schema.json",
    "soak-compare-1.schema.json",
    "soak-compare-2.schema.json",
    "soak-merge-1.schema.json",
}


def test_every_schema_ships_and_checks() -> None:
    assert set(schema.schema_names()) == EXPECTED
    for name in schema.schema_names():
        Draft202012Validator.check_schema(schema.load_schema(name))  # raises SchemaError on a bad schema
        validator = schema.schema_validator(name)
        assert validator.schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_unknown_schema_is_refused_by_name() -> None:
    with pytest.raises(schema.SchemaNotFound, match=r"no shipped schema 'nope\.schema\.json'"):
        schema.schema_text("nope.schema.json")
    with pytest.raises(schema.SchemaNotFound):
        schema.schema_text("../pyproject.toml")


def test_errors_name_the_json_path() -> None:
    errors = schema.validation_errors(
        {"schema_version": 1, "entries": [{"id": 3}]}, "evidence-index.schema.json"
    )
    assert errors and all(e.startswith("$") for e in errors)
    assert any(e.startswith("$.entries[0]") for e in errors)


def test_cross_schema_refs_resolve() -> None:
    # run_summary embeds the runtime manifest by $ref: a bad manifest fails the summary's validation.
    errors = schema.validation_errors(
        {"runtime_manifest": {"schema_version": 2}}, "run-summary-1.schema.json"
    )
    assert any("runtime_manifest" in e for e in errors)
