"""JSON Schema validation of matrix inputs, with errors that name the file and the field path.

The schemas are the shipped ones (``foundation.schema``), named by file name; a checkout's copy is never
read separately, so the matrix validates with exactly the definitions the code was built with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema.exceptions import ValidationError, best_match

from soakbench.foundation.schema import sorted_errors
from soakbench.matrix.model import MatrixInputError


def field_path(parts: Any) -> str:
    """``cells[3].tests.lane`` from a jsonschema absolute path (``$`` for the document root)."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "$"


def schema_errors(document: Any, schema_name: str) -> list[str]:
    """All violations of shipped schema ``schema_name`` as ``field: message``, most relevant first."""
    errors = sorted_errors(document, schema_name)
    if not errors:
        return []
    first = best_match(errors)
    ordered = [first, *(e for e in errors if e is not first)]
    return [_describe(e) for e in ordered]


def _describe(error: ValidationError) -> str:
    message = error.message
    if len(message) > 300:
        message = message[:300] + "..."
    return f"{field_path(error.absolute_path)}: {message}"


def validate_or_raise(document: Mapping[str, Any] | Any, schema_name: str, display: str) -> None:
    """Raise MatrixInputError naming ``display`` and the first failing field."""
    problems = schema_errors(document, schema_name)
    if problems:
        field, _, message = problems[0].partition(": ")
        raise MatrixInputError(display, field, f"schema violation: {message}")
