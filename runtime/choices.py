"""The owner-route choices shared by every CLI (`train`, `soak run`), kept import-light: no torch, no
physics. tests/runtime/test_choices.py keeps them equal to the runtime registries."""

from __future__ import annotations

from enum import StrEnum

from soakbench.foundation.vocab import Algo

__all__ = ["Algo", "Sim", "Task"]


class Task(StrEnum):
    g1_walk_flat = "g1_walk_flat"
    g1_motion_tracking = "g1_motion_tracking"


class Sim(StrEnum):
    mujoco = "mujoco"
    mjwarp = "mjwarp"
