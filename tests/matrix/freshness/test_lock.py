"""A uv lock's pins and dependency closure."""

from __future__ import annotations

import pytest

from soakbench.matrix.freshness.lock import LockError, dependency_closure, locked_versions

LOCK = """
version = 1
[[package]]
name = "proj"
version = "0.1.0"
source = { editable = "." }
dependencies = [{ name = "torch" }]
[[package]]
name = "torch"
version = "2.6.0"
source = { registry = "https://example.invalid/simple" }
dependencies = [{ name = "sympy" }, { name = "filelock" }]
[[package]]
name = "sympy"
version = "1.13"
source = { registry = "https://example.invalid/simple" }
dependencies = [{ name = "mpmath" }]
[[package]]
name = "mpmath"
version = "1.3"
source = { registry = "https://example.invalid/simple" }
[[package]]
name = "filelock"
version = "3.0"
source = { registry = "https://example.invalid/simple" }
[[package]]
name = "rich"
version = "13.0"
source = { registry = "https://example.invalid/simple" }
"""


def test_the_project_itself_is_not_a_pinned_distribution() -> None:
    assert locked_versions(LOCK) == {
        "torch": "2.6.0",
        "sympy": "1.13",
        "mpmath": "1.3",
        "filelock": "3.0",
        "rich": "13.0",
    }


def test_a_root_brings_everything_it_depends_on_and_nothing_else() -> None:
    assert dependency_closure(LOCK, ["torch"]) == {
        "filelock": "3.0",
        "mpmath": "1.3",
        "sympy": "1.13",
        "torch": "2.6.0",
    }
    assert dependency_closure(LOCK, ["unknown"]) == {}


def test_a_lock_that_is_not_toml_is_refused() -> None:
    with pytest.raises(LockError, match="not TOML"):
        locked_versions("[[package]\nname=")


# The same lock with rich pinned twice, as a resolution forked by environment markers writes it.
FORKED = (
    LOCK
    + """[[package]]
name = "rich"
version = "14.0"
source = { registry = "https://example.invalid/simple" }
"""
)


def test_a_name_locked_at_several_versions_keeps_them_all() -> None:
    assert locked_versions(FORKED)["rich"] == "13.0 or 14.0"
    assert locked_versions(FORKED)["torch"] == "2.6.0"
