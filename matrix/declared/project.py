"""A project's own inventory: the ``project`` section by which any trainer declares its cells.

This runtime's ``matrix/inventory.yaml`` has no ``project`` section: its names come from the runtime's
registries and its evidence without a manifest is judged by the runtime fingerprint. A project's own
inventory declares, in ``project``:

- ``name``: the project's name;
- ``facts: declared``: its cells are registered and configured because it declares them
  (``matrix.declared.facts.DeclaredFacts``; no runtime is imported to grade it);
- ``axes``: the names each axis may take (``algo`` is the trainer, ``task``, ``backend``);
- ``platforms``: the platforms its cells run on, in column order: this runtime's by name, or its own
  as ``{name: linux-arm64, system: Linux}`` (the host system its evidence must record);
- ``lanes`` (optional; default cpu, cuda, mps): the test lanes its cells' ``tests.lane`` may name;
- ``inputs``: files and folders (a folder with a trailing ``/``) whose change stales every cell's
  evidence; each cell adds its own code as ``inputs`` of its own.

Every input root must exist at HEAD (:func:`check_roots_at_head`): a mistyped or emptied root would
leave its cells' evidence fresh for ever. Its soak budgets are a duration alone (a monitored trainer
records no env count or iterations). Evidence of such a project whose artifact records no usable input
manifest gets one derived from the inventory: every file under the input roots of the cells it covers,
at its commit (pure here); a file added under a root later is a changed input of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from soakbench.matrix.model import (
    LANES,
    PLATFORM_SYSTEM,
    PLATFORMS,
    InputManifest,
    MatrixInputError,
    Project,
    under_roots,
)
from soakbench.matrix.schema_check import validate_or_raise

AXES: tuple[str, ...] = ("algo", "task", "backend")
PROJECT_INVENTORY_SCHEMA = "project-inventory.schema.json"


def is_project_inventory(document: Any) -> bool:
    """True for a project's own inventory (it has a ``project`` section)."""
    return isinstance(document, Mapping) and "project" in document


def _values(document: Any, field: str) -> list[tuple[str, Any]]:
    """``(field path, value)`` of every value of a cell ``field`` (``platform``, or ``tests.lane``) in an
    (unvalidated) inventory document; a list of platforms gives one pair per platform."""
    cells = document.get("cells") if isinstance(document, Mapping) else None
    out: list[tuple[str, Any]] = []
    for index, entry in enumerate(cells if isinstance(cells, list) else []):
        value: Any = entry
        for part in field.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        values = value if isinstance(value, list) else [value] if value is not None else []
        out += [(f"cells[{index}].{field}", v) for v in values]
    return out


def platform_values(document: Any) -> list[tuple[str, Any]]:
    """``(field, value)`` of every platform named by the cells of an (unvalidated) inventory document."""
    return _values(document, "platform")


def check_platforms(document: Any, allowed: Sequence[str], display: str, declared: bool) -> None:
    """Every platform a cell names must be one of ``allowed`` (a project's declared ones, or this
    runtime's); the message names the field and what is allowed (a JSON Schema ``oneOf`` would not)."""
    for field, value in platform_values(document):
        if value not in allowed:
            where = " (declared in project.platforms)" if declared else ""
            raise MatrixInputError(
                display, field, f"unknown platform {value!r}; allowed{where}: {', '.join(allowed)}"
            )


def check_lanes(document: Any, allowed: Sequence[str], display: str) -> None:
    """Every lane a cell's tests name must be one of the project's ``allowed`` lanes."""
    for field, value in _values(document, "tests.lane"):
        if value not in allowed:
            raise MatrixInputError(
                display,
                field,
                f"unknown lane {value!r}; allowed (declared in project.lanes): {', '.join(allowed)}",
            )


def _platforms(declared: Sequence[Any], display: str) -> dict[str, str]:
    """Platform name -> the host system its evidence must record, in column order: one of this runtime's
    platforms by name, or a project's own as ``{name, system}``."""
    systems: dict[str, str] = {}
    for position, item in enumerate(declared):
        name, system = (
            (item, PLATFORM_SYSTEM.get(item)) if isinstance(item, str) else (item["name"], item["system"])
        )
        if system is None:
            raise MatrixInputError(
                display,
                f"project.platforms[{position}]",
                f"unknown platform {name!r}; allowed: {', '.join(PLATFORMS)}, or a platform of the project's "
                f"own declared with its host system: {{name: {name}, system: Linux}} (Linux, Darwin or Windows)",
            )
        if name in systems:
            raise MatrixInputError(
                display, f"project.platforms[{position}]", f"platform {name!r} is declared twice"
            )
        systems[name] = system
    return systems


def parse_project(document: Mapping[str, Any], display: str) -> Project:
    """The project section of a schema-valid project inventory (raises MatrixInputError naming
    ``project.<field>``)."""
    section = document["project"]
    systems = _platforms(section["platforms"], display)
    return Project(
        name=section["name"],
        inputs=tuple(section["inputs"]),
        platforms=tuple(systems),
        names={axis: frozenset(section["axes"][axis]) for axis in AXES},
        lanes=tuple(section.get("lanes", LANES)),
        systems=systems,
    )


def validate_project_inventory(document: Any, display: str) -> Project:
    """Schema-check a project's own inventory (the shipped ``project-inventory.schema.json``), then its
    declared platforms and lanes against what its cells name; its project section."""
    validate_or_raise(document, PROJECT_INVENTORY_SCHEMA, display)
    project = parse_project(document, display)
    check_platforms(document, project.platforms, display, declared=True)
    check_lanes(document, project.lanes, display)
    return project


def check_roots_at_head(document: Mapping[str, Any], head: Mapping[str, str], display: str) -> None:
    """Every input root a schema-valid project inventory declares (``project.inputs[i]``,
    ``cells[j].inputs[k]``) must name a file or a folder committed at HEAD (``head``: path -> blob id);
    raises MatrixInputError naming the first that does not."""
    declared = [(f"project.inputs[{i}]", root) for i, root in enumerate(document["project"]["inputs"])]
    for j, cell in enumerate(document["cells"]):
        declared += [(f"cells[{j}].inputs[{k}]", root) for k, root in enumerate(cell.get("inputs", ()))]
    for field, root in declared:
        if not any(under_roots(path, [root]) for path in head):
            raise MatrixInputError(
                display,
                field,
                f"no file or folder at HEAD named {root!r} (an input root must exist, or its cells' "
                "evidence would stay fresh whatever changes); commit it or correct the path",
            )


def derived_manifest(tree: Mapping[str, str], roots: Sequence[str]) -> InputManifest | None:
    """The input manifest a project's inventory gives evidence that records none: every committed file
        (``tree``: path -> blob id at the evidence's commit) under ``roots``, which it keeps so that a file
    added under them later counts as a changed input; None when no file is."""
    files = {path: blob for path, blob in tree.items() if under_roots(path, roots)}
    return InputManifest(files, {}, ("inventory inputs",), tuple(roots)) if files else None
