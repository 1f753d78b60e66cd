"""Batched quaternion/frame helpers for the tasks (torch; quaternions are (w, x, y, z)).

The env step runs these on every row each control step, where small tensors make the cost the number
of ops dispatched, not the arithmetic. So products that are bilinear or quadratic in quaternion
components are one outer product and one matrix product with a constant coefficient table, instead of
a dozen elementwise ops per component.
"""

from __future__ import annotations

import functools

import torch

# Hamilton product a * b: (i, j, k, sign) means out[k] += sign * a[i] * b[j].
_HAMILTON = (
    (0, 0, 0, 1), (1, 1, 0, -1), (2, 2, 0, -1), (3, 3, 0, -1),
    (0, 1, 1, 1), (1, 0, 1, 1), (2, 3, 1, 1), (3, 2, 1, -1),
    (0, 2, 2, 1), (1, 3, 2, -1), (2, 0, 2, 1), (3, 1, 2, 1),
    (0, 3, 3, 1), (1, 2, 3, 1), (2, 1, 3, -1), (3, 0, 3, 1),
)  # fmt: skip
# Rotation matrix of a unit quaternion as a quadratic form, row-major R[r][c]: (i, j, entry, coefficient)
# means R[entry] += coefficient * q[i] * q[j] (w, x, y, z = 0..3).
_ROTATION = (
    (0, 0, 0, 1), (1, 1, 0, 1), (2, 2, 0, -1), (3, 3, 0, -1),  # w2 + x2 - y2 - z2
    (1, 2, 1, 2), (0, 3, 1, -2),  # 2(xy - wz)
    (1, 3, 2, 2), (0, 2, 2, 2),  # 2(xz + wy)
    (1, 2, 3, 2), (0, 3, 3, 2),  # 2(xy + wz)
    (0, 0, 4, 1), (1, 1, 4, -1), (2, 2, 4, 1), (3, 3, 4, -1),  # w2 - x2 + y2 - z2
    (2, 3, 5, 2), (0, 1, 5, -2),  # 2(yz - wx)
    (1, 3, 6, 2), (0, 2, 6, -2),  # 2(xz - wy)
    (2, 3, 7, 2), (0, 1, 7, 2),  # 2(yz + wx)
    (0, 0, 8, 1), (1, 1, 8, -1), (2, 2, 8, -1), (3, 3, 8, 1),  # w2 - x2 - y2 + z2
)  # fmt: skip
_TAN_NORM_ENTRIES = (0, 3, 6, 1, 4, 7)  # R's first column, then its second
_HEADING_ENTRIES = (3, 0)  # R[1][0], R[0][0]: the rotated x axis' y and x
_GRAVITY_ENTRIES = (6, 7, 8)  # R's third row; projected gravity is its negative


def _table(
    terms: tuple[tuple[int, int, int, int], ...], entries: tuple[int, ...], scale: float
) -> list[list[float]]:
    """A [16, len(entries)] coefficient table over the flattened outer product q_i * q_j."""
    column = {entry: n for n, entry in enumerate(entries)}
    table = [[0.0] * len(entries) for _ in range(16)]
    for i, j, entry, coefficient in terms:
        if entry in column:
            table[4 * i + j][column[entry]] += scale * coefficient
    return table


# name -> (terms, output entries, scale) of each table over the outer product q_i * q_j
_TABLES = {
    "hamilton": (_HAMILTON, (0, 1, 2, 3), 1.0),
    "tan_norm": (_ROTATION, _TAN_NORM_ENTRIES, 1.0),
    "heading": (_ROTATION, _HEADING_ENTRIES, 1.0),
    "gravity": (_ROTATION, _GRAVITY_ENTRIES, -1.0),
}
# name -> rows of each constant used as it is
_LITERALS = {
    "conjugate_signs": [1.0, -1.0, -1.0, -1.0],
    "yaw_embedding": [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]],  # (cos, sin) of half yaw -> quaternion
}


@functools.lru_cache(maxsize=64)
def _constant(name: str, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The constant ``name`` (of :data:`_TABLES` or :data:`_LITERALS`) on ``device``, built once per dtype
    and device."""
    rows = _LITERALS[name] if name in _LITERALS else _table(*_TABLES[name])
    return torch.tensor(rows, dtype=dtype, device=device)


def _outer_times(a: torch.Tensor, b: torch.Tensor, name: str) -> torch.Tensor:
    """``vec(a_i * b_j) @ table``: a bilinear form of ``a`` and ``b`` [..., 4] (shapes broadcast)."""
    outer = (a.unsqueeze(-1) * b.unsqueeze(-2)).flatten(-2)
    return outer @ _constant(name, outer.dtype, outer.device)


def quat_conjugate(q: torch.Tensor) -> torch.Tensor:
    """Conjugate of ``q`` [..., 4] (the inverse for unit quaternions)."""
    return q * _constant("conjugate_signs", q.dtype, q.device)


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``a * b``; shapes [..., 4] broadcast."""
    return _outer_times(a, b, "hamilton")


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

    Equals ``quat_rotate_inverse(q, down)`` (minus the third row of R(q)), for unit ``q``."""
    return _outer_times(q, q, "gravity")


def yaw_quat(q: torch.Tensor) -> torch.Tensor:
    """The heading-only (rotation about world z) part of unit ``q`` [..., 4]: the rotation about z that
    turns world x onto the horizontal direction of the rotated x axis, unit norm."""
    heading = _outer_times(q, q, "heading")  # R's (1, 0) and (0, 0) entries: the rotated x axis in xy
    return quat_from_yaw(torch.atan2(heading[..., 0], heading[..., 1]))


def quat_from_yaw(yaw: torch.Tensor) -> torch.Tensor:
    """Unit quaternions [..., 4] of rotations by ``yaw`` [...] (rad) about world z."""
    half = 0.5 * yaw
    return torch.stack([torch.cos(half), torch.sin(half)], dim=-1) @ _constant(
        "yaw_embedding", yaw.dtype, yaw.device
    )


def quat_angle_error(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Rotation angle (rad, in [0, pi]) between unit quaternions ``a`` and ``b`` [..., 4]; sign-safe."""
    dot = (a * b).sum(-1).abs().clamp(max=1.0)
    return 2.0 * torch.acos(dot)


def quat_to_tan_norm(q: torch.Tensor) -> torch.Tensor:
    """First two columns of the rotation matrix of unit ``q`` [..., 4] -> [..., 6] (continuous encoding)."""
    return _outer_times(q, q, "tan_norm")


def normalize(q: torch.Tensor, eps: float = 1e-9) -> torch.Tensor:
    """Unit-normalize along the last axis."""
    unit: torch.Tensor = q / q.norm(dim=-1, keepdim=True).clamp(min=eps)
    return unit
