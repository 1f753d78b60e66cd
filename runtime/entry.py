"""The `train` console script: the training extra is checked before the runtime is imported."""

from __future__ import annotations

from soakbench.foundation.extras import TRAIN, require


def train() -> None:
    """`train`: exit 2 naming the extra when the training stack is missing, else the runtime's CLI."""
    require(TRAIN, "train")
    from soakbench.runtime.cli import main

    main()
