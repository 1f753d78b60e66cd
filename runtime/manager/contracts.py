"""What the manager needs from the objects it drives: the learner, the task env and the policy module.

Structural types, so the real SAC/FlashSAC learners, the benchmark's null learner and the test doubles
all fit without sharing a base class. Tensor and actor types are imported for type checking only:
importing the manager must not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from soakbench.runtime.config import LearnerConfig
    from soakbench.runtime.learners.collective import Collective
    from soakbench.runtime.learners.networks import Actor


class ManagedLearner(Protocol):
    """The learner side of a run (runtime/learners/base.py ``Learner`` is the production one)."""

    @property
    def actor(self) -> Actor: ...

    @property
    def updates_per_iteration(self) -> int: ...

    def add_transitions(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
    ) -> None: ...

    def ready(self) -> bool: ...

    def update(self) -> dict[str, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def join(self, collective: Collective) -> None:
        """Train as one rank of ``collective`` from now on (rank 0's state is taken here)."""
        ...

    def synchronize(self) -> None:
        """Make the rank-local state equal on every rank (a collective call)."""
        ...

    def checksum(self) -> str:
        """``sha256:...`` of the learner state."""
        ...

    def runtime_diagnostics(self) -> dict[str, dict[str, Any]]:
        """Per-optimisation ``{requested, enabled, disable_reason}`` (recorded in the manifest)."""
        ...


class EnvStep(Protocol):
    """One vector step's result (runtime/tasks/base.py ``StepOutput``)."""

    @property
    def obs(self) -> torch.Tensor: ...

    @property
    def next_obs(self) -> torch.Tensor: ...

    @property
    def reward(self) -> torch.Tensor: ...

    @property
    def terminated(self) -> torch.Tensor: ...

    @property
    def episode_returns(self) -> torch.Tensor: ...

    @property
    def episode_lengths(self) -> torch.Tensor: ...


class CollectorEnv(Protocol):
    """The batched task env the collector steps (runtime/tasks/base.py ``TaskEnv``)."""

    num_envs: int
    obs_dim: int
    action_dim: int

    def reset(self) -> torch.Tensor: ...

    def step(self, actions: torch.Tensor) -> EnvStep: ...

    def close(self) -> None: ...


class PolicyModule(Protocol):
    """The module the collector builds its actor copy with (``runtime.learners``)."""

    def build_actor(self, algo_cfg: LearnerConfig, obs_dim: int, action_dim: int) -> Actor: ...

    def actor_state_vector(self, actor: Actor) -> torch.Tensor: ...

    def load_actor_state_vector(self, actor: Actor, vec: torch.Tensor) -> None: ...
