"""JSON Schema validation (Draft 2020-12) with errors that name the file and the field path."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from matrix.model import MatrixInputError


def field_path(parts: Any) -> str:
    """``cells[3].tests.lane`` from a jsonschema absolute path (``$`` for the document root)."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "$"


@cache
def _validator(schema_text: str) -> Draft202012Validator:
    schema = json.loads(schema_text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def load_schema_text(schema_path: Path, display: str) -> str:
    """The schema file's text; a missing or unreadable schema is an input error naming it."""
    try:
        text = schema_path.read_text(encoding="utf-8")
        json.loads(text)
    except (OSError, ValueError) as exc:
        raise MatrixInputError(display, "$", f"schema cannot be read: {exc}") from None
    return text


def schema_errors(document: Any, schema_text: str) -> list[str]:
    """All violations as ``field: message``, most relevant first (empty when valid)."""
    validator = _validator(schema_text)
    errors = list(validator.iter_errors(document))
    if not errors:
        return []
    first = best_match(errors)
    ordered = [first, *sorted((e for e in errors if e is not first), key=lambda e: list(map(str, e.path)))]
    return [_describe(e) for e in ordered]


def _describe(error: ValidationError) -> str:
    message = error.message
    if len(message) > 300:
        message = message[:300] + "..."
    return f"{field_path(error.absolute_path)}: {message}"


def validate_or_raise(document: Mapping[str, Any] | Any, schema_text: str, display: str) -> None:
    """Raise MatrixInputError naming ``display`` and the first failing field."""
    problems = schema_errors(document, schema_text)
    if problems:
        field, _, message = problems[0].partition(": ")
        raise MatrixInputError(display, field, f"schema violation: {message}")
