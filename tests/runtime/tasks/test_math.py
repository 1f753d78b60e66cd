"""Quaternion helpers agree with MuJoCo's own implementations."""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from soakbench.runtime.tasks._math import (
    normalize,
    projected_gravity,
    quat_angle_error,
    quat_conjugate,
    quat_mul,
    quat_rotate,
    quat_rotate_inverse,
    quat_to_tan_norm,
    yaw_quat,
)


def _random_quats(n: int, seed: int) -> torch.Tensor:
    return normalize(torch.randn(n, 4, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))


def test_against_mujoco() -> None:
    a, b = _random_quats(16, 0), _random_quats(16, 1)
    v = torch.randn(16, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for i in range(16):
        qa, qb, vi = a[i].numpy(), b[i].numpy(), v[i].numpy()
        prod = np.zeros(4)
        mujoco.mju_mulQuat(prod, qa, qb)
        np.testing.assert_allclose(quat_mul(a[i], b[i]).numpy(), prod, atol=1e-12)
        rot = np.zeros(3)
        mujoco.mju_rotVecQuat(rot, vi, qa)
        np.testing.assert_allclose(quat_rotate(a[i], v[i]).numpy(), rot, atol=1e-12)
        mat = np.zeros(9)
        mujoco.mju_quat2Mat(mat, qa)
        cols = mat.reshape(3, 3)[:, :2].T.reshape(6)
        np.testing.assert_allclose(quat_to_tan_norm(a[i]).numpy(), cols, atol=1e-12)
    torch.testing.assert_close(quat_rotate_inverse(a, quat_rotate(a, v)), v)
    torch.testing.assert_close(quat_mul(a, quat_conjugate(a))[:, 0], torch.ones(16, dtype=torch.float64))
    down = torch.tensor([0.0, 0.0, -1.0], dtype=torch.float64).expand(16, 3)
    torch.testing.assert_close(projected_gravity(a), quat_rotate_inverse(a, down))


def test_angle_error_and_yaw() -> None:
    q = _random_quats(8, 3)
    torch.testing.assert_close(
        quat_angle_error(q, -q), torch.zeros(8, dtype=torch.float64), atol=2e-6, rtol=0
    )
    half = torch.tensor([[np.cos(0.25), np.sin(0.25), 0.0, 0.0]], dtype=torch.float64)  # 0.5 rad about x
    assert (
        abs(float(quat_angle_error(half, torch.tensor([[1.0, 0, 0, 0]], dtype=torch.float64))) - 0.5) < 1e-9
    )
    yaw = yaw_quat(q)
    assert torch.allclose(yaw[:, 1:3], torch.zeros(8, 2, dtype=torch.float64))
    # The remaining rotation yaw^-1 * q keeps the x axis in the x-z plane... i.e. has no heading left.
    rest = quat_mul(quat_conjugate(yaw), q)
    x_axis = quat_rotate(rest, torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64).expand(8, 3))
    assert torch.allclose(x_axis[:, 1], torch.zeros(8, dtype=torch.float64), atol=1e-9)
