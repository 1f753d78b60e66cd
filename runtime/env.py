"""make_env: config -> compiled model -> physics backend -> batched task environment."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from runtime.assets import load_model
from runtime.backends import backend_class
from runtime.tasks import task_class

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from runtime.backends.base import SimBackend
    from runtime.tasks.base import TaskEnv


def _backend_device(cfg: DictConfig, device: torch.device | None) -> torch.device:
    """Tensor device of the backend: the explicit ``device``, else cpu (mujoco) or
    ``training.mjwarp_device`` (mjwarp). A conflicting explicit device for mjwarp is an error."""
    sim = str(cfg.training.sim_backend)
    if sim == "mjwarp":
        configured = torch.device(str(cfg.training.mjwarp_device))
        if device is not None and torch.device(device).type != configured.type:
            raise ValueError(
                f"make_env: device={device} conflicts with training.mjwarp_device={configured.type}; "
                "the mjwarp backend runs where the config says"
            )
        return configured
    return torch.device(device) if device is not None else torch.device("cpu")


def make_env(cfg: DictConfig, *, device: torch.device | None = None, seed: int | None = None) -> TaskEnv:
    """Build the task env of a composed config: ``cfg.task.scene`` model, the ``cfg.training.sim_backend``
    backend with ``cfg.algo.num_envs`` worlds and ``cfg.task.decimation`` substeps, and the
    ``cfg.task.name`` task seeded with ``seed`` (default ``cfg.seed``). The backend is closed again if
    the task cannot be built."""
    model = load_model(str(cfg.task.scene))
    sim = str(cfg.training.sim_backend)
    backend_cls = backend_class(sim)
    num_envs = int(cfg.algo.num_envs)
    decimation = int(cfg.task.decimation)
    tensor_device = _backend_device(cfg, device)
    backend: SimBackend
    if sim == "mujoco":
        threads = cfg.training.physics_threads
        backend = backend_cls(  # type: ignore[call-arg]
            model, num_envs, tensor_device, decimation, num_threads=None if threads is None else int(threads)
        )
    else:
        backend = backend_cls(model, num_envs, tensor_device, decimation)
    try:
        task_cls = task_class(str(cfg.task.name))
        env: TaskEnv = task_cls(cfg.task, model, backend, seed=int(cfg.seed if seed is None else seed))
    except BaseException:
        backend.close()
        raise
    return env
