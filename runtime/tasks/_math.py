"""Batched quaternion/frame helpers for the tasks (torch; quaternions are (w, x, y, z))."""

from __future__ import annotations

import torch


def quat_conjugate(q: torch.Tensor) -> torch.Tensor:
    """Conjugate of ``q`` [..., 4] (the inverse for unit quaternions)."""
    return torch.cat([q[..., :1], -q[..., 1:]], dim=-1)


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``a * b``; shapes [..., 4] broadcast."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        dim=-1,
    )


def quat_rotate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors ``v`` [..., 3] by unit quaternions ``q`` [..., 4] (frame -> world)."""
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * torch.cross(u, v, dim=-1)
    return v + w * t + torch.cross(u, t, dim=-1)


def quat_rotate_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Express world vectors ``v`` [..., 3] in the frame of unit quaternions ``q`` [..., 4]."""
    return quat_rotate(quat_conjugate(q), v)


def projected_gravity(q: torch.Tensor) -> torch.Tensor:
    """World down (0, 0, -1) in the frame of unit quaternions ``q`` [..., 4] -> [..., 3].

    Equals ``quat_rotate_inverse(q, down)`` (minus the third row of R(q)) in closed form: no constant
    tensor to allocate or expand on the device each step."""
    w, x, y, z = q.unbind(-1)
    return torch.stack([2 * (w * y - x * z), -2 * (w * x + y * z), 2 * (x * x + y * y) - 1], dim=-1)


def yaw_quat(q: torch.Tensor) -> torch.Tensor:
    """The heading-only (rotation about world z) part of ``q`` [..., 4], unit norm."""
    w, x, y, z = q.unbind(-1)
    yaw = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    half = 0.5 * yaw
    zeros = torch.zeros_like(half)
    return torch.stack([torch.cos(half), zeros, zeros, torch.sin(half)], dim=-1)


def quat_from_yaw(yaw: torch.Tensor) -> torch.Tensor:
    """Unit quaternions [..., 4] of rotations by ``yaw`` [...] (rad) about world z."""
    half = 0.5 * yaw
    zeros = torch.zeros_like(half)
    return torch.stack([torch.cos(half), zeros, zeros, torch.sin(half)], dim=-1)


def quat_angle_error(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Rotation angle (rad, in [0, pi]) between unit quaternions ``a`` and ``b`` [..., 4]; sign-safe."""
    dot = (a * b).sum(-1).abs().clamp(max=1.0)
    return 2.0 * torch.acos(dot)


def quat_to_tan_norm(q: torch.Tensor) -> torch.Tensor:
    """First two columns of the rotation matrix of ``q`` [..., 4] -> [..., 6] (continuous encoding)."""
    w, x, y, z = q.unbind(-1)
    col0 = torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)], dim=-1)
    col1 = torch.stack([2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)], dim=-1)
    return torch.cat([col0, col1], dim=-1)


def normalize(q: torch.Tensor, eps: float = 1e-9) -> torch.Tensor:
    """Unit-normalize along the last axis."""
    unit: torch.Tensor = q / q.norm(dim=-1, keepdim=True).clamp(min=eps)
    return unit
