"""What is declared: the inventory (``matrix/inventory.yaml``: its cells and their policies), a project's
own ``project`` section, and the facts source that says whether a cell is registered and configured
(this runtime's registries, owner configuration and backend capabilities, or a project's declaration).

The runtime is imported only for this runtime's facts; no other room is.
May import: foundation, runtime, matrix.model, matrix.schema_check, matrix.declared.
"""

from soakbench.matrix.declared.facts import DeclaredFacts, FactsSource, RuntimeFacts, SourcesOf
from soakbench.matrix.declared.inventory import INVENTORY_REL, load_inventory, parse_inventory, read_inventory
from soakbench.matrix.declared.project import check_roots_at_head, derived_manifest, is_project_inventory
from soakbench.matrix.declared.runtime_facts import (
    CapabilityQuery,
    CapabilityRow,
    CellSources,
    ConfiguredCheck,
    Registry,
    load_registry,
    runtime_capabilities,
    runtime_cell_sources,
    runtime_configured,
)

__all__ = [
    "INVENTORY_REL",
    "CapabilityQuery",
    "CapabilityRow",
    "CellSources",
    "ConfiguredCheck",
    "DeclaredFacts",
    "FactsSource",
    "Registry",
    "RuntimeFacts",
    "SourcesOf",
    "check_roots_at_head",
    "derived_manifest",
    "is_project_inventory",
    "load_inventory",
    "load_registry",
    "parse_inventory",
    "read_inventory",
    "runtime_capabilities",
    "runtime_cell_sources",
    "runtime_configured",
]
