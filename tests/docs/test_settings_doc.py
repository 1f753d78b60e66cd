"""docs/settings.md must list every setting any owner composes (drift fails CI)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from runtime.backends import BACKENDS
from runtime.config import ALGOS, compose
from runtime.tasks import TASKS

DOC = Path(__file__).resolve().parents[2] / "docs" / "settings.md"


def _flat(node: object, prefix: str = "") -> set[str]:
    if not isinstance(node, dict):
        return {prefix}
    keys: set[str] = set()
    for key, value in node.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        keys |= _flat(value, path) if isinstance(value, dict) else {path}
    return keys


def test_every_composed_setting_is_documented() -> None:
    text = DOC.read_text()
    keys: set[str] = set()
    for algo in ALGOS:
        for task in TASKS:
            for sim in BACKENDS:
                keys |= _flat(OmegaConf.to_container(compose(algo, task, sim)))
    missing = sorted(
        k for k in keys if not k.startswith(("owner.", "resolved.")) and f"| `{k}` |" not in text
    )
    assert not missing, f"docs/settings.md lacks rows for: {missing}"
    documented = {line.split("`")[1] for line in text.splitlines() if line.startswith("| `")}
    stale = sorted(documented - keys)
    assert not stale, f"docs/settings.md documents settings that no owner composes: {stale}"
