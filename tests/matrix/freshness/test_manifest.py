"""An input manifest's freshness at HEAD, and how a change is said."""

from __future__ import annotations

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
