"""Argument checks shared by the backends (pure; shapes only, no device synchronization)."""

from __future__ import annotations

import torch


def check_ctrl(ctrl: torch.Tensor, num_envs: int, nu: int) -> None:
    """``ctrl`` must be a floating tensor of shape [num_envs, nu]."""
    if not isinstance(ctrl, torch.Tensor):
        raise TypeError(f"ctrl must be a torch.Tensor [N, nu], got {type(ctrl).__name__}")
    if tuple(ctrl.shape) != (num_envs, nu):
        raise ValueError(f"ctrl must have shape [{num_envs}, {nu}], got {list(ctrl.shape)}")
    if not ctrl.is_floating_point():
        raise ValueError(f"ctrl must be a floating tensor, got {ctrl.dtype}")


def check_reset_args(
    rows: torch.Tensor,
    qpos: torch.Tensor,
    qvel: torch.Tensor,
    num_envs: int,
    widths: tuple[int, int],
    *,
    check_values: bool = True,
) -> None:
    """``rows`` int64 [k] unique in [0, num_envs); ``qpos`` [k, nq] and ``qvel`` [k, nv] floating, where
    ``widths = (nq, nv)``.

    With ``check_values`` the row values are checked too (range, uniqueness): that reads them on
    the host, so device-resident backends pass ``False`` to keep reset free of host round trips.
    """
    nq, nv = widths
    if not isinstance(rows, torch.Tensor) or rows.dtype != torch.int64 or rows.ndim != 1:
        got = f"{rows.dtype} {list(rows.shape)}" if isinstance(rows, torch.Tensor) else type(rows).__name__
        raise ValueError(f"reset rows must be an int64 tensor [k], got {got}")
    k = rows.shape[0]
    for name, tensor, width in (("qpos", qpos, nq), ("qvel", qvel, nv)):
        if not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != (k, width):
            shape = str(list(tensor.shape)) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise ValueError(f"reset {name} must have shape [{k}, {width}], got {shape}")
        if not tensor.is_floating_point():
            raise ValueError(f"reset {name} must be floating, got {tensor.dtype}")
    if k == 0 or not check_values:
        return
    lo, hi = int(rows.min()), int(rows.max())
    if lo < 0 or hi >= num_envs:
        raise ValueError(f"reset rows must lie in [0, {num_envs}), got min {lo} max {hi}")
    if torch.unique(rows).numel() != k:
        raise ValueError("reset rows must be unique")
