"""make_env: config -> compiled model -> physics backend -> batched task environment."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from soakbench.runtime.assets import load_model
from soakbench.runtime.backends import backend_class
from soakbench.runtime.tasks import task_class

if TYPE_CHECKING:
    from soakbench.runtime.backends.base import SimBackend
    from soakbench.runtime.config import ComposedConfig
    from soakbench.runtime.tasks.base import TaskEnv


def _check_device(cfg: ComposedConfig, device: torch.device | str | None) -> torch.device:
    """The backend's tensor device, ``resolved.physics_device``; a caller expecting another device is
    refused rather than given tensors elsewhere."""
    physics = torch.device(cfg.resolved.physics_device)
    if device is not None and torch.device(device).type != physics.type:
        training = cfg.training
        source = (
            f"training.mjwarp_device={training.mjwarp_device}"
            if training.sim_backend == "mjwarp"
            else f"the {training.sim_backend} backend's host tensors"
        )
        raise ValueError(
            f"make_env: device={device} conflicts with {source} (resolved.physics_device={physics}); "
            "the backend runs where the config says"
        )
    return physics


def make_env(
    cfg: ComposedConfig, *, device: torch.device | str | None = None, seed: int | None = None
) -> TaskEnv:
    """Build the task env of a composed config: ``cfg.task.scene`` model, the ``cfg.training.sim_backend``
    backend with ``cfg.algo.num_envs`` worlds and ``cfg.task.decimation`` substeps on
    ``cfg.resolved.physics_device``, and the ``cfg.task.name`` task seeded with ``seed`` (default
    ``cfg.seed``). ``device``, when given, must be that device. The backend is closed again if the task
    cannot be built."""
    tensor_device = _check_device(cfg, device)
    model = load_model(cfg.task.scene)
    sim = cfg.training.sim_backend
    backend_cls = backend_class(sim)
    backend: SimBackend
    if sim == "mujoco":
        backend = backend_cls(  # type: ignore[call-arg]  # num_threads is MujocoBackend's own keyword
            model,
            cfg.algo.num_envs,
            tensor_device,
            cfg.task.decimation,
            num_threads=cfg.training.physics_threads,
        )
    else:
        backend = backend_cls(model, cfg.algo.num_envs, tensor_device, cfg.task.decimation)
    try:
        task_cls = task_class(cfg.task.name)
        # Tasks read their section as a plain mapping (they are also built from hand-written ones).
        env: TaskEnv = task_cls(cfg.task.to_dict(), model, backend, seed=cfg.seed if seed is None else seed)
    except BaseException:
        backend.close()
        raise
    return env
