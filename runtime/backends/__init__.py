"""Physics backends, registered by name and imported lazily (no physics import at package import). May import: foundation, runtime.backends."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from soakbench.runtime.backends.base import SimBackend

BACKENDS: dict[str, str] = {
    "mujoco": "soakbench.runtime.backends.mujoco:MujocoBackend",
    "mjwarp": "soakbench.runtime.backends.mjwarp:MjwarpBackend",
}


def backend_class(name: str) -> type[SimBackend]:
    """Import and return the backend class registered as ``name``."""
    try:
        target = BACKENDS[name]
    except KeyError:
        raise KeyError(f"unknown backend {name!r}; registered: {sorted(BACKENDS)}") from None
    from soakbench.runtime.backends.base import SimBackend

    module_name, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    if not (isinstance(cls, type) and issubclass(cls, SimBackend)):
        raise TypeError(f"backend {name!r} is registered as {target}, which is not a SimBackend subclass")
    return cls
