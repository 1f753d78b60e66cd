"""The two-way audit of test bindings: markers read statically from source, checked against inventories."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from soakbench.matrix.declared.inventory import parse_inventory
from soakbench.matrix.grading.audit import CellMarker, audit, collect_markers, markers_in_source
from soakbench.matrix.model import CellKey, CellPolicy, Inventory, MatrixInputError, SoakBudget
from tests.matrix._fixtures import REGISTRY, REPO, commit_all
from tests.matrix.conftest import Invoke

SOURCE = """\
import pytest

pytestmark = pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="soak")
PARAMS = [pytest.param(1, marks=pytest.mark.cell("flashsac", "g1_walk_flat", "mujoco", kind="train"))]


@pytest.mark.cell(algo="sac", task="g1_walk_flat", backend="mujoco", kind="fault")
def test_kw():
    pass


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco")
def test_no_kind():
    pass


def test_string_is_not_a_marker():
    text = '@pytest.mark.cell("x", "y", "z")'
"""


def test_markers_are_read_from_decorators_params_and_pytestmark() -> None:
    assert markers_in_source(SOURCE, "tests/t.py") == [
        CellMarker("tests/t.py", 3, "<module>", ("sac", "g1_walk_flat", "mujoco"), "soak"),
        CellMarker("tests/t.py", 4, "<module>", ("flashsac", "g1_walk_flat", "mujoco"), "train"),
        CellMarker("tests/t.py", 7, "test_kw", ("sac", "g1_walk_flat", "mujoco"), "fault"),
        CellMarker("tests/t.py", 12, "test_no_kind", ("sac", "g1_walk_flat", "mujoco"), None),
    ]


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("import pytest\n\n@pytest.mark.cell(ALGO, 'g1_walk_flat', 'mujoco')\ndef test_x(): pass\n",
         "three non-empty string literals"),
        ("import pytest\n\n@pytest.mark.cell('sac', 'g1_walk_flat')\ndef test_x(): pass\n",
         "three non-empty string literals"),
        ("import pytest\n\n@pytest.mark.cell('sac', 'g1_walk_flat', 'mujoco', kind='bench')\ndef test_x(): pass\n",
         "one of train, fault, soak, smoke"),
        ("import pytest\n\n@pytest.mark.cell('sac', 'g1_walk_flat', 'mujoco', lane='cpu')\ndef test_x(): pass\n",
         "takes algo, task, backend, kind and ranks only"),
        ("import pytest\n\n@pytest.mark.cell\ndef test_x(): pass\n", "without arguments"),
        ("def test_x(:\n", "does not parse"),
    ],
)  # fmt: skip
def test_an_unreadable_marker_is_a_problem_naming_its_line(source: str, problem: str) -> None:
    (marker,) = markers_in_source(source, "tests/t.py")
    assert marker.cell is None and marker.problem is not None and problem in marker.problem
    assert marker.line in (1, 3)


KEY = CellKey("sac", "g1_walk_flat", "mujoco", "linux-cpu")
POLICY = CellPolicy(
    KEY, test_lane="cpu", min_passed=3, test_kinds=("train", "fault", "soak"), soak=SoakBudget(600, 64, 1)
)
UNSUPPORTED = CellPolicy(
    CellKey("sac", "g1_walk_flat", "mjwarp", "linux-cpu"), unsupported_reason="needs CUDA"
)
INVENTORY = Inventory(1, SoakBudget(1800, 1024, 1), (POLICY, UNSUPPORTED))
WALK = ("sac", "g1_walk_flat", "mujoco")


def _marker(line: int, kind: str | None, cell: tuple[str, str, str] = WALK) -> CellMarker:
    return CellMarker("tests/t.py", line, f"test_{line}", cell, kind)


def test_audit_passes_when_bindings_and_inventory_agree() -> None:
    assert (
        audit(INVENTORY, [_marker(1, "train"), _marker(2, "fault"), _marker(3, "soak"), _marker(4, None)])
        == []
    )


def test_audit_names_what_disagrees() -> None:
    markers = [
        _marker(1, "train"),
        _marker(2, "soak"),
        _marker(3, "train", ("ppo", "g1_walk_flat", "mujoco")),
        CellMarker("tests/u.py", 9, "<module>", problem="cell marker used without arguments"),
    ]
    assert audit(INVENTORY, markers) == [
        "tests/u.py:9: cell marker used without arguments",
        "tests/t.py:3 (test_3): cell(ppo, g1_walk_flat, mujoco) names no cell of matrix/inventory.yaml",
        "sac/g1_walk_flat/mujoco@linux-cpu: no bound test of kind fault "
        "(bound: train at tests/t.py:1 (test_1); soak at tests/t.py:2 (test_2))",
    ]


def test_a_supported_cell_without_bound_tests_is_a_finding_an_unsupported_one_is_not() -> None:
    assert audit(INVENTORY, []) == [
        "sac/g1_walk_flat/mujoco@linux-cpu: no test in tests/ is marked cell(sac, g1_walk_flat, mujoco)"
    ]
    only_unsupported = replace(INVENTORY, cells=(UNSUPPORTED,))
    assert audit(only_unsupported, []) == []
    # a marker may name a cell that is Unsupported on one platform: it is still an inventory cell
    assert audit(only_unsupported, [_marker(1, None, ("sac", "g1_walk_flat", "mjwarp"))]) == []


def test_inventory_minimum_cannot_be_below_the_required_kinds() -> None:
    doc = yaml.safe_load((REPO / "matrix" / "inventory.yaml").read_text())
    doc["cells"][0]["tests"]["min_passed"] = 2
    with pytest.raises(MatrixInputError) as info:
        parse_inventory(doc, REGISTRY, "inv.yaml")
    assert info.value.field == "cells[0].tests.min_passed" and "3 required kinds" in str(info.value)


def test_the_shipped_inventory_and_tests_agree_and_cpu_cells_need_the_new_budgets() -> None:
    doc = yaml.safe_load((REPO / "matrix" / "inventory.yaml").read_text())
    inventory = parse_inventory(doc, REGISTRY, "matrix/inventory.yaml")
    assert audit(inventory, collect_markers(REPO)) == []
    cpu = [c for c in inventory.cells if c.key.platform == "linux-cpu" and c.unsupported_reason is None]
    assert len(cpu) == 5 and [c.key.label() for c in cpu if c.key.ranks > 1] == [
        "sac/g1_walk_flat/mujoco@linux-cpu (2 ranks)"
    ]
    for policy in cpu:
        assert policy.soak is not None and policy.test_lane == "cpu"
        assert policy.min_passed >= 3 and {"train", "fault", "soak"} <= set(policy.test_kinds)
        assert policy.soak.min_duration_s >= 600 and policy.soak.num_envs >= 64


def test_check_fails_naming_the_marker_and_the_cell(repo: Path, run_matrix: Invoke) -> None:
    assert run_matrix("generate").exit_code == 0
    assert run_matrix("check").exit_code == 0
    (repo / "tests" / "test_extra.py").write_text(
        "import pytest\n\n\n@pytest.mark.cell('sac', 'g1_walk_flat', 'genesis')\ndef test_x():\n    pass\n"
    )
    (repo / "tests" / "test_bound.py").write_text(
        (repo / "tests" / "test_bound.py")
        .read_text()
        .replace('"flashsac", "g1_walk_flat"', '"sac", "g1_walk_flat"')
    )
    commit_all(repo, "bindings drift")
    result = run_matrix("check")
    assert result.exit_code == 1
    assert "tests/test_extra.py:4 (test_x): cell(sac, g1_walk_flat, genesis) names no cell" in result.output
    assert "flashsac/g1_walk_flat/mujoco@linux-cpu: no test in tests/ is marked" in result.output
    assert "support matrix is up to date" not in result.output


def test_explain_shows_the_rules_and_the_bound_tests(repo: Path, run_matrix: Invoke) -> None:
    out = run_matrix("explain", "sac", "g1_walk_flat", "mujoco", "linux-cpu").output
    assert (
        "Tested needs: lane 'cpu' JUnit evidence that holds every test bound to the cell at its commit, all passed"
        in out
    )
    assert "none failed, skipped or xfailed" in out
    assert "Benchmarked needs: a passing probe and a passing soak of at least 60.0 s, 8 envs" in out
    assert "bound tests in tests/ (read by matrix check): 1" in out
    assert "train at tests/test_bound.py:6 (test_sac_walk_mujoco)" in out


def test_explain_says_which_bound_kind_is_missing(repo: Path, run_matrix: Invoke) -> None:
    inventory = repo / "matrix" / "inventory.yaml"
    inventory.write_text(
        inventory.read_text().replace(
            "tests: {lane: cpu, min_passed: 1}", "tests: {lane: cpu, min_passed: 2, kinds: [train, fault]}", 1
        )
    )
    commit_all(repo, "sac walk needs a fault test")
    out = run_matrix("explain", "sac", "g1_walk_flat", "mujoco", "linux-cpu").output
    assert "at least 2, none failed, skipped or xfailed; bound kinds required: train, fault" in out
    assert "missing: a bound test of kind fault" in out
    assert run_matrix("generate").exit_code == 0
    check = run_matrix("check")
    assert (
        check.exit_code == 1
        and "sac/g1_walk_flat/mujoco@linux-cpu: no bound test of kind fault" in check.output
    )
