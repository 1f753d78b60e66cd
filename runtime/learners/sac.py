"""Soft Actor-Critic: twin Q, Polyak target critics, automatic entropy tuning, tanh-squashed Gaussian.

Pure core: ``sac_critic_loss``, ``sac_actor_loss`` and ``sac_step(nets, hp, state, batch, noise) ->
(new_state, metrics)``; ``SACLearner`` is the edge that samples batches/noise and keeps the state.
Shapes: B batch rows, O obs_dim, A action_dim, E = 2 critics.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch.func import functional_call

from soakbench.runtime.learners.base import Learner, RuntimeOptions
from soakbench.runtime.learners.collective import ALPHA_GRAD, SOLO, Collective, mean_params
from soakbench.runtime.learners.functional import (
    AdamState,
    Params,
    adam_init,
    adam_state_from,
    adam_update,
    clip_grad_norm,
    polyak,
)
from soakbench.runtime.learners.networks import SACActor, SACCritic, normalizer_update, squashed_gaussian
from soakbench.runtime.learners.replay import Batch

if TYPE_CHECKING:
    from soakbench.runtime.config import SacConfig


@dataclass(frozen=True)
class SACHyper:
    """Scalar hyperparameters (algo.* keys of the same names; target_entropy null -> -A)."""

    gamma: float
    tau: float
    actor_lr: float
    critic_lr: float
    alpha_lr: float
    target_entropy: float
    max_grad_norm: float | None
    actor_update_period: int


@dataclass(frozen=True)
class SACState:
    """Everything an update changes. Params are dicts keyed like the template modules."""

    actor: Params
    actor_buffers: Params  # observation normaliser statistics
    critic: Params
    target_critic: Params
    log_alpha: torch.Tensor  # [] entropy temperature, log space
    actor_opt: AdamState
    critic_opt: AdamState
    alpha_opt: AdamState
    step: int  # critic updates applied


CriticLoss = Callable[..., tuple[torch.Tensor, dict[str, torch.Tensor]]]


@dataclass(frozen=True)
class SACNets:
    """Template modules used as pure functions via ``functional_call``; their own tensors are unused.

    ``critic_loss`` is ``sac_critic_loss``, or its ``torch.compile`` when the learner compiles;
    ``collective`` averages the gradients over the ranks (``SOLO``: one rank, no change)."""

    actor: SACActor
    critic: SACCritic
    critic_loss: CriticLoss
    collective: Collective = SOLO


def _grad_params(params: Params) -> Params:
    return {k: v.detach().requires_grad_(True) for k, v in params.items()}


def normalize_obs(nets: SACNets, buffers: Params, obs: torch.Tensor) -> torch.Tensor:
    """obs [B, O] -> normalised [B, O] with the actor's running statistics (also the critic's input)."""
    stats = {k.removeprefix("normalizer."): v for k, v in buffers.items()}
    normalized: torch.Tensor = functional_call(nets.actor.normalizer, stats, (obs,))
    return normalized


def actor_dist(
    nets: SACNets, params: Params, buffers: Params, obs: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Raw obs [B, O] -> (mean, log_std) [B, A]."""
    mean_log_std: tuple[torch.Tensor, torch.Tensor] = functional_call(nets.actor, (params, buffers), (obs,))
    return mean_log_std


def sac_critic_loss(
    nets: SACNets, hp: SACHyper, state: SACState, critic: Params, batch: Batch, noise_next: torch.Tensor
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Twin-Q soft Bellman loss 0.5 * sum_e mean_b (Q_e(s, a) - y)^2 with
    y = r + gamma (1 - terminated) (min_e Q'_e(s', a') - alpha log pi(a'|s')), a' ~ pi(s') via noise_next [B, A]."""
    alpha = state.log_alpha.exp().detach()
    with torch.no_grad():
        mean, log_std = actor_dist(nets, state.actor, state.actor_buffers, batch.next_obs)
        next_a, next_logp = squashed_gaussian(mean, log_std, noise_next)
        next_q = (
            functional_call(
                nets.critic,
                state.target_critic,
                (normalize_obs(nets, state.actor_buffers, batch.next_obs), next_a),
            )
            .min(0)
            .values
        )
        target = batch.reward + hp.gamma * (1.0 - batch.terminated) * (next_q - alpha * next_logp)
    q = functional_call(
        nets.critic, critic, (normalize_obs(nets, state.actor_buffers, batch.obs), batch.action)
    )
    loss = 0.5 * (q - target.unsqueeze(0)).pow(2).mean(1).sum()
    return loss, {"q/mean": q.mean().detach(), "q/min": q.min().detach(), "q/max": q.max().detach()}


def sac_actor_loss(
    nets: SACNets, state: SACState, actor: Params, batch: Batch, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Policy loss mean_b(alpha log pi(a|s) - min_e Q_e(s, a)), a ~ pi(s) reparameterised with noise [B, A].

    Returns (loss, log_prob [B] detached) — the log-probs also drive the temperature update."""
    alpha = state.log_alpha.exp().detach()
    mean, log_std = actor_dist(nets, actor, state.actor_buffers, batch.obs)
    action, logp = squashed_gaussian(mean, log_std, noise)
    critic = {k: v.detach() for k, v in state.critic.items()}
    q = (
        functional_call(nets.critic, critic, (normalize_obs(nets, state.actor_buffers, batch.obs), action))
        .min(0)
        .values
    )
    return (alpha * logp - q).mean(), logp.detach()


def alpha_loss(log_alpha: torch.Tensor, logp: torch.Tensor, target_entropy: float) -> torch.Tensor:
    """Temperature loss -log_alpha * mean(log pi + target_entropy): alpha grows while entropy < target."""
    return -(log_alpha * (logp + target_entropy)).mean()


def sac_step(
    nets: SACNets,
    hp: SACHyper,
    state: SACState,
    batch: Batch,
    noise_next: torch.Tensor,
    noise_cur: torch.Tensor,
) -> tuple[SACState, dict[str, torch.Tensor]]:
    """One SAC update: critic step, (every ``actor_update_period``) actor + temperature step, Polyak.

    Pure: returns a new state; ``state`` is not modified. Metrics are 0-dim tensors (TB tag names)."""
    critic = _grad_params(state.critic)
    c_loss, metrics = nets.critic_loss(nets, hp, state, critic, batch, noise_next)
    grads = dict(zip(critic, torch.autograd.grad(c_loss, list(critic.values())), strict=True))
    grads, c_norm = clip_grad_norm(mean_params(nets.collective, grads), hp.max_grad_norm)
    new_critic, critic_opt = adam_update(state.critic, grads, state.critic_opt, hp.critic_lr)
    state = dataclasses.replace(
        state,
        critic=new_critic,
        critic_opt=critic_opt,
        target_critic=polyak(state.target_critic, new_critic, hp.tau),
        step=state.step + 1,
    )
    metrics = {**metrics, "loss/critic": c_loss.detach(), "learner/critic_grad_norm": c_norm.detach()}
    if state.step % hp.actor_update_period == 0:
        actor = _grad_params(state.actor)
        a_loss, logp = sac_actor_loss(nets, state, actor, batch, noise_cur)
        grads = dict(zip(actor, torch.autograd.grad(a_loss, list(actor.values())), strict=True))
        log_alpha = state.log_alpha.detach().requires_grad_(True)
        t_loss = alpha_loss(log_alpha, logp, hp.target_entropy)
        (g_alpha,) = torch.autograd.grad(t_loss, [log_alpha])
        grads = mean_params(nets.collective, {**grads, ALPHA_GRAD: g_alpha})  # one collective for both
        g_alpha = grads.pop(ALPHA_GRAD)
        grads, _ = clip_grad_norm(grads, hp.max_grad_norm)
        new_actor, actor_opt = adam_update(state.actor, grads, state.actor_opt, hp.actor_lr)
        new_alpha, alpha_opt = adam_update(
            {"a": state.log_alpha}, {"a": g_alpha}, state.alpha_opt, hp.alpha_lr
        )
        state = dataclasses.replace(
            state, actor=new_actor, actor_opt=actor_opt, log_alpha=new_alpha["a"], alpha_opt=alpha_opt
        )
        metrics |= {
            "loss/actor": a_loss.detach(),
            "loss/alpha": t_loss.detach(),
            "policy/entropy": -logp.mean(),
        }
    metrics["policy/alpha"] = state.log_alpha.exp().detach()
    return state, metrics


class SACLearner(Learner):
    """SAC with an observation normaliser in the actor's buffers (``algo.obs_normalization``)."""

    algo = "sac"
    state: SACState
    rank_local_fields = ("actor_buffers",)  # the observation normaliser sees this rank's data only

    def __init__(
        self,
        algo_cfg: SacConfig,
        obs_dim: int,
        action_dim: int,
        device: torch.device,
        seed: int,
        options: RuntimeOptions,
    ) -> None:
        super().__init__(algo_cfg, obs_dim, action_dim, device, seed, options)
        target_entropy = algo_cfg.target_entropy
        self.hp = SACHyper(
            **self.shared_hyper,
            target_entropy=-float(action_dim) if target_entropy is None else target_entropy,
        )
        self.obs_normalization = algo_cfg.obs_normalization
        self.actor = build_sac_actor(algo_cfg, obs_dim, action_dim).to(device)
        critic = SACCritic(obs_dim, action_dim, list(algo_cfg.critic_hidden)).to(device)
        critic_loss: CriticLoss = torch.compile(sac_critic_loss) if options.torch_compile else sac_critic_loss
        self.nets = SACNets(actor=self.actor, critic=critic, critic_loss=critic_loss)
        actor_p = {k: v.detach().clone() for k, v in self.actor.named_parameters()}
        critic_p = {k: v.detach().clone() for k, v in critic.named_parameters()}
        log_alpha = torch.tensor(algo_cfg.init_alpha, device=device).log()
        self.state = SACState(
            actor=actor_p,
            actor_buffers={k: v.detach().clone() for k, v in self.actor.named_buffers()},
            critic=critic_p,
            target_critic={k: v.clone() for k, v in critic_p.items()},
            log_alpha=log_alpha,
            actor_opt=adam_init(actor_p),
            critic_opt=adam_init(critic_p),
            alpha_opt=adam_init({"a": log_alpha}),
            step=0,
        )

    def _observe(self, obs: torch.Tensor, reward: torch.Tensor) -> None:
        if not self.obs_normalization:
            return
        b = self.state.actor_buffers
        mean, var, count = normalizer_update(
            b["normalizer.obs_mean"], b["normalizer.obs_var"], b["normalizer.obs_count"], obs
        )
        buffers = {"normalizer.obs_mean": mean, "normalizer.obs_var": var, "normalizer.obs_count": count}
        self.state = dataclasses.replace(self.state, actor_buffers=buffers)
        # The collector acts on these statistics; publish them even before the first update.
        self._sync_actor()

    def _update_once(self, batch: Batch) -> dict[str, torch.Tensor]:
        n = batch.obs.shape[0]
        self.state, metrics = sac_step(self.nets, self.hp, self.state, batch, self._noise(n), self._noise(n))
        metrics["learner/reward_scale"] = torch.ones(())
        return metrics

    def _actor_tensors(self) -> tuple[Params, Params]:
        return self.state.actor, self.state.actor_buffers

    def _get_state(self) -> SACState:
        return self.state

    def _set_state(self, s: Mapping[str, Any]) -> None:
        dev = self.device
        self.state = SACState(
            actor={k: v.to(dev) for k, v in s["actor"].items()},
            actor_buffers={k: v.to(dev) for k, v in s["actor_buffers"].items()},
            critic={k: v.to(dev) for k, v in s["critic"].items()},
            target_critic={k: v.to(dev) for k, v in s["target_critic"].items()},
            log_alpha=s["log_alpha"].to(dev),
            actor_opt=adam_state_from(s["actor_opt"], dev),
            critic_opt=adam_state_from(s["critic_opt"], dev),
            alpha_opt=adam_state_from(s["alpha_opt"], dev),
            step=int(s["step"]),
        )


def build_sac_actor(algo_cfg: SacConfig, obs_dim: int, action_dim: int) -> SACActor:
    """The SAC actor module (CPU; move it where needed)."""
    return SACActor(obs_dim, action_dim, list(algo_cfg.actor_hidden))
