"""The text form of a cell's binding, shared by test markers' ``cell`` property and `soak monitor --cell`."""

from __future__ import annotations

import pytest

from soakbench.foundation.cells import parse_cell


def test_a_cell_reads_as_its_names_and_one_rank_unless_it_says_more() -> None:
    assert parse_cell("sac/g1_walk_flat/mujoco") == ("sac", "g1_walk_flat", "mujoco", 1)
    assert parse_cell("toy/count/py/ranks=2") == ("toy", "count", "py", 2)
    assert parse_cell("toy/count/py/ranks=16") == ("toy", "count", "py", 16)


@pytest.mark.parametrize(
    "text",
    [
        "", "a/b", "a/b/c/d", "a//c", "/b/c", "a/b/c/", "a/b/c/ranks=1", "a/b/c/ranks=0", "a/b/c/ranks=02",
        "a/b/c/ranks=", "a/b/c/ranks=x", "a/b/c/ranks=\u00b2", "a b/c/d", "a/b/c ", "a/b/c/ranks=2/e",
    ],
)  # fmt: skip
def test_anything_else_is_refused(text: str) -> None:
    assert parse_cell(text) is None
