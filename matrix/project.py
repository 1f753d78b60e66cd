"""A project's own inventory: the ``project`` section by which any trainer declares its cells.

This runtime's ``matrix/inventory.yaml`` has no ``project`` section: its names come from the runtime's
registries and its evidence without a manifest is judged by the runtime fingerprint. A project's own
inventory declares, in ``project``:

- ``name``: the project's name;
- ``facts: declared``: its cells are registered and configured because it declares them
  (``matrix.facts.DeclaredFacts``; no runtime is imported to grade it);
- ``axes``: the names each axis may take (``algo`` is the trainer, ``task``, ``backend``);
- ``platforms``: the platforms its cells run on, in column order;
- ``inputs``: files and folders (a folder with a trailing ``/``) whose change stales every cell's
  evidence; each cell adds its own code as ``inputs`` of its own.

Its soak budgets may leave ``num_envs`` and ``iterations`` out (a monitored trainer records neither).
Evidence of such a project whose artifact records no usable input manifest gets one derived from the
inventory: every file under the input roots of the cells it covers, at its commit (pure here).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from foundation.schema import load_schema
from matrix.inputs.manifest import InputManifest
from matrix.model import PLATFORMS, MatrixInputError, Project
from matrix.schema_check import validate_document

AXES: tuple[str, ...] = ("algo", "task", "backend")
_NAME = {"type": "string", "minLength": 1, "pattern": "^[^/\\s]+$"}
_NAMES = {"type": "array", "minItems": 1, "uniqueItems": True, "items": _NAME}
ROOTS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "uniqueItems": True,
    "items": {"type": "string", "minLength": 1, "pattern": "^(?![/.]|.*\\.\\.)[^\\s]+$"},
    "description": "repository-relative files, or folders written with a trailing /",
}
PROJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "facts", "axes", "platforms", "inputs"],
    "properties": {
        "name": _NAME,
        "facts": {"enum": ["declared"]},
        "axes": {
            "type": "object",
            "additionalProperties": False,
            "required": list(AXES),
            "properties": {axis: _NAMES for axis in AXES},
        },
        "platforms": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string"}},
        "inputs": ROOTS_SCHEMA,
    },
}


def is_project_inventory(document: Any) -> bool:
    """True for a project's own inventory (it has a ``project`` section)."""
    return isinstance(document, Mapping) and "project" in document


def platform_values(document: Any) -> list[tuple[str, Any]]:
    """``(field, value)`` of every platform named by the cells of an (unvalidated) inventory document."""
    cells = document.get("cells") if isinstance(document, Mapping) else None
    out: list[tuple[str, Any]] = []
    for index, entry in enumerate(cells if isinstance(cells, list) else []):
        value = entry.get("platform") if isinstance(entry, Mapping) else None
        values = value if isinstance(value, list) else [value] if value is not None else []
        out += [(f"cells[{index}].platform", v) for v in values]
    return out


def check_platforms(document: Any, allowed: Sequence[str], display: str, declared: bool) -> None:
    """Every platform a cell names must be one of ``allowed`` (a project's declared ones, or this
    runtime's); the message names the field and what is allowed (a JSON Schema ``oneOf`` would not)."""
    for field, value in platform_values(document):
        if value not in allowed:
            where = " (declared in project.platforms)" if declared else ""
            raise MatrixInputError(
                display, field, f"unknown platform {value!r}; allowed{where}: {', '.join(allowed)}"
            )


def parse_project(document: Mapping[str, Any], display: str) -> Project:
    """The validated ``project`` section (raises MatrixInputError naming ``project.<field>``)."""
    section = document["project"]
    validate_document(section, PROJECT_SCHEMA, display, prefix="project")
    for position, name in enumerate(section["platforms"]):
        if name not in PLATFORMS:
            raise MatrixInputError(
                display,
                f"project.platforms[{position}]",
                f"unknown platform {name!r}; allowed: {', '.join(PLATFORMS)} (evidence records one of "
                "these; a platform of a project's own naming is not supported yet)",
            )
    return Project(
        name=section["name"],
        inputs=tuple(section["inputs"]),
        platforms=tuple(section["platforms"]),
        names={axis: frozenset(section["axes"][axis]) for axis in AXES},
    )


@cache
def _project_inventory_schema(platforms: tuple[str, ...]) -> dict[str, Any]:
    schema = copy.deepcopy(load_schema("inventory.schema.json"))
    schema["title"] = "a project's own support-matrix inventory (matrix.project)"
    schema["properties"]["project"] = PROJECT_SCHEMA
    schema["required"] = [*schema["required"], "project"]
    schema["$defs"]["platform"] = {"enum": list(platforms)}
    schema["$defs"]["soak_budget"]["required"] = ["min_duration_s"]
    schema["$defs"]["cell"]["properties"]["inputs"] = ROOTS_SCHEMA
    return schema


def project_inventory_schema(platforms: Sequence[str]) -> dict[str, Any]:
    """The shipped inventory schema extended for a project's own inventory (``project``, cells'
    ``inputs``, budgets of duration alone, the declared platforms)."""
    return _project_inventory_schema(tuple(platforms))


def under_roots(path: str, roots: Sequence[str]) -> bool:
    """True when ``path`` is one of ``roots`` or lies in a folder root."""
    return any(path == r.rstrip("/") or path.startswith(r.rstrip("/") + "/") for r in roots)


def derived_manifest(tree: Mapping[str, str], roots: Sequence[str]) -> InputManifest | None:
    """The input manifest a project's inventory gives evidence that records none: every committed file
    (``tree``: path -> blob id at the evidence's commit) under ``roots``; None when no file is."""
    files = {path: blob for path, blob in tree.items() if under_roots(path, roots)}
    return InputManifest(files, {}, ("inventory inputs",)) if files else None
