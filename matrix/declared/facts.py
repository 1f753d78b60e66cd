"""Where the Registered and Configured grades, the capabilities table and a cell's sources come from: a
:class:`FactsSource`. This runtime's registries and configuration composition are one source
(:class:`RuntimeFacts`, over ``matrix.declared.runtime_facts``, which imports the runtime lazily); a project's own
inventory declares its cells registered and configured and names no capabilities (:class:`DeclaredFacts`,
pure: grading such a project imports no runtime, torch or MuJoCo).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from soakbench.matrix.declared.runtime_facts import (
    CapabilityQuery,
    CapabilityRow,
    CellSources,
    ConfiguredCheck,
    Registry,
)
from soakbench.matrix.model import GRADE_MEANING, CellKey, Inventory

SourcesOf = Callable[[CellKey], CellSources]
DECLARED_MEANING: dict[str, str] = {
    "Registered": "declared in the project's own inventory",
    "Configured": "declared configured by the project's own inventory (a declared facts source)",
}


class FactsSource(Protocol):
    """What the matrix asks about a cell beyond its evidence."""

    def registered(self, key: CellKey) -> str | None:
        """None when ``key``'s trainer, task and backend are registered, else why not."""

    def configured(self, key: CellKey) -> str | None:
        """None when ``key`` is configured for its platform, else why not."""

    def capabilities(self, inventory: Inventory) -> tuple[CapabilityRow, ...]:
        """The capabilities table (empty: the source names none and the page shows no table)."""

    def cell_sources(self, key: CellKey) -> CellSources:
        """``key``'s entry files and data paths; KeyError when the source names none for it."""

    def meanings(self) -> Mapping[str, str]:
        """What Registered and Configured mean with this source (the page's grade legend)."""


def registered_reason(registry: Registry, algo: str, task: str, backend: str) -> str | None:
    """None when algo, task and backend are all registered; otherwise which is missing."""
    missing = [
        f"{what} {name!r} is not registered"
        for what, name, names in (
            ("entrypoint", algo, registry.algos),
            ("task", task, registry.tasks),
            ("backend", backend, registry.backends),
        )
        if name not in names
    ]
    return "; ".join(missing) or None


def capability_keys(inventory: Inventory, registry: Registry) -> list[CellKey]:
    """One declared cell per registered backend x platform column (its owner config is the one asked)."""
    first: dict[tuple[str, str], CellKey] = {}
    for policy in sorted(inventory.cells, key=lambda p: p.key):
        key = policy.key
        if key.backend in registry.backends:
            first.setdefault((key.backend, key.platform), key)
    order = inventory.platforms
    return sorted(first.values(), key=lambda k: (order.index(k.platform), k.backend))


@dataclass(frozen=True)
class RuntimeFacts:
    """This runtime's facts: its registries, the owner-config check, the backends' capability
    declarations and the cells' sources (each a callable, so tests can stand in for the runtime)."""

    registry: Registry
    configured_check: ConfiguredCheck
    capability_query: CapabilityQuery
    sources_of: SourcesOf

    def registered(self, key: CellKey) -> str | None:
        return registered_reason(self.registry, key.algo, key.task, key.backend)

    def configured(self, key: CellKey) -> str | None:
        return self.configured_check(key)

    def capabilities(self, inventory: Inventory) -> tuple[CapabilityRow, ...]:
        return tuple(self.capability_query(k) for k in capability_keys(inventory, self.registry))

    def cell_sources(self, key: CellKey) -> CellSources:
        return self.sources_of(key)

    def meanings(self) -> Mapping[str, str]:
        return {g: GRADE_MEANING[g] for g in ("Registered", "Configured")}


@dataclass(frozen=True)
class DeclaredFacts:
    """A project's own inventory as its facts source: every declared cell is registered and configured
    by that declaration, no capabilities are named, and a cell's sources are its input roots (the
    Python files among them are entry files, so what they import counts too)."""

    inventory: Inventory

    def registered(self, key: CellKey) -> str | None:
        return None

    def configured(self, key: CellKey) -> str | None:
        return None

    def capabilities(self, inventory: Inventory) -> tuple[CapabilityRow, ...]:
        return ()

    def cell_sources(self, key: CellKey) -> CellSources:
        if not any(c.key == key for c in self.inventory.cells):
            raise KeyError(key)
        roots = self.inventory.roots_of(key)
        return CellSources(tuple(r for r in roots if r.endswith(".py")), None, (), roots)

    def meanings(self) -> Mapping[str, str]:
        return DECLARED_MEANING
