"""An input manifest's freshness at HEAD, and how a change is said."""

from __future__ import annotations

import pytest

from soakbench.matrix.freshness.head import HeadInputs
from soakbench.matrix.freshness.manifest import InputChange, changed_inputs, describe_changes, parse_manifest
from soakbench.matrix.model import InputManifest

DOC = {
    "manifest_version": 1,
    "files": {"runtime/learners/sac.py": "a" * 40, "runtime/core.py": "b" * 40},
    "distributions": {"torch": "2.6.0", "local-only": "0.1"},
    "processes": [{"role": "trainer", "pid": 1, "files": 2}, {"role": "collector", "pid": 2, "files": 1}],
}


def test_a_manifest_parses_with_its_roles_and_an_unusable_one_says_why() -> None:
    manifest, why = parse_manifest(DOC)
    assert why is None and manifest is not None and manifest.roles == ("collector", "trainer")
    assert parse_manifest(None) == (None, "no input manifest")
    assert parse_manifest({**DOC, "manifest_version": 2})[1] == "input manifest is not version 1"
    assert parse_manifest({**DOC, "files": {}})[1] == "input manifest has no files"


def test_only_inputs_that_differ_at_head_are_changes() -> None:
    manifest = InputManifest(DOC["files"], DOC["distributions"])
    head = {"runtime/learners/sac.py": "a" * 40, "runtime/core.py": "b" * 40, "docs/x.md": "c" * 40}
    assert changed_inputs(manifest, head, {"torch": "2.6.0"}) == ()
    moved = {**head, "runtime/core.py": "d" * 40}
    del moved["runtime/learners/sac.py"]
    changes = changed_inputs(manifest, moved, {"torch": "2.7.0"})  # local-only: not in the lock, not judged
    assert changes == (
        InputChange("file", "runtime/core.py", "b" * 40, "d" * 40),
        InputChange("file", "runtime/learners/sac.py", "a" * 40, None),
        InputChange("distribution", "torch", "2.6.0", "2.7.0"),
    )
    said = describe_changes(changes, "43e1c9f", limit=2)
    assert said == (
        "runtime/core.py changed since 43e1c9f; runtime/learners/sac.py removed since 43e1c9f; and 1 more input"
    )
    assert describe_changes(changes[2:], "43e1c9f") == "torch 2.6.0 -> 2.7.0 in the lock since 43e1c9f"


def test_a_version_among_those_a_forked_lock_pins_is_no_change() -> None:
    """uv.lock pins numpy at 2.4.6 and 2.5.5 (markers by Python version): a run that imported either is
    fresh, one that imported neither is not."""
    head_locked = {"numpy": "2.4.6 or 2.5.5"}
    for seen, changed in (("2.4.6", False), ("2.5.5", False), ("2.4.6 or 2.5.5", False), ("2.3.0", True)):
        manifest = InputManifest({"a.py": "b1"}, {"numpy": seen}, ())
        assert bool(changed_inputs(manifest, {"a.py": "b1"}, head_locked)) is changed, seen


FORKED_LOCK = """
version = 1
[[package]]
name = "numpy"
version = "{old}"
source = {{ registry = "https://example.invalid/simple" }}
resolution-markers = ["python_full_version < '3.12'"]
[[package]]
name = "numpy"
version = "{new}"
source = {{ registry = "https://example.invalid/simple" }}
resolution-markers = ["python_full_version >= '3.12'"]
"""


def _head(old: str = "2.4.6", new: str = "2.5.5", **kw: str) -> HeadInputs:
    return HeadInputs({"a.py": "b1"}, FORKED_LOCK.format(old=old, new=new), **kw)


def test_a_bump_for_another_python_leaves_the_evidence_fresh_and_one_for_its_own_stales_it() -> None:
    ran_311 = InputManifest({"a.py": "b1"}, {"numpy": "2.4.6"}, interpreter="3.11.7")
    assert _head(new="2.5.6").changes(ran_311) == ()
    (change,) = _head(old="2.4.7").changes(ran_311)
    assert change.sentence("abc") == "numpy 2.4.6 -> 2.4.7 in the lock since abc"


@pytest.mark.parametrize(
    ("head", "now"),
    [
        ({"python_pin": "3.12"}, ".python-version 3.12"),
        ({"requires_python": ">=3.12"}, "requires-python >=3.12"),
    ],
)
def test_an_interpreter_head_no_longer_picks_stales_the_evidence(head: dict[str, str], now: str) -> None:
    ran_311 = InputManifest({"a.py": "b1"}, {}, interpreter="3.11.7")
    (change,) = _head(**head).changes(ran_311)
    assert (change.what, change.now) == ("interpreter", now)
    assert _head(python_pin="3.11", requires_python=">=3.11").changes(ran_311) == ()
    assert _head(python_pin="3.12").changes(InputManifest({"a.py": "b1"}, {})) == ()  # not recorded


def test_an_interpreter_that_is_no_version_is_a_change_not_a_traceback() -> None:
    odd = InputManifest({"a.py": "b1"}, {}, interpreter="3.11.7abc")
    (change,) = _head(requires_python=">=3.11").changes(odd)
    assert change.what == "interpreter"


def test_a_requires_python_that_is_no_specifier_names_the_field() -> None:
    from soakbench.matrix.freshness.head import inputs_of
    from soakbench.matrix.model import MatrixInputError

    with pytest.raises(MatrixInputError, match=r"pyproject.toml: project.requires-python: 'three' is not"):
        inputs_of({}, {"pyproject.toml": '[project]\nrequires-python = "three"\n'})
