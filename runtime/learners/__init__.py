"""Learners for the training runtime: SAC and FlashSAC behind one ``Learner`` interface.

Contract (docs/learners.md); ``algo_cfg`` is the validated learner section of a composed config
(``runtime.config.SacConfig`` | ``FlashSacConfig``), whose type selects the learner:
    build_learner(algo_cfg, obs_dim, action_dim, device) -> Learner
    build_actor(algo_cfg, obs_dim, action_dim) -> Actor      (collector copy; ``act(obs [N, O], deterministic)``)
    actor_state_vector(actor) -> Tensor[P] float32           (all parameters AND buffers, state_dict order)
    load_actor_state_vector(actor, vec)                      (inverse; P is fixed per config)
    actor_state_size(algo_cfg, obs_dim, action_dim) -> int   (P, to size inference-ring slots)

Importing this package is cheap (no torch at import time); torch loads when a function is called.
May import: runtime.config, runtime.env, runtime.tasks, runtime.learners.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from soakbench.runtime.config import LearnerConfig
    from soakbench.runtime.learners.base import Learner
    from soakbench.runtime.learners.networks import Actor

__all__ = [
    "actor_state_size",
    "actor_state_vector",
    "build_actor",
    "build_learner",
    "load_actor_state_vector",
]


# Config section type -> (module, learner class, actor builder), imported by name: a run loads only its own
# learner's module, so evidence from a SAC run does not depend on FlashSAC's code (docs/support-matrix.md).
LEARNERS: dict[str, tuple[str, str, str]] = {
    "SacConfig": ("soakbench.runtime.learners.sac", "SACLearner", "build_sac_actor"),
    "FlashSacConfig": ("soakbench.runtime.learners.flashsac", "FlashSACLearner", "build_flash_actor"),
}


def _learner_module(algo_cfg: object) -> tuple[ModuleType, str, str]:
    """The learner module of ``algo_cfg``'s section type, its learner class name and actor builder name."""
    try:
        module, learner, actor = LEARNERS[type(algo_cfg).__name__]
    except KeyError:
        raise TypeError(
            f"no learner takes a {type(algo_cfg).__name__}; pass one of {', '.join(sorted(LEARNERS))}"
        ) from None
    return importlib.import_module(module), learner, actor


def build_learner(  # noqa: PLR0913 — the keyword-only switches mirror training.* one to one
    algo_cfg: LearnerConfig,
    obs_dim: int,
    action_dim: int,
    device: torch.device,
    *,
    seed: int = 0,
    torch_compile: bool = False,
    cuda_graphs: bool = False,
) -> Learner:
    """The learner of ``algo_cfg``'s section type on ``device``. ``torch_compile``/``cuda_graphs`` come from
    ``training.*``; they are forced off on CPU and the decision is in ``learner.runtime_diagnostics()``.
    The section's bounds were checked when it was composed; the learner does not check them again."""
    from soakbench.runtime.learners.base import runtime_options

    module, learner, _ = _learner_module(algo_cfg)
    options = runtime_options(device, torch_compile, cuda_graphs)
    built: Learner = getattr(module, learner)(algo_cfg, obs_dim, action_dim, device, seed, options)
    return built


def build_actor(algo_cfg: LearnerConfig, obs_dim: int, action_dim: int) -> Actor:
    """A fresh actor module on CPU in eval mode, shaped like the learner's (for the collector)."""
    module, _, builder = _learner_module(algo_cfg)
    actor: Actor = getattr(module, builder)(algo_cfg, obs_dim, action_dim)
    actor.requires_grad_(False)
    return actor.eval()


def _tensors(actor: torch.nn.Module) -> list[torch.Tensor]:
    return list(actor.state_dict(keep_vars=True).values())


def actor_state_vector(actor: torch.nn.Module) -> torch.Tensor:
    """Every parameter and buffer of ``actor`` flattened, state_dict order -> float32 [P] on the actor's device."""
    import torch

    return torch.cat([t.detach().reshape(-1).to(torch.float32) for t in _tensors(actor)])


def load_actor_state_vector(actor: torch.nn.Module, vec: torch.Tensor) -> None:
    """Copy ``vec`` [P] (from ``actor_state_vector``) into ``actor`` in place; ValueError on a size mismatch."""
    import torch

    tensors = _tensors(actor)
    total = sum(t.numel() for t in tensors)
    if vec.dim() != 1 or vec.numel() != total:
        raise ValueError(f"actor state vector has shape {tuple(vec.shape)}, expected ({total},)")
    offset = 0
    with torch.no_grad():
        for t in tensors:
            n = t.numel()
            t.copy_(vec[offset : offset + n].view_as(t).to(t.device, t.dtype))
            offset += n


def actor_state_size(algo_cfg: LearnerConfig, obs_dim: int, action_dim: int) -> int:
    """P, the length of ``actor_state_vector`` for this configuration."""
    return sum(t.numel() for t in _tensors(build_actor(algo_cfg, obs_dim, action_dim)))
