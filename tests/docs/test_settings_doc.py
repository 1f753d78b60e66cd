"""docs/settings.md is generated from the typed sections and lists every setting any owner composes."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

from soakbench.runtime.backends import BACKENDS
from soakbench.runtime.config import ALGOS, OwnerConfig, RunConfig, compose
from soakbench.runtime.config.settings_doc import by_dimension, render, route_names
from soakbench.runtime.tasks import TASKS

DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def _flat(node: object, prefix: str = "") -> set[str]:
    if not isinstance(node, dict):
        return {prefix}
    keys: set[str] = set()
    for key, value in node.items():
        path = f"{prefix}{key}"
        keys |= _flat(value, f"{path}.") if isinstance(value, dict) else {path}
    return keys


def _declared(cls: type, prefix: str) -> set[str]:
    """Every dotted key a section class declares, nested sections (and their own key) included."""
    keys: set[str] = set()
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        keys.add(key)
        inner = [a for a in (hints[f.name], *typing.get_args(hints[f.name])) if dataclasses.is_dataclass(a)]
        for sub in inner:
            keys |= _declared(sub, f"{key}.")  # type: ignore[arg-type]  # a section class
    return keys


def test_every_composed_setting_is_documented() -> None:
    text = DOC.read_text()
    keys: set[str] = set()
    for algo in ALGOS:
        for task in TASKS:
            for sim in BACKENDS:
                keys |= _flat(compose(algo, task, sim).to_dict())
    missing = sorted(
        k for k in keys if not k.startswith(("owner.", "resolved.")) and f"| `{k}` |" not in text
    )
    assert not missing, f"docs/settings.md lacks rows for: {missing}"
    # The derived sections are documented as their dataclasses declare them (validate_for_run adds some).
    keys |= _declared(OwnerConfig, "owner.") | _declared(
        typing.get_type_hints(RunConfig)["resolved"], "resolved."
    )
    documented = {line.split("`")[1] for line in text.splitlines() if line.startswith("| `")}
    stale = sorted(documented - keys)
    assert not stale, f"docs/settings.md documents settings that no owner composes: {stale}"


def test_the_committed_page_is_the_generated_one() -> None:
    assert DOC.read_text() == render(), (
        "docs/settings.md is stale: python -m runtime.config.settings_doc --write"
    )


ROUTES = [
    (a, t, s) for a in ("sac", "flashsac") for t in ("g1_walk_flat", "g1_motion_tracking") for s in BACKENDS
]


def test_a_default_one_route_pair_overrides_reads_as_the_common_value_and_its_exception() -> None:
    values = {r: 1024 if r[:2] == ("sac", "g1_walk_flat") else 2048 for r in ROUTES}
    assert by_dimension(values) == "`2048`, except `1024` (sac/g1_walk_flat)"
    one_sim = {r: 8 if r == ("sac", "g1_walk_flat", "mujoco") else 1 for r in ROUTES}
    assert by_dimension(one_sim) == "`1`, except `8` (sac/g1_walk_flat/mujoco)"


def test_values_one_dimension_decides_are_grouped_by_it() -> None:
    assert (
        by_dimension({r: 256 if r[0] == "sac" else 2048 for r in ROUTES}) == "`256` (sac); `2048` (flashsac)"
    )
    assert by_dimension(dict.fromkeys(ROUTES, None)) == "`null`"


def test_route_names_collapse_a_pair_chosen_on_every_backend() -> None:
    both = [("sac", "g1_walk_flat", s) for s in BACKENDS]
    assert route_names(both) == "sac/g1_walk_flat"
    assert route_names(both[:1]) == f"sac/g1_walk_flat/{both[0][2]}"
