"""JSON Schema (Draft 2020-12) validators for every artifact format, over the schemas shipped as package data.

The schemas live in ``foundation/schemas/`` and are found through ``importlib.resources``, so an installed
wheel validates its own artifacts exactly as a checkout does. Cross-schema ``$ref`` s resolve through one
registry of every shipped schema, keyed by ``$id``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soakbench.foundation.inputs import note_data_file

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError
    from referencing import Registry

SCHEMA_PACKAGE = "soakbench.foundation"
SCHEMA_FOLDER = "schemas"
SCHEMA_SUFFIX = ".schema.json"


class SchemaNotFound(LookupError):
    """``name`` is not one of the shipped schemas."""


def schema_root() -> Traversable:
    """The shipped schema folder (a real directory in a checkout, package data in a wheel)."""
    return resources.files(SCHEMA_PACKAGE) / SCHEMA_FOLDER


def schema_names() -> list[str]:
    """Every shipped schema file name, sorted."""
    return sorted(p.name for p in schema_root().iterdir() if p.name.endswith(SCHEMA_SUFFIX))


def schema_text(name: str) -> str:
    """The text of schema ``name`` (e.g. ``"probe-0.3.0.schema.json"``)."""
    entry = schema_root() / name
    if not name.endswith(SCHEMA_SUFFIX) or not entry.is_file():
        raise SchemaNotFound(f"no shipped schema {name!r}; shipped: {', '.join(schema_names())}")
    if isinstance(entry, Path):  # a checkout: the schema is one of the run's input files
        note_data_file(entry)
    return entry.read_text(encoding="utf-8")


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    """Schema ``name`` parsed (cached; treat the result as read-only)."""
    schema: dict[str, Any] = json.loads(schema_text(name))
    return schema


@functools.cache
def _registry() -> Registry:
    from referencing import Registry, Resource

    pairs = []
    for name in schema_names():
        schema = load_schema(name)
        if "$id" in schema:
            pairs.append((str(schema["$id"]), Resource.from_contents(schema)))
    return Registry().with_resources(pairs)


@functools.cache
def schema_validator(name: str) -> Draft202012Validator:
    """A Draft 2020-12 validator for schema ``name``, with every shipped schema resolvable by $id.

    The shipped schemas are checked against the Draft 2020-12 meta-schema by the test suite
    (tests/foundation/test_schema.py), not here: checking one costs about 0.6 s of a core, which every
    process that writes or reads an artifact would pay again for files that do not change after release.
    """
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load_schema(name), registry=_registry())


def json_path(parts: Iterable[Any]) -> str:
    """``$.cells[3].tests.lane`` from a jsonschema absolute path."""
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def sorted_errors(document: Any, name: str) -> list[ValidationError]:
    """Every violation of schema ``name`` by ``document``, ordered by their JSON path."""
    errors = schema_validator(name).iter_errors(document)
    return sorted(errors, key=lambda e: [str(p) for p in e.absolute_path])


def validation_errors(document: Any, name: str, limit: int = 300) -> list[str]:
    """Every violation as ``"$.json.path: message"``, sorted by path (empty when valid); long messages
    are cut to ``limit`` characters."""
    out = []
    for error in sorted_errors(document, name):
        message = error.message if len(error.message) <= limit else error.message[:limit] + "..."
        out.append(f"{json_path(error.absolute_path)}: {message}")
    return out
