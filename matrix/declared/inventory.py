"""Load and validate ``matrix/inventory.yaml``: schema, version, known names, unique cells.

Axes: algo, task, backend, platform and the optional ``ranks`` (default 1; an integer >= 1 or a list of
them); a list on any axis expands to the cross product. This runtime's inventory takes its names from the
runtime registries; a project's own inventory declares them in its ``project`` section (matrix.declared.project).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from soakbench.foundation.durations import parse_duration
from soakbench.matrix.declared.project import (
    AXES,
    check_platforms,
    is_project_inventory,
    validate_project_inventory,
)
from soakbench.matrix.declared.runtime_facts import Registry
from soakbench.matrix.model import (
    PLATFORMS,
    CellKey,
    CellPolicy,
    Inventory,
    MatrixInputError,
    Project,
    Recommendation,
    SoakBudget,
)
from soakbench.matrix.schema_check import validate_or_raise

INVENTORY_SCHEMA_VERSION = 1
INVENTORY_REL = "matrix/inventory.yaml"
INVENTORY_SCHEMA = "inventory.schema.json"
# Per axis (and platform) the names a cell may take, and "source": where they come from (for messages).
Known = dict[str, Any]


def read_yaml(path: Path, display: str) -> Any:
    """Parse a YAML file; unreadable or malformed YAML is an input error naming the file."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MatrixInputError(display, "$", "file not found") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise MatrixInputError(display, "$", f"malformed YAML: {exc}") from None


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _ranks(entry: dict[str, Any]) -> list[int]:
    """The rank counts of one entry (schema-checked integers >= 1; default 1)."""
    value = entry.get("ranks", 1)
    return [value] if isinstance(value, int) else list(value)


def _budget(raw: dict[str, Any]) -> SoakBudget:
    """A budget; a project's own inventory may leave envs and iterations out (not required)."""
    envs, iterations, target = raw.get("num_envs"), raw.get("iterations"), raw.get("must_survive")
    return SoakBudget(
        min_duration_s=float(raw["min_duration_s"]),
        num_envs=None if envs is None else int(envs),
        iterations=None if iterations is None else int(iterations),
        must_survive_s=None if target is None else parse_duration(str(target)),  # schema-checked
    )


def _axes(
    entry: dict[str, Any], index: int, known: Mapping[str, Sequence[str]], display: str
) -> dict[str, list[str]]:
    """The values of each axis of one entry, every one a known name (``known``: per axis, platform too)."""
    axes: dict[str, list[str]] = {}
    for axis in ("algo", "task", "backend", "platform"):
        values = _as_list(entry[axis])
        allowed = tuple(known[axis])
        for value in values:
            if value not in allowed:
                what = "platform" if axis == "platform" else f"{axis} ({known['source']})"
                raise MatrixInputError(
                    display,
                    f"cells[{index}].{axis}",
                    f"unknown {what} {value!r}; allowed: {', '.join(allowed)}",
                )
        axes[axis] = values
    return axes


def _check_test_policy(entry: dict[str, Any], index: int, display: str) -> None:
    """Each required kind is one bound test at least, so the minimum cannot be below their number."""
    tests = entry.get("tests") or {}
    kinds = tests.get("kinds", [])
    minimum = tests.get("min_passed", 1)
    if minimum < len(kinds):
        raise MatrixInputError(
            display,
            f"cells[{index}].tests.min_passed",
            f"{minimum} is below the {len(kinds)} required kinds ({', '.join(kinds)}); "
            f"allowed: an integer >= {len(kinds)}",
        )


def _policy(entry: dict[str, Any], key: CellKey, project: Project | None) -> CellPolicy:
    tests = entry.get("tests") or {}
    rec = entry.get("recommendation")
    unsupported = entry.get("unsupported")
    return CellPolicy(
        key=key,
        unsupported_reason=unsupported["reason"] if unsupported else None,
        test_lane=tests.get("lane"),
        min_passed=int(tests.get("min_passed", 1)),
        test_kinds=tuple(tests.get("kinds", ())),
        probe_required=bool(entry.get("probe_required", False)),
        soak=_budget(entry["soak"]) if "soak" in entry else None,
        recommendation=Recommendation(rec["decision"], rec["date"], rec["rationale"]) if rec else None,
        inputs=tuple(entry.get("inputs", ())),
        system=project.systems[key.platform] if project is not None else None,
    )


def _validated(document: Any, registry: Registry | None, display: str) -> tuple[Project | None, Known]:
    """Schema-check ``document`` (a project's own inventory against its own schema, its platforms and
    lanes the ones it declares) and return its project section and the names each axis may take."""
    if is_project_inventory(document):
        project = validate_project_inventory(document, display)
        names = {axis: tuple(sorted(project.names[axis])) for axis in AXES}
        return project, {**names, "platform": project.platforms, "source": "not in project.axes"}
    check_platforms(document, PLATFORMS, display, declared=False)
    validate_or_raise(document, INVENTORY_SCHEMA, display)
    if registry is None:
        raise MatrixInputError(display, "project", "no runtime registry to check the names against")
    registered = {"algo": registry.algos, "task": registry.tasks, "backend": registry.backends}
    known: Known = {axis: tuple(sorted(values)) for axis, values in registered.items()}
    return None, {**known, "platform": PLATFORMS, "source": "not in the runtime registry"}


def parse_inventory(document: Any, registry: Registry | None, display: str) -> Inventory:
    """Validate an inventory document and expand it into unique cells (pure; raises MatrixInputError).
    ``registry`` names this runtime's algos, tasks and backends; a project's own inventory (with a
    ``project`` section, matrix.declared.project) declares its own and needs none."""
    if isinstance(document, dict) and isinstance(document.get("schema_version"), int):
        version = document["schema_version"]
        if version > INVENTORY_SCHEMA_VERSION:
            raise MatrixInputError(
                display,
                "schema_version",
                f"future schema version {version}; this generator reads version {INVENTORY_SCHEMA_VERSION}",
            )
    project, known = _validated(document, registry, display)
    seen: dict[CellKey, int] = {}
    cells: list[CellPolicy] = []
    for index, entry in enumerate(document["cells"]):
        axes = _axes(entry, index, known, display)
        _check_test_policy(entry, index, display)
        for algo, task, backend, platform, ranks in itertools.product(
            axes["algo"], axes["task"], axes["backend"], axes["platform"], _ranks(entry)
        ):
            key = CellKey(algo, task, backend, platform, ranks)
            if key in seen:
                raise MatrixInputError(
                    display,
                    f"cells[{index}]",
                    f"duplicate cell {key.label()} (already declared by cells[{seen[key]}])",
                )
            seen[key] = index
            cells.append(_policy(entry, key, project))
    order = {p: i for i, p in enumerate(known["platform"])}
    cells.sort(key=lambda c: (order[c.key.platform], c.key.algo, c.key.task, c.key.backend, c.key.ranks))
    return Inventory(
        schema_version=document["schema_version"],
        canonical_soak=_budget(document["canonical_soak"]),
        cells=tuple(cells),
        project=project,
    )


def read_inventory(repo: Path) -> Any:
    """The parsed (unvalidated) ``matrix/inventory.yaml`` of ``repo``."""
    return read_yaml(repo / INVENTORY_REL, INVENTORY_REL)


def load_inventory(repo: Path, registry: Registry | None) -> Inventory:
    """Read ``matrix/inventory.yaml`` of ``repo`` and validate it (see parse_inventory)."""
    return parse_inventory(read_yaml(repo / INVENTORY_REL, INVENTORY_REL), registry, INVENTORY_REL)
