"""The tests bound to each cell, read from sources (pure), and what a JUnit summary lacks of them."""

from __future__ import annotations

import pytest

from soakbench.matrix.grading.bound_tests import BoundTest, bound_tests, completeness, missing_tests

WALK = ("sac", "walk", "py", 1)
TRACK = ("sac", "track", "py", 1)

SOURCES = {
    "tests/test_listed.py": (
        "import pytest\n"
        "CELLS = [\n"
        "    pytest.param('sac', 'walk', marks=pytest.mark.cell('sac', 'walk', 'py', kind='smoke')),\n"
        "    pytest.param('sac', 'track', marks=pytest.mark.cell('sac', 'track', 'py', kind='smoke'), id='t'),\n"
        "]\n"
        "@pytest.mark.parametrize(('algo', 'task'), CELLS)\n"
        "def test_smoke(algo, task):\n    pass\n"
    ),
    "tests/test_decorated.py": (
        "import pytest\n"
        "@pytest.mark.cell('sac', 'walk', 'py', kind='fault')\n"
        "def test_fault():\n    pass\n"
        "def test_unbound():\n    pass\n"
    ),
    "tests/test_scoped.py": (
        "import pytest\n"
        "pytestmark = [pytest.mark.slow, pytest.mark.cell('sac', 'track', 'py', kind='train')]\n"
        "def test_one():\n    pass\n"
        "class TestTwo:\n    def test_two(self):\n        pass\n"
    ),
    "tests/test_orphan.py": (
        "import pytest\n"
        "UNUSED = [pytest.param(1, marks=pytest.mark.cell('sac', 'walk', 'py', kind='soak'))]\n"
        "def test_soak():\n    pass\n"
    ),
}


def _labels(tests: tuple[BoundTest, ...]) -> list[tuple[str, str | None]]:
    return sorted((t.label(), t.kind) for t in tests)


def test_each_form_of_marker_binds_its_tests() -> None:
    found = bound_tests(SOURCES)
    assert _labels(found[WALK]) == [
        ("tests.test_decorated::test_fault", "fault"),
        ("tests.test_listed::test_smoke[sac-walk]", "smoke"),  # the id pytest derives from the values
        ("tests.test_orphan::*", "soak"),  # a param no test takes: some test of the file must be bound
    ]
    assert _labels(found[TRACK]) == [
        ("tests.test_listed::test_smoke[t]", "smoke"),  # the id= literal
        ("tests.test_scoped::test_one", "train"),  # the module's pytestmark binds every test under it
        ("tests.test_scoped::test_two", "train"),
    ]


@pytest.mark.parametrize(
    ("test_id", "matches"),
    [
        ("tests.test_listed::test_smoke[sac-walk]", True),
        ("tests.test_listed::test_smoke[sac-walk]@cell-runs", True),  # xdist's loadgroup suffix
        ("tests.test_listed::test_smoke[sac-walk-2]", True),  # stacked with another parametrize
        ("tests.test_listed::test_smoke[sac-track]", False),
        ("tests.test_listed::test_smoke_other[sac-walk]", False),
        ("tests.test_listedx::test_smoke[sac-walk]", False),
        ("tests.test_listed::test_smoke", False),
    ],
)
def test_a_parametrized_test_matches_by_its_parametrization(test_id: str, matches: bool) -> None:
    smoke = BoundTest(WALK, "tests/test_listed.py", "test_smoke", "sac-walk", "smoke")
    assert smoke.matches(test_id) is matches


def test_a_class_method_matches_under_its_module() -> None:
    two = BoundTest(TRACK, "tests/test_scoped.py", "test_two", None, "train")
    assert two.matches("tests.test_scoped.TestTwo::test_two")
    assert not two.matches("tests.test_scopedx.TestTwo::test_two")


def test_a_lane_that_deselected_a_bound_test_lacks_it() -> None:
    expected = bound_tests(SOURCES)
    complete = {
        WALK: ("tests.test_decorated::test_fault", "tests.test_listed::test_smoke[sac-walk]", "tests.test_orphan::test_soak"),
        TRACK: ("tests.test_listed::test_smoke[t]", "tests.test_scoped::test_one", "tests.test_scoped.TestTwo::test_two"),
    }  # fmt: skip
    whole = completeness(expected, complete)
    assert whole.missing == {}
    assert whole.kinds == {WALK: {"fault", "smoke", "soak"}, TRACK: {"smoke", "train"}}
    deselected = {**complete, WALK: complete[WALK][1:]}  # -k "not fault"
    assert completeness(expected, deselected).missing == {WALK: ("tests.test_decorated::test_fault",)}


def test_a_cell_no_source_binds_misses_nothing_and_has_no_kinds() -> None:
    other = ("flash", "walk", "py", 1)
    assert missing_tests((), ["tests.x::test_y"]) == []
    assert completeness({}, {other: ("tests.x::test_y",)}).kinds == {other: frozenset()}
