"""The rank count is an axis of the matrix (pure): inventory, test bindings, JUnit properties, soak
evidence and grading keep a job of several ranks apart from the single-rank cell, and a probe, which
measures physics alone, counts for both."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any, cast

import pytest

from soakbench.matrix.declared.inventory import parse_inventory
from soakbench.matrix.grading.audit import CellMarker, audit, markers_in_source
from soakbench.matrix.grading.evidence import JUNIT_SCHEMA, normalize_artifact, normalize_junit
from soakbench.matrix.grading.policy import grade_cell
from soakbench.matrix.intake.junit import summarize_junit
from soakbench.matrix.model import (
    BoundTally,
    CellKey,
    CellPolicy,
    Inventory,
    MatrixInputError,
    SoakBudget,
    cell_property,
)
from soakbench.matrix.prune import groups, plan_prune
from soakbench.matrix.pytest_cell import cell_values
from soakbench.matrix.schema_check import schema_errors
from tests.matrix._fixtures import REGISTRY, junit_xml, soak_artifact
from tests.matrix.test_grading import CANON, JUNIT, POLICY, PROBE, SOAK

ONE = CellKey("sac", "g1_walk_flat", "mujoco", "linux-cpu")
TWO = replace(ONE, ranks=2)
SAC_WALK = "sac/g1_walk_flat/mujoco"
SOAK_ENTRY = {"id": "soak-x", "kind": "soak", "file": "f", "platform": "linux-cpu"}


def _entry(**extra: Any) -> dict[str, Any]:
    return {
        "algo": "sac", "task": "g1_walk_flat", "backend": "mujoco", "platform": "linux-cpu",
        "tests": {"lane": "cpu"}, "probe_required": True,
        "soak": {"min_duration_s": 60, "num_envs": 8, "iterations": 100}, **extra,
    }  # fmt: skip


def _inventory(*cells: dict[str, Any]) -> Inventory:
    doc = {
        "schema_version": 1,
        "canonical_soak": {"min_duration_s": 1800, "num_envs": 1024, "iterations": 1},
        "cells": list(cells),
    }
    return parse_inventory(doc, REGISTRY, "inv.yaml")


# --- inventory ---------------------------------------------------------------------------------------


def test_ranks_default_to_one_and_a_list_expands_like_the_other_axes() -> None:
    inventory = _inventory(
        _entry(platform=["linux-cpu", "linux-cuda"], ranks=[1, 2]), _entry(algo="flashsac")
    )
    assert [c.key.label() for c in inventory.cells] == [
        "sac/g1_walk_flat/mujoco@linux-cuda",
        "sac/g1_walk_flat/mujoco@linux-cuda (2 ranks)",
        "flashsac/g1_walk_flat/mujoco@linux-cpu",
        "sac/g1_walk_flat/mujoco@linux-cpu",
        "sac/g1_walk_flat/mujoco@linux-cpu (2 ranks)",
    ]
    assert _inventory(_entry(ranks=2)).cells[0].key == TWO


def test_a_cell_declared_twice_at_one_rank_count_is_refused_at_another_it_is_not() -> None:
    assert len(_inventory(_entry(), _entry(ranks=2)).cells) == 2
    with pytest.raises(MatrixInputError) as info:
        _inventory(_entry(ranks=2), _entry(ranks=[1, 2]))
    assert info.value.field == "cells[1]"
    assert "duplicate cell sac/g1_walk_flat/mujoco@linux-cpu (2 ranks) (already declared by cells[0])" in str(
        info.value
    )


@pytest.mark.parametrize("ranks", [0, -2, "2", 1.5, True, [], [2, 2], [1, 0]])
def test_a_bad_rank_count_is_an_input_error_naming_the_field(ranks: Any) -> None:
    with pytest.raises(MatrixInputError) as info:
        _inventory(_entry(ranks=ranks))
    assert info.value.file == "inv.yaml" and info.value.field.startswith("cells[0].ranks")
    assert "schema violation" in str(info.value)


# --- markers and JUnit properties --------------------------------------------------------------------


# Marks built here are data for cell_values, not bindings of these tests: spelled ``pytest.mark.cell``,
# `matrix check` (matrix.grading.audit) would read them as markers binding this module to the cell.
MARKS = pytest.mark


class _Item:
    """The two things cell_values reads of a pytest item."""

    nodeid = "tests/t.py::test_x"

    def __init__(self, *marks: pytest.MarkDecorator) -> None:
        self._marks = [m.mark for m in marks]

    def iter_markers(self, name: str) -> Iterator[pytest.Mark]:
        return (m for m in self._marks if m.name == name)


def _values(*marks: pytest.MarkDecorator) -> list[str]:
    return cell_values(cast(pytest.Item, _Item(*marks)))


def test_the_plugin_writes_the_rank_count_only_for_several_ranks() -> None:
    assert _values(MARKS.cell("sac", "g1_walk_flat", "mujoco", kind="train")) == [SAC_WALK]
    assert _values(
        MARKS.cell("sac", "g1_walk_flat", "mujoco", kind="train", ranks=2),
        MARKS.cell(algo="sac", task="g1_walk_flat", backend="mujoco"),
    ) == [SAC_WALK, f"{SAC_WALK}/ranks=2"]
    assert cell_property("sac", "g1_walk_flat", "mujoco") == SAC_WALK
    assert cell_property("sac", "g1_walk_flat", "mujoco", 3) == f"{SAC_WALK}/ranks=3"


@pytest.mark.parametrize("ranks", [1, 0, "2", True, 2.0])
def test_the_plugin_refuses_a_bad_rank_count(ranks: Any) -> None:
    with pytest.raises(pytest.UsageError, match="ranks must be an integer >= 2"):
        _values(MARKS.cell("sac", "g1_walk_flat", "mujoco", ranks=ranks))


def test_the_junit_summary_keeps_each_rank_count_apart_and_stays_schema_valid() -> None:
    cases = [
        ("test_one", SAC_WALK, "passed"),
        ("test_two", f"{SAC_WALK}/ranks=2", "passed"),
        ("test_two_fails", f"{SAC_WALK}/ranks=2", "failed"),
    ]
    summary = summarize_junit(junit_xml("a" * 40, cases).encode(), "j.xml")
    assert schema_errors(summary, JUNIT_SCHEMA) == []
    one, two = summary["cells"]
    assert "ranks" not in one and (one["passed"], one["tests"]) == (1, ["tests.test_bound::test_one"])
    assert (two["ranks"], two["passed"], two["failed"]) == (2, 1, 1)
    facts = normalize_junit({"id": "j", "file": "f", "platform": "linux-cpu", "lane": "cpu"}, summary)
    assert facts.tests == {
        ("sac", "g1_walk_flat", "mujoco", 1): BoundTally(passed=1),
        ("sac", "g1_walk_flat", "mujoco", 2): BoundTally(passed=1, failed=1),
    }
    assert facts.covers_cell(ONE) and facts.covers_cell(TWO) and not facts.covers_cell(replace(ONE, ranks=3))


@pytest.mark.parametrize("value", [f"{SAC_WALK}/ranks=1", f"{SAC_WALK}/ranks=x", f"{SAC_WALK}/2",
                                   f"{SAC_WALK}/ranks=02", f"{SAC_WALK}/ranks=2/x", "sac/g1_walk_flat"])  # fmt: skip
def test_a_malformed_cell_property_is_an_input_error(value: str) -> None:
    with pytest.raises(MatrixInputError) as info:
        summarize_junit(junit_xml("a" * 40, [("test_a", value, "passed")]).encode(), "j.xml")
    assert info.value.field == "testcase tests.test_bound::test_a property cell"
    assert "ALGO/TASK/BACKEND/ranks=N (N >= 2" in str(info.value)


# --- the audit ---------------------------------------------------------------------------------------


def test_the_audit_reads_ranks_as_an_integer_literal() -> None:
    source = "import pytest\n\n@pytest.mark.cell('sac', 'g1_walk_flat', 'mujoco', kind='soak', ranks=2)\ndef test_x(): pass\n"
    (marker,) = markers_in_source(source, "tests/t.py")
    assert marker == CellMarker("tests/t.py", 3, "test_x", ("sac", "g1_walk_flat", "mujoco"), "soak", ranks=2)
    assert marker.binding() == TWO.binding()
    for bad in ("1", "'2'", "N", "True", "2.0"):
        (marker,) = markers_in_source(source.replace("ranks=2", f"ranks={bad}"), "tests/t.py")
        assert marker.cell is None and marker.problem is not None
        assert "ranks must be an integer literal >= 2" in marker.problem


def _marker(line: int, kind: str, ranks: int = 1) -> CellMarker:
    return CellMarker(
        "tests/t.py", line, f"test_{line}", ("sac", "g1_walk_flat", "mujoco"), kind, ranks=ranks
    )


def test_the_audit_binds_by_rank_count_and_names_the_missing_kind_of_the_two_rank_cell() -> None:
    kinds = ("train", "fault", "soak")
    policies = tuple(CellPolicy(k, test_lane="cpu", min_passed=3, test_kinds=kinds) for k in (ONE, TWO))
    inventory = Inventory(1, SoakBudget(1800, 1024, 1), policies)
    single = [_marker(1, "train"), _marker(2, "fault"), _marker(3, "soak")]
    assert audit(inventory, single) == [
        "sac/g1_walk_flat/mujoco@linux-cpu (2 ranks): no test in tests/ is marked "
        "cell(sac, g1_walk_flat, mujoco, ranks=2)"
    ]
    two = [_marker(4, "train", 2), _marker(5, "soak", 2), _marker(6, "fault", 3)]
    assert audit(inventory, single + two) == [
        "tests/t.py:6 (test_6): cell(sac, g1_walk_flat, mujoco, ranks=3) names no cell of matrix/inventory.yaml",
        "sac/g1_walk_flat/mujoco@linux-cpu (2 ranks): no bound test of kind fault "
        "(bound: train at tests/t.py:4 (test_4); soak at tests/t.py:5 (test_5))",
    ]
    assert audit(inventory, [*single, *two[:2], _marker(7, "fault", 2)]) == []


# --- soak evidence and grading -----------------------------------------------------------------------


def test_a_soak_covers_only_its_own_rank_count_and_a_probe_covers_every_one() -> None:
    one = normalize_artifact(SOAK_ENTRY, soak_artifact("a" * 40))
    two = normalize_artifact(SOAK_ENTRY, soak_artifact("a" * 40, nproc_per_node=2))
    assert (one.ranks, one.problems, two.ranks, two.problems) == (1, (), 2, ())
    assert one.covers_cell(ONE) and not one.covers_cell(TWO)
    assert two.covers_cell(TWO) and not two.covers_cell(ONE)
    probe = replace(PROBE, ranks=None)
    assert probe.covers_cell(ONE) and probe.covers_cell(TWO)


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"nproc_per_node": 2, "world_size": 3},
         "run_settings.nproc_per_node says 2 ranks but ranks.world_size is 3: the artifact contradicts itself"),
        ({"nproc_per_node": 2, "world_size": 0},
         "run_settings.nproc_per_node says 2 ranks but the artifact has no ranks section"),
        ({"world_size": 2}, "run_settings.nproc_per_node is absent (one rank) but ranks.world_size is 2"),
    ],
)  # fmt: skip
def test_a_soak_whose_rank_count_disagrees_with_its_world_size_is_invalid(
    settings: dict[str, int], problem: str
) -> None:
    facts = normalize_artifact(SOAK_ENTRY, soak_artifact("a" * 40, **settings))
    assert len(facts.problems) == 1 and facts.problems[0].startswith(problem)
    policy = replace(POLICY, key=TWO if facts.ranks == 2 else ONE, recommendation=None)
    result = grade_cell(policy, None, None, (replace(facts, fresh=True, dirty=False),), CANON)
    (verdict,) = result.evidence
    assert verdict.freshness == "invalid" and not verdict.counts and problem in verdict.verdict


JUNIT_TWO = replace(JUNIT, tests={("sac", "g1_walk_flat", "mujoco", 2): BoundTally(passed=3)})
SOAK_TWO = replace(SOAK, id="soak-two", ranks=2)
PROBE_ANY = replace(PROBE, ranks=None)


def test_the_two_rank_cell_reaches_benchmarked_only_from_two_rank_evidence() -> None:
    two = replace(POLICY, key=TWO, min_passed=3, recommendation=None)
    assert grade_cell(two, None, None, (JUNIT_TWO, PROBE_ANY, SOAK_TWO), CANON).grade == "Benchmarked"
    single_rank = grade_cell(two, None, None, (JUNIT, PROBE_ANY, SOAK), CANON)
    assert single_rank.grade == "Configured" and [v.id for v in single_rank.evidence] == ["probe-a"]
    assert single_rank.blockers[0] == (
        "Tested",
        ("no fresh, clean linux-cpu JUnit evidence (lane 'cpu') that holds every test marked "
         "cell(sac, g1_walk_flat, mujoco, ranks=2) at its commit, all passed, at least 3, none failed, skipped "
         "or xfailed",),
    )  # fmt: skip
    tested = grade_cell(two, None, None, (JUNIT_TWO, PROBE_ANY, SOAK), CANON)
    assert tested.grade == "Tested" and tested.blockers[0][1] == (
        "no fresh, clean, passing linux-cpu soak artifact of 2 ranks (soak run --nproc-per-node 2) "
        "meeting the cell budget",
    )
    # ... and the single-rank cell never counts the 2-rank evidence
    one = replace(POLICY, recommendation=None)
    assert grade_cell(one, None, None, (JUNIT_TWO, PROBE_ANY, SOAK_TWO), CANON).grade == "Configured"
    assert grade_cell(one, None, None, (JUNIT, PROBE_ANY, SOAK), CANON).grade == "Benchmarked"


def test_prune_keeps_the_newest_historical_soak_of_each_rank_count() -> None:
    one, two = (replace(SOAK, id=i, ranks=r, fresh=False) for i, r in (("soak-one", 1), ("soak-two", 2)))
    assert groups(two, [ONE, TWO]) == {("sac", "g1_walk_flat", "mujoco", 2, "linux-cpu", "soak")}
    assert groups(replace(PROBE, ranks=None), [ONE, TWO]) == {
        ("sac", "g1_walk_flat", "mujoco", r, "linux-cpu", "probe") for r in (1, 2)
    }
    plan = plan_prune([one, two], [ONE, TWO], 1, {"soak-one": 1, "soak-two": 2})
    assert plan.remove == () and {ev.id for ev in plan.keep} == {"soak-one", "soak-two"}
