"""harness.two_runs.fields: dotted-path reads and the settings two artifacts differ in."""

from __future__ import annotations

from soakbench.harness.two_runs.fields import dig, setting_differences

DOC = {
    "settings": {"num_envs": 256, "nested": {"x": 1}},
    "context": {"software": {"torch": "2.5", "numpy": "2.1"}},
}


def test_dig_reads_a_dotted_path_and_returns_none_where_any_part_is_missing() -> None:
    assert dig(DOC, "settings.nested.x") == 1
    assert dig(DOC, "settings.num_envs") == 256
    assert dig(DOC, "settings.missing.x") is None
    assert dig(DOC, "settings.num_envs.deeper") is None  # a leaf is not a mapping


def test_setting_differences_lists_changed_fields_then_changed_versions() -> None:
    new = {
        "settings": {"num_envs": 512, "nested": {"x": 1}},
        "context": {"software": {"torch": "2.6", "mujoco": "3.3"}},
    }
    assert setting_differences(DOC, new, ["settings.num_envs", "settings.nested.x"]) == [
        {"field": "settings.num_envs", "base": 256, "new": 512},
        {"field": "context.software.mujoco", "base": None, "new": "3.3"},
        {"field": "context.software.numpy", "base": "2.1", "new": None},
        {"field": "context.software.torch", "base": "2.5", "new": "2.6"},
    ]
    assert setting_differences(DOC, DOC, ["settings.num_envs"]) == []
