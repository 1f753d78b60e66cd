"""Batched, tensor-native tasks, registered by name and imported lazily. May import: runtime.assets, runtime.backends, runtime.timing, runtime.tasks."""

from __future__ import annotations

import importlib

TASKS: dict[str, str] = {
    "g1_walk_flat": "soakbench.runtime.tasks.g1_walk_flat:G1WalkFlat",
    "g1_motion_tracking": "soakbench.runtime.tasks.g1_motion_tracking:G1MotionTracking",
}


def task_class(name: str) -> type:
    """Import and return the task class registered as ``name``."""
    try:
        target = TASKS[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r}; registered: {sorted(TASKS)}") from None
    module_name, _, attr = target.partition(":")
    cls: type = getattr(importlib.import_module(module_name), attr)
    return cls
