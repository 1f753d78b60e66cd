"""Which optional extra a command needs, checked before the command's own module is imported.

`pip install soakbench` installs the harness alone; `train`, `probe` and `extract-metrics` need the
training stack of the ``train`` extra. Their console scripts check for it first, so a harness-only install
answers with the extra to install and exit 2, not with an import traceback from deep in the runtime.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass

EXIT_MISSING_EXTRA = 2


@dataclass(frozen=True)
class Extra:
    """An optional extra of the distribution and the top-level modules a command of it imports."""

    name: str
    modules: tuple[str, ...]


#: The training runtime: torch, MuJoCo, OmegaConf configs and TensorBoard event files.
TRAIN = Extra(name="train", modules=("torch", "mujoco", "omegaconf", "tensorboard"))
#: What `extract-metrics` reads event files with (it never imports torch).
METRICS = Extra(name="train", modules=("tensorboard",))


def missing_modules(modules: Sequence[str]) -> list[str]:
    """The modules of ``modules`` that cannot be imported here (found without importing them)."""
    out = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a finder that refuses the name, or a broken parent package
            found = False
        if not found:
            out.append(name)
    return out


def require(extra: Extra, command: str) -> None:
    """Exit 2, naming the extra to install, when a module of ``extra`` is missing; return otherwise."""
    missing = missing_modules(extra.modules)
    if not missing:
        return
    print(
        f"{command}: error: this command needs the '{extra.name}' extra, and {', '.join(missing)} "
        f"cannot be imported here. Install it with: pip install 'soakbench[{extra.name}]' "
        "('soakbench[mjwarp]' adds MuJoCo Warp)",
        file=sys.stderr,
    )
    raise SystemExit(EXIT_MISSING_EXTRA)
