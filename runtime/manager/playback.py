"""The post-training playback: the final actor, deterministic, on one env in the trainer process."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from soakbench.runtime.manager.collector import resolve
from soakbench.runtime.manager.shutdown import RunFailure

if TYPE_CHECKING:
    import torch

    from soakbench.runtime.config import RunConfig
    from soakbench.runtime.learners.networks import Actor
    from soakbench.runtime.manager.contracts import CollectorEnv


def run_playback(cfg: RunConfig, actor: Actor, env_factory: str, device: str) -> dict[str, Any]:
    """``training.playback_steps`` deterministic steps of ``actor`` on one env built on ``device``:
    ``{steps, total_reward, episodes_completed, mean_episode_return}``. Env failures are the backend
    worker's, actor failures the learner's."""
    import torch

    env = _playback_env(cfg, env_factory, torch.device(device))
    steps = int(cfg.training.playback_steps)
    try:
        total, returns = _play(env, actor, steps, torch.device(device))
    finally:
        env.close()
    return {
        "steps": steps,
        "total_reward": total,
        "episodes_completed": len(returns),
        "mean_episode_return": sum(returns) / len(returns) if returns else None,
    }


def _playback_env(cfg: RunConfig, env_factory: str, device: torch.device) -> CollectorEnv:
    one = cfg.with_num_envs(1)
    try:
        env: CollectorEnv = resolve(env_factory)(one, device=device, seed=int(cfg.seed) + 1)
    except Exception as exc:
        raise RunFailure("backend_worker_failure", f"playback env failed: {exc}", cause=exc) from exc
    return env


def _play(env: CollectorEnv, actor: Actor, steps: int, device: torch.device) -> tuple[float, list[float]]:
    import torch

    try:
        obs = env.reset()
    except Exception as exc:
        raise RunFailure("backend_worker_failure", f"playback env failed: {exc}", cause=exc) from exc
    actor_device = next(iter(actor.parameters()), torch.zeros(())).device
    total, returns = 0.0, list[float]()
    for _ in range(steps):
        try:
            with torch.inference_mode():
                action = actor.act(obs.to(actor_device), deterministic=True).to(device)
        except Exception as exc:
            raise RunFailure("learner_failure", f"playback actor failed: {exc}", cause=exc) from exc
        try:
            out = env.step(action)
        except Exception as exc:
            raise RunFailure("backend_worker_failure", f"playback step failed: {exc}", cause=exc) from exc
        total += float(out.reward.sum())
        returns.extend(float(r) for r in out.episode_returns.reshape(-1))
        obs = out.obs
    return total, returns
