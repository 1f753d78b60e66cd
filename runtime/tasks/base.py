"""TaskEnv: a batched, tensor-native RL environment over a :class:`SimBackend`.

The base class owns the control loop shared by every task: action -> joint targets, the physics
exchange, episode bookkeeping (returns, lengths, time-outs), automatic reset of finished rows and the
timer phases of :data:`runtime.timing.PHASES`. Subclasses supply the task: observations, rewards,
terminations and the reset state. Everything stays on ``backend.device``; tasks never import a backend
module (they receive an instance).
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from soakbench.runtime.tasks._model import ModelInfo, model_info

if TYPE_CHECKING:
    import mujoco

    from soakbench.runtime.backends.base import PublicState, SimBackend
    from soakbench.runtime.timing import PhaseTimer


class TaskConfigError(ValueError):
    """A task setting is missing or out of range; the message names ``task.<key>``."""


@dataclass(frozen=True)
class StepOutput:
    """Result of one control step of all N envs (O = obs_dim, k = episodes finished this step).

    obs:             [N, O] float32, next policy input (rows that finished are already reset); it is
                     the same tensor as ``next_obs`` when no row reset this step, so do not write to it
    next_obs:        [N, O] float32, observation reached by this step before any reset (bootstrap)
    reward:          [N] float32
    terminated:      [N] bool, the episode ended in a failure state (no bootstrapping)
    truncated:       [N] bool, the episode hit its time limit without terminating
    episode_returns: [k] float32, undiscounted returns of the finished episodes
    episode_lengths: [k] int64, control steps of the finished episodes
    """

    obs: torch.Tensor
    next_obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    episode_returns: torch.Tensor
    episode_lengths: torch.Tensor


def cfg_float(
    task_cfg: Mapping[str, Any], key: str, *, low: float | None = None, high: float | None = None
) -> float:
    """Read ``task.<key>`` as a finite float within [low, high]; raise :class:`TaskConfigError`."""
    value = task_cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TaskConfigError(f"task.{key} must be a number, got {value!r}")
    out = float(value)
    if out != out or (low is not None and out < low) or (high is not None and out > high):
        raise TaskConfigError(f"task.{key} must lie in [{low}, {high}], got {value!r}")
    return out


def cfg_range(task_cfg: Mapping[str, Any], key: str) -> tuple[float, float]:
    """Read ``task.<key>`` as a ``[low, high]`` pair with low <= high."""
    value = task_cfg.get(key)
    try:
        low, high = (float(v) for v in value)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise TaskConfigError(f"task.{key} must be a [low, high] pair of numbers, got {value!r}") from None
    if not low <= high:
        raise TaskConfigError(f"task.{key} must have low <= high, got {value!r}")
    return low, high


def action_terms(
    action: torch.Tensor,
    last_action: torch.Tensor,
    joint_pos: torch.Tensor,
    soft_lower: torch.Tensor,
    soft_upper: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """The unweighted penalty terms every task shares, each [N] float32 (pure): ``action_rate``
    |a_t - a_{t-1}|^2 and ``joint_limits``, rad beyond the soft joint range, summed.

    action/last_action [N, A]; joint_pos [N, J]; soft_lower/soft_upper [J]."""
    beyond = (soft_lower - joint_pos).clamp(min=0.0) + (joint_pos - soft_upper).clamp(min=0.0)
    return {"action_rate": (action - last_action).square().sum(-1), "joint_limits": beyond.sum(-1)}


class TaskEnv(ABC):
    """Batched environment of ``backend.num_envs`` worlds; see :class:`StepOutput` for step results.

    Actions [N, A] in [-1, 1] are joint-target offsets: ``ctrl = default_joint_pos + action_scale *
    action`` (rad), clamped to the actuator range. Rows that terminate or time out are reset inside
    :meth:`step` through ``backend.reset_rows``.
    """

    semantic_name: ClassVar[str]
    reward_weights: ClassVar[Mapping[str, float]]
    obs_dim: int

    def __init__(
        self, task_cfg: Mapping[str, Any], model: mujoco.MjModel, backend: SimBackend, *, seed: int
    ) -> None:
        self.backend = backend
        self.num_envs = backend.num_envs
        self.device = backend.device
        decimation = task_cfg.get("decimation")
        if isinstance(decimation, bool) or not isinstance(decimation, int) or decimation < 1:
            raise TaskConfigError(f"task.decimation must be an integer >= 1, got {decimation!r}")
        if decimation != backend.decimation:
            raise TaskConfigError(f"task.decimation={decimation} but the backend steps {backend.decimation}")
        self.info: ModelInfo = model_info(model, decimation, self.device)
        self.action_dim = self.info.nu
        self.action_scale = cfg_float(task_cfg, "action_scale", low=0.0, high=10.0)
        episode_s = cfg_float(task_cfg, "episode_length_s", low=self.info.control_dt, high=1e6)
        self.max_episode_steps = max(1, round(episode_s / self.info.control_dt))
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(int(seed))
        n = self.num_envs
        self.episode_step = torch.zeros(n, dtype=torch.int64, device=self.device)
        self.episode_return = torch.zeros(n, dtype=torch.float32, device=self.device)
        self.last_action = torch.zeros(n, self.action_dim, dtype=torch.float32, device=self.device)
        self._reward_weight_vector = torch.tensor(
            list(self.reward_weights.values()), dtype=torch.float32, device=self.device
        )

    # -- task hooks -------------------------------------------------------------------------------
    @abstractmethod
    def _sample_reset_state(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Start new episodes in ``rows`` [k]: resample per-episode task state (commands, clip phase)
        and return the physics state to write, ``qpos`` [k, nq] and ``qvel`` [k, nv]."""

    @abstractmethod
    def _observe(self, state: PublicState, rows: torch.Tensor | None) -> torch.Tensor:
        """Observations [N, O] (``rows`` None) or [k, O] of ``rows`` [k], from ``state``."""

    @abstractmethod
    def _evaluate(
        self, state: PublicState, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """After a physics step: ``reward`` [N] float32, ``terminated`` [N] bool, and ``time_up`` [N]
        bool (a task-specific end such as the clip running out; the episode time limit is added by
        the base). ``self.last_action`` still holds the previous action, ``episode_step`` is already
        incremented."""

    # -- public API -------------------------------------------------------------------------------
    def reset(self) -> torch.Tensor:
        """Reset every env and return the first observations [N, O]."""
        rows = torch.arange(self.num_envs, device=self.device)
        state = self._reset_rows(rows)
        return self._observe(state, None)

    def step(self, actions: torch.Tensor, timer: PhaseTimer | None = None) -> StepOutput:
        """Advance all envs one control step with ``actions`` [N, A] in [-1, 1] (clamped)."""
        if tuple(actions.shape) != (self.num_envs, self.action_dim):
            raise ValueError(
                f"actions must have shape [{self.num_envs}, {self.action_dim}], got {list(actions.shape)}"
            )
        action = actions.detach().to(device=self.device, dtype=torch.float32).clamp(-1.0, 1.0)
        info = self.info
        ctrl = torch.clamp(
            info.default_joint_pos + self.action_scale * action, info.ctrl_lower, info.ctrl_upper
        )
        with self._phase(timer, "physics_exchange"):
            state = self.backend.step(ctrl)
        with self._phase(timer, "update_state"):
            self.episode_step += 1
            reward, terminated, time_up = self._evaluate(state, action)
            self.last_action.copy_(action)
            next_obs = self._observe(state, None)
            truncated = (time_up | (self.episode_step >= self.max_episode_steps)) & ~terminated
            self.episode_return += reward
        with self._phase(timer, "reset_selection"):
            done = terminated | truncated
            rows = torch.nonzero(done).squeeze(1)
            episode_returns = self.episode_return[rows].clone()
            episode_lengths = self.episode_step[rows].clone()
        obs = next_obs
        if rows.numel() > 0:
            with self._phase(timer, "backend_reset"):
                state = self._reset_rows_physics(rows)
            with self._phase(timer, "reset_publication"):
                self._reset_bookkeeping(rows)
                obs = next_obs.clone()
                obs[rows] = self._observe(state, rows)
        return StepOutput(
            obs=obs,
            next_obs=next_obs,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            episode_returns=episode_returns,
            episode_lengths=episode_lengths,
        )

    def close(self) -> None:
        """Release the backend (idempotent)."""
        self.backend.close()

    # -- helpers ----------------------------------------------------------------------------------
    def _weighted_reward(self, terms: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The reward [N]: the :attr:`reward_weights` sum of ``terms`` (each [N]), as one matrix product."""
        return torch.stack([terms[name] for name in self.reward_weights], dim=-1) @ self._reward_weight_vector

    def _reset_rows(self, rows: torch.Tensor) -> PublicState:
        state = self._reset_rows_physics(rows)
        self._reset_bookkeeping(rows)
        return state

    def _reset_rows_physics(self, rows: torch.Tensor) -> PublicState:
        qpos, qvel = self._sample_reset_state(rows)
        return self.backend.reset_rows(rows, qpos, qvel)

    def _reset_bookkeeping(self, rows: torch.Tensor) -> None:
        self.episode_step[rows] = 0
        self.episode_return[rows] = 0.0
        self.last_action[rows] = 0.0

    def _uniform(self, shape: tuple[int, ...], low: float, high: float) -> torch.Tensor:
        """Uniform samples in [low, high) from the env's seeded generator."""
        u = torch.rand(shape, generator=self.generator, device=self.device)
        return low + (high - low) * u

    @staticmethod
    @contextlib.contextmanager
    def _phase(timer: PhaseTimer | None, name: str) -> Iterator[None]:
        if timer is None:
            yield
        else:
            with timer.phase(name):
                yield
