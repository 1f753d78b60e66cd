"""Policy evaluation for the learning evidence: survival length over a fixed horizon.

``survival_lengths`` steps a TaskEnv for ``horizon`` control steps from reset and records, per world, the
length of its first episode (steps up to and including the first terminated/truncated step), censored
at ``horizon`` for worlds that never finish. Every world contributes exactly one value, so the mean is
not biased towards short episodes the way "mean length of episodes that finished in a window" is.

``evaluate_run`` loads a run's ``checkpoints/final.pt`` and measures, on the same worlds and seeds:
the trained actor (deterministic and stochastic), the *untrained* actor built with the run's seed
(deterministic; what the trainer started from), and uniform-random actions in [-1, 1] (the trainer's
prefill policy). Used by tests/benchmarks/test_learning_smoke.py and docs/learners.md.

``restore_run`` is the one loader behind it and behind the benchmarks' task-specific rollouts: checkpoint,
config resized to the evaluation's worlds, task check and restored learner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from soakbench.runtime.config import RunConfig
    from soakbench.runtime.learners.base import Learner
    from soakbench.runtime.tasks.base import TaskEnv

Policy = Callable[["torch.Tensor"], "torch.Tensor"]  # obs [N, O] -> actions [N, A] in [-1, 1]


def survival_lengths(env: TaskEnv, policy: Policy, horizon: int) -> torch.Tensor:
    """First-episode length per world in control steps, censored at ``horizon``: float32 [N]."""
    import torch

    if horizon < 1:
        raise ValueError(f"horizon must be >= 1, got {horizon}")
    obs = env.reset()
    lengths = torch.full((env.num_envs,), float(horizon))
    alive = torch.ones(env.num_envs, dtype=torch.bool)
    for t in range(horizon):
        with torch.inference_mode():
            out = env.step(policy(obs))
        done = (out.terminated | out.truncated).cpu() & alive
        lengths[done] = float(t + 1)
        alive &= ~done
        if not alive.any():
            break
        obs = out.obs
    return lengths


class CheckpointError(RuntimeError):
    """A checkpoint that is missing or cannot be read; the message names its path."""


def read_checkpoint(run_dir: Path, checkpoint: str = "final.pt") -> dict[str, Any]:
    """The payload of ``run_dir/checkpoints/<checkpoint>`` (config, learner state, env steps), on CPU."""
    import torch

    path = Path(run_dir) / "checkpoints" / checkpoint
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint (did the run complete?)")
    try:
        payload: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # a truncated or foreign file: name it
        raise CheckpointError(f"{path}: not a readable checkpoint ({exc})") from exc
    return payload


def restore_learner(payload: dict[str, Any], cfg: RunConfig, obs_dim: int, action_dim: int) -> Learner:
    """The checkpoint's learner on CPU, its actor in eval mode."""
    import torch

    from soakbench.runtime.learners import build_learner

    learner = build_learner(cfg.algo, obs_dim, action_dim, torch.device("cpu"), seed=cfg.seed)
    learner.load_state_dict(payload["learner"])
    learner.actor.eval()
    return learner


def cpu_env(cfg: RunConfig, seed: int) -> TaskEnv:
    """A fresh env of ``cfg``'s task on CPU."""
    import torch

    from soakbench.runtime.env import make_env

    return make_env(cfg, device=torch.device("cpu"), seed=seed)


class TaskMismatchError(ValueError):
    """A run of another task than the evaluation needs; the message names both."""


@dataclass(frozen=True)
class RestoredRun:
    """A finished run's checkpoint, its config resized to ``num_envs`` worlds, and its learner on CPU."""

    payload: dict[str, Any]
    cfg: RunConfig
    obs_dim: int
    action_dim: int
    learner: Learner

    @property
    def total_env_steps(self) -> int:
        return int(self.payload["total_env_steps"])

    def make_env(self, seed: int) -> TaskEnv:
        """A fresh CPU env of the run's task; the same ``seed`` gives the same initial states."""
        return cpu_env(self.cfg, seed)

    def untrained_learner(self) -> Learner:
        """The learner the run started from (built with the run's seed), its actor in eval mode."""
        import torch

        from soakbench.runtime.learners import build_learner

        cpu = torch.device("cpu")
        learner = build_learner(self.cfg.algo, self.obs_dim, self.action_dim, cpu, seed=self.cfg.seed)
        learner.actor.eval()
        return learner


def restore_run(
    run_dir: Path, num_envs: int, checkpoint: str = "final.pt", task: type[TaskEnv] | None = None
) -> RestoredRun:
    """Read ``run_dir``'s checkpoint and restore its learner; with ``task``, refuse a run of another task.

    Raises CheckpointError (missing or unreadable checkpoint) or TaskMismatchError.
    """
    from soakbench.runtime.config import load_run_config

    payload = read_checkpoint(run_dir, checkpoint)
    cfg = load_run_config(payload["config"]).with_num_envs(num_envs)
    probe = cpu_env(cfg, seed=0)
    try:
        if task is not None and not isinstance(probe, task):
            raise TaskMismatchError(f"{run_dir}: a {type(probe).__name__} run, not {task.__name__}")
        obs_dim, action_dim = probe.obs_dim, probe.action_dim
    finally:
        probe.close()
    learner = restore_learner(payload, cfg, obs_dim, action_dim)
    return RestoredRun(payload, cfg, obs_dim, action_dim, learner)


POLICIES: tuple[str, ...] = (
    "trained_deterministic",
    "trained_stochastic",
    "untrained_deterministic",
    "uniform_random",
)


def evaluate_run(
    run_dir: Path,
    num_envs: int,
    horizon: int,
    seed: int = 12345,
    checkpoint: str = "final.pt",
    policies: tuple[str, ...] = POLICIES,
) -> dict[str, Any]:
    """Survival statistics of a finished run's final policy vs the untrained actor and random actions.

    Returns ``{policy: {mean, median, fraction_censored}}`` for each of ``policies`` (by default all of
    ``POLICIES``: ``trained_deterministic``, ``trained_stochastic``, ``untrained_deterministic``,
    ``uniform_random``); plus ``horizon``, ``num_envs``, ``seed`` and the checkpoint's
    ``total_env_steps``. All on CPU, fresh env per policy with the same ``seed`` (identical initial
    states). A caller that reads only some policies names them: the untrained actor holds its stand pose
    for the whole horizon, the costliest rollout of the four.
    """
    import torch

    unknown = [name for name in policies if name not in POLICIES]
    if unknown or not policies:
        raise ValueError(f"policies must be a non-empty subset of {', '.join(POLICIES)}; got {policies}")
    run = restore_run(run_dir, num_envs, checkpoint)
    trained, untrained, action_dim = run.learner, run.untrained_learner(), run.action_dim
    gen = torch.Generator().manual_seed(seed)
    rollouts: dict[str, Policy] = {
        "trained_deterministic": lambda o: trained.actor.act(o, deterministic=True),
        "trained_stochastic": lambda o: trained.actor.act(o, deterministic=False),
        "untrained_deterministic": lambda o: untrained.actor.act(o, deterministic=True),
        "uniform_random": lambda o: torch.rand(o.shape[0], action_dim, generator=gen) * 2 - 1,
    }
    out: dict[str, Any] = {
        "horizon": horizon,
        "num_envs": num_envs,
        "seed": seed,
        "total_env_steps": run.total_env_steps,
    }
    for name, policy in rollouts.items():
        if name not in policies:
            continue
        e = run.make_env(seed)
        try:
            lengths = survival_lengths(e, policy, horizon)
        finally:
            e.close()
        out[name] = {
            "mean": float(lengths.mean()),
            "median": float(lengths.median()),
            "fraction_censored": float((lengths >= horizon).float().mean()),
        }
    return out
