"""Packed public-state layout shared by the backends: one ``[N, W]`` float32 row per world.

``W = nq + nv + nsensordata + nu``; columns are ``qpos | qvel | sensordata | actuator_force``. The
MuJoCo host bridge fills such a buffer on the host and ships it in ONE copy; views split it into a
:class:`PublicState` without further copies.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from soakbench.runtime.backends.base import PublicState

FIELDS: tuple[str, ...] = ("qpos", "qvel", "sensordata", "actuator_force")


@dataclass(frozen=True)
class StateLayout:
    """Column ranges of the packed public state (all widths in float32 elements)."""

    nq: int
    nv: int
    nsensordata: int
    nu: int

    @classmethod
    def of(cls, model: object) -> StateLayout:
        """Layout of a compiled ``mujoco.MjModel`` (duck-typed to keep this module import-light)."""
        return cls(
            nq=int(model.nq),  # type: ignore[attr-defined]
            nv=int(model.nv),  # type: ignore[attr-defined]
            nsensordata=int(model.nsensordata),  # type: ignore[attr-defined]
            nu=int(model.nu),  # type: ignore[attr-defined]
        )

    def widths(self) -> dict[str, int]:
        """Row width of each ``PublicState`` field."""
        return {"qpos": self.nq, "qvel": self.nv, "sensordata": self.nsensordata, "actuator_force": self.nu}

    @property
    def width(self) -> int:
        """W, the packed row width."""
        return self.nq + self.nv + self.nsensordata + self.nu

    def slices(self) -> dict[str, slice]:
        """Column slice of each field inside a packed row."""
        out, start = {}, 0
        for name, width in self.widths().items():
            out[name] = slice(start, start + width)
            start += width
        return out

    def split(self, packed: torch.Tensor) -> PublicState:
        """Views of ``packed`` [N, W] as a :class:`PublicState` (no copy)."""
        if packed.ndim != 2 or packed.shape[1] != self.width:
            raise ValueError(f"packed state must be [N, {self.width}], got {tuple(packed.shape)}")
        s = self.slices()
        return PublicState(
            qpos=packed[:, s["qpos"]],
            qvel=packed[:, s["qvel"]],
            sensordata=packed[:, s["sensordata"]],
            actuator_force=packed[:, s["actuator_force"]],
        )
