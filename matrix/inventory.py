"""Load and validate ``matrix/inventory.yaml``: schema, version, known names, unique cells.

Axes: algo, task, backend, platform and the optional ``ranks`` (default 1; an integer >= 1 or a list of
them); a list on any axis expands to the cross product.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import yaml

from matrix.model import (
    PLATFORMS,
    CellKey,
    CellPolicy,
    Inventory,
    MatrixInputError,
    Recommendation,
    SoakBudget,
)
from matrix.runtime_facts import Registry
from matrix.schema_check import validate_or_raise

INVENTORY_SCHEMA_VERSION = 1
INVENTORY_REL = "matrix/inventory.yaml"
INVENTORY_SCHEMA = "inventory.schema.json"


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
    return SoakBudget(
        min_duration_s=float(raw["min_duration_s"]),
        num_envs=int(raw["num_envs"]),
        iterations=int(raw["iterations"]),
    )


def _axes(
    entry: dict[str, Any], index: int, known: dict[str, frozenset[str]], display: str
) -> dict[str, list[str]]:
    """The values of each axis of one entry, every one a known name."""
    axes: dict[str, list[str]] = {}
    for axis in ("algo", "task", "backend", "platform"):
        values = _as_list(entry[axis])
        allowed = PLATFORMS if axis == "platform" else tuple(sorted(known[axis]))
        for value in values:
            if value not in allowed:
                what = "platform" if axis == "platform" else f"{axis} (not in the runtime registry)"
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


def _policy(entry: dict[str, Any], key: CellKey) -> CellPolicy:
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
    )


def parse_inventory(document: Any, registry: Registry, display: str) -> Inventory:
    """Validate an inventory document and expand it into unique cells (pure; raises MatrixInputError)."""
    if isinstance(document, dict) and isinstance(document.get("schema_version"), int):
        version = document["schema_version"]
        if version > INVENTORY_SCHEMA_VERSION:
            raise MatrixInputError(
                display,
                "schema_version",
                f"future schema version {version}; this generator reads version {INVENTORY_SCHEMA_VERSION}",
            )
    validate_or_raise(document, INVENTORY_SCHEMA, display)
    known = {"algo": registry.algos, "task": registry.tasks, "backend": registry.backends}
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
            cells.append(_policy(entry, key))
    order = {p: i for i, p in enumerate(PLATFORMS)}
    cells.sort(key=lambda c: (order[c.key.platform], c.key.algo, c.key.task, c.key.backend, c.key.ranks))
    return Inventory(
        schema_version=document["schema_version"],
        canonical_soak=_budget(document["canonical_soak"]),
        cells=tuple(cells),
    )


def load_inventory(repo: Path, registry: Registry) -> Inventory:
    """Read ``matrix/inventory.yaml`` of ``repo`` and validate it (see parse_inventory)."""
    return parse_inventory(read_yaml(repo / INVENTORY_REL, INVENTORY_REL), registry, INVENTORY_REL)
