"""FlashSAC (arXiv 2604.04539): SAC with norm-bounded inverted-residual networks, a distributional
categorical critic on normalised returns, unit-norm weight projection after every update, tau = 0.01,
delayed actor updates and large batches. Design choices: docs/learners.md.

Pure core: ``categorical_projection``, ``flashsac_critic_loss``, ``flashsac_actor_loss``,
``flashsac_step``. Shapes: B batch rows, O obs_dim, A action_dim, E = 2 critics, K bins.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.func import functional_call

from soakbench.runtime.learners.base import Learner, RuntimeOptions
from soakbench.runtime.learners.collective import ALPHA_GRAD, SOLO, Collective, mean_params
from soakbench.runtime.learners.functional import (
    AdamState,
    Params,
    ProjectionGroup,
    adam_init,
    adam_state_from,
    adam_update,
    clip_grad_norm,
    polyak,
    project_params,
)
from soakbench.runtime.learners.networks import (
    BNStats,
    CategoricalSupport,
    FlashActor,
    FlashCritic,
    bn_running_update,
    projection_groups,
    squashed_gaussian,
)
from soakbench.runtime.learners.replay import Batch

if TYPE_CHECKING:
    from soakbench.runtime.config import FlashSacConfig


@dataclass(frozen=True)
class FlashHyper:
    """Scalar hyperparameters (algo.* keys); see docs/learners.md for each choice."""

    gamma: float
    tau: float
    actor_lr: float
    critic_lr: float
    alpha_lr: float
    target_entropy: float
    max_grad_norm: float | None
    actor_update_period: int
    bn_momentum: float
    v_max: float


@dataclass(frozen=True)
class FlashState:
    """Everything an update changes: the parameters and batch-norm statistics of the actor, the critics
    and their targets, the temperature, the three optimizers, the running reward scale and the update
    count. ``flashsac_step`` returns a new state and never mutates the one it is given."""

    actor: Params
    actor_buffers: Params  # batch-norm running statistics (travel to the collector)
    critic: Params
    critic_buffers: Params
    target_critic: Params
    target_buffers: Params
    log_alpha: torch.Tensor  # []
    actor_opt: AdamState
    critic_opt: AdamState
    alpha_opt: AdamState
    reward_stats: torch.Tensor  # [2]: (rows seen, mean squared reward)
    step: int


@dataclass(frozen=True)
class FlashNets:
    actor: FlashActor
    critic: FlashCritic
    actor_groups: tuple[ProjectionGroup, ...]
    critic_groups: tuple[ProjectionGroup, ...]
    collective: Collective = SOLO  # averages the gradients over the ranks; SOLO: one rank, no change


def categorical_projection(
    probs: torch.Tensor,
    reward: torch.Tensor,
    discount: torch.Tensor,
    bins: torch.Tensor,
    entropy: torch.Tensor,
) -> torch.Tensor:
    """C51 projection of the shifted distribution onto the fixed support.

    probs [B, K] (rows sum to 1) on atoms ``bins`` [K] (uniform, ascending); each atom z moves to
    clamp(reward + discount * (z - entropy), bins[0], bins[-1]) with reward, discount (gamma * (1 -
    terminated)) and entropy (alpha * log pi(a'|s')) all [B]. The mass is split linearly between the two
    neighbouring atoms, so every returned row [B, K] still sums to 1."""
    k = bins.shape[0]
    v_min, v_max = bins[0], bins[-1]
    width = (v_max - v_min) / (k - 1)
    z = reward[:, None] + discount[:, None] * (bins[None, :] - entropy[:, None])
    pos = (z.clamp(v_min, v_max) - v_min) / width
    lower = pos.floor().clamp(0, k - 1)
    frac = pos - lower
    lower_i = lower.long()
    upper_i = (lower_i + 1).clamp(max=k - 1)
    out = torch.zeros_like(probs)
    out = out.scatter_add(1, lower_i, probs * (1.0 - frac))
    return out.scatter_add(1, upper_i, probs * frac)


def expected_value(logits: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """logits [..., K] -> expected return [...] under softmax over ``bins`` [K]."""
    return (logits.softmax(-1) * bins).sum(-1)


def reward_scale(hp: FlashHyper, reward_stats: torch.Tensor) -> torch.Tensor:
    """Return normaliser: divisor d so that a reward stream at its RMS, r_rms / (1 - gamma), maps to
    half the support (v_max / 2). Rewards are divided by d at sampling time; outliers are clipped by the
    support in ``categorical_projection``. reward_stats [2] = (count, mean r^2) -> d []."""
    rms = reward_stats[1].clamp_min(0.0).sqrt()
    return (rms / ((1.0 - hp.gamma) * 0.5 * hp.v_max)).clamp_min(1e-8)


def flashsac_critic_loss(
    nets: FlashNets, hp: FlashHyper, state: FlashState, critic: Params, batch: Batch, noise_next: torch.Tensor
) -> tuple[torch.Tensor, dict[str, torch.Tensor], BNStats]:
    """Cross-entropy between each critic's categorical prediction at (s, a) and the projected target
    of the target critic with the lower expected value at (s', a'), a' ~ pi(s') (noise_next [B, A]).

    Both critics see [s; s'] together so their batch norms use one statistic. Returns (loss, metrics,
    batch-norm statistics recorded by the online critic)."""
    n = batch.obs.shape[0]
    alpha = state.log_alpha.exp().detach()
    bins = state.critic_buffers["bins"]
    with torch.no_grad():
        mean, log_std = functional_call(nets.actor, (state.actor, state.actor_buffers), (batch.next_obs,))
        next_a, next_logp = squashed_gaussian(mean, log_std, noise_next)
        obs_all = torch.cat([batch.obs, batch.next_obs])
        act_all = torch.cat([batch.action, next_a])
        t_logits = functional_call(
            nets.critic, (state.target_critic, state.target_buffers), (obs_all, act_all, True, None)
        )[:, n:]
        t_probs = t_logits.softmax(-1)  # [E, B, K]
        pick = (t_probs * bins).sum(-1).argmin(0)  # [B] member with the lower expected value
        probs = t_probs.gather(0, pick[None, :, None].expand(1, n, bins.shape[0]))[0]
        reward = batch.reward / reward_scale(hp, state.reward_stats)
        target = categorical_projection(
            probs, reward, hp.gamma * (1.0 - batch.terminated), bins, alpha * next_logp
        )
    stats: BNStats = {}
    logits = functional_call(nets.critic, (critic, state.critic_buffers), (obs_all, act_all, True, stats))[
        :, :n
    ]
    loss = -(target.unsqueeze(0) * F.log_softmax(logits, -1)).sum(-1).mean()
    q = expected_value(logits.detach(), bins)
    return loss, {"q/mean": q.mean(), "q/min": q.min(), "q/max": q.max()}, stats


def flashsac_actor_loss(
    nets: FlashNets, state: FlashState, actor: Params, batch: Batch, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, BNStats]:
    """mean_b(alpha log pi(a|s) - min_e Q_e(s, a)) with the critic in eval mode (running statistics).

    Returns (loss, log_prob [B] detached, actor batch-norm statistics)."""
    alpha = state.log_alpha.exp().detach()
    stats: BNStats = {}
    mean, log_std = functional_call(nets.actor, (actor, state.actor_buffers), (batch.obs, True, stats))
    action, logp = squashed_gaussian(mean, log_std, noise)
    critic = {k: v.detach() for k, v in state.critic.items()}
    logits = functional_call(nets.critic, (critic, state.critic_buffers), (batch.obs, action, False, None))
    q = expected_value(logits, state.critic_buffers["bins"]).min(0).values
    return (alpha * logp - q).mean(), logp.detach(), stats


def flashsac_step(
    nets: FlashNets,
    hp: FlashHyper,
    state: FlashState,
    batch: Batch,
    noise_next: torch.Tensor,
    noise_cur: torch.Tensor,
) -> tuple[FlashState, dict[str, torch.Tensor]]:
    """One FlashSAC update. Pure: returns a new state, never touches ``state``.

    critic step -> unit-norm projection -> BN running stats -> Polyak (params and buffers, tau);
    every ``actor_update_period`` critic steps: actor step -> projection -> temperature step."""
    critic = {k: v.detach().requires_grad_(True) for k, v in state.critic.items()}
    c_loss, metrics, c_stats = flashsac_critic_loss(nets, hp, state, critic, batch, noise_next)
    grads = dict(zip(critic, torch.autograd.grad(c_loss, list(critic.values())), strict=True))
    grads, c_norm = clip_grad_norm(mean_params(nets.collective, grads), hp.max_grad_norm)
    new_critic, critic_opt = adam_update(state.critic, grads, state.critic_opt, hp.critic_lr)
    new_critic = project_params(new_critic, nets.critic_groups)
    c_buffers = bn_running_update(state.critic_buffers, c_stats, hp.bn_momentum)
    state = dataclasses.replace(
        state,
        critic=new_critic,
        critic_buffers=c_buffers,
        critic_opt=critic_opt,
        target_critic=polyak(state.target_critic, new_critic, hp.tau),
        target_buffers=polyak(state.target_buffers, c_buffers, hp.tau),
        step=state.step + 1,
    )
    metrics = {**metrics, "loss/critic": c_loss.detach(), "learner/critic_grad_norm": c_norm.detach()}
    if state.step % hp.actor_update_period == 0:
        actor = {k: v.detach().requires_grad_(True) for k, v in state.actor.items()}
        a_loss, logp, a_stats = flashsac_actor_loss(nets, state, actor, batch, noise_cur)
        grads = dict(zip(actor, torch.autograd.grad(a_loss, list(actor.values())), strict=True))
        log_alpha = state.log_alpha.detach().requires_grad_(True)
        t_loss = -(log_alpha * (logp + hp.target_entropy)).mean()
        (g_alpha,) = torch.autograd.grad(t_loss, [log_alpha])
        grads = mean_params(nets.collective, {**grads, ALPHA_GRAD: g_alpha})  # one collective for both
        g_alpha = grads.pop(ALPHA_GRAD)
        grads, _ = clip_grad_norm(grads, hp.max_grad_norm)
        new_actor, actor_opt = adam_update(state.actor, grads, state.actor_opt, hp.actor_lr)
        new_alpha, alpha_opt = adam_update(
            {"a": state.log_alpha}, {"a": g_alpha}, state.alpha_opt, hp.alpha_lr
        )
        state = dataclasses.replace(
            state,
            actor=project_params(new_actor, nets.actor_groups),
            actor_buffers=bn_running_update(state.actor_buffers, a_stats, hp.bn_momentum),
            actor_opt=actor_opt,
            log_alpha=new_alpha["a"],
            alpha_opt=alpha_opt,
        )
        metrics |= {
            "loss/actor": a_loss.detach(),
            "loss/alpha": t_loss.detach(),
            "policy/entropy": -logp.mean(),
        }
    metrics["policy/alpha"] = state.log_alpha.exp().detach()
    metrics["learner/reward_scale"] = reward_scale(hp, state.reward_stats)
    return state, metrics


def gaussian_target_entropy(action_dim: int, sigma: float) -> float:
    """Entropy of an A-dim diagonal Gaussian with std ``sigma``: A * (0.5 ln(2 pi e) + ln sigma)."""
    return action_dim * (0.5 * math.log(2 * math.pi * math.e) + math.log(sigma))


def build_flash_actor(algo_cfg: FlashSacConfig, obs_dim: int, action_dim: int) -> FlashActor:
    """The FlashSAC actor module (CPU), weights already projected to unit norm."""
    actor = FlashActor(
        obs_dim, action_dim, algo_cfg.actor_hidden_dim, algo_cfg.actor_blocks, algo_cfg.expansion
    )
    _project_module(actor)
    return actor


@torch.no_grad()
def _project_module(module: torch.nn.Module) -> None:
    params = dict(module.named_parameters())
    for name, value in project_params(params, projection_groups(module)).items():
        params[name].copy_(value)


class FlashSACLearner(Learner):
    algo = "flashsac"
    state: FlashState
    # Batch-norm statistics come from this rank's batches, the reward scale from its transitions.
    rank_local_fields = ("actor_buffers", "critic_buffers", "target_buffers", "reward_stats")
    constant_buffers = frozenset({"bins"})  # the categorical support: averaging would only add rounding

    def __init__(
        self,
        algo_cfg: FlashSacConfig,
        obs_dim: int,
        action_dim: int,
        device: torch.device,
        seed: int,
        options: RuntimeOptions,
    ) -> None:
        super().__init__(algo_cfg, obs_dim, action_dim, device, seed, options)
        self.hp = FlashHyper(
            **self.shared_hyper,
            target_entropy=gaussian_target_entropy(action_dim, algo_cfg.target_sigma),
            bn_momentum=algo_cfg.bn_momentum,
            v_max=algo_cfg.v_max,
        )
        self.actor = build_flash_actor(algo_cfg, obs_dim, action_dim).to(device)
        critic = FlashCritic(
            obs_dim,
            action_dim,
            algo_cfg.critic_hidden_dim,
            algo_cfg.critic_blocks,
            algo_cfg.expansion,
            CategoricalSupport(algo_cfg.num_bins, self.hp.v_max),
        )
        _project_module(critic)
        critic = critic.to(device)
        self.nets = FlashNets(
            self.actor, critic, tuple(projection_groups(self.actor)), tuple(projection_groups(critic))
        )
        a_p = {k: v.detach().clone() for k, v in self.actor.named_parameters()}
        c_p = {k: v.detach().clone() for k, v in critic.named_parameters()}
        c_b = {k: v.detach().clone() for k, v in critic.named_buffers()}
        log_alpha = torch.tensor(algo_cfg.init_alpha, device=device).log()
        self.state = FlashState(
            actor=a_p,
            actor_buffers={k: v.detach().clone() for k, v in self.actor.named_buffers()},
            critic=c_p,
            critic_buffers=c_b,
            target_critic={k: v.clone() for k, v in c_p.items()},
            target_buffers={k: v.clone() for k, v in c_b.items()},
            log_alpha=log_alpha,
            actor_opt=adam_init(a_p),
            critic_opt=adam_init(c_p),
            alpha_opt=adam_init({"a": log_alpha}),
            reward_stats=torch.zeros(2, device=device),
            step=0,
        )

    def _observe(self, obs: torch.Tensor, reward: torch.Tensor) -> None:
        count, mean_sq = self.state.reward_stats[0], self.state.reward_stats[1]
        n = float(reward.shape[0])
        total = count + n
        new = torch.stack([total, mean_sq + (reward.pow(2).mean() - mean_sq) * (n / total)])
        self.state = dataclasses.replace(self.state, reward_stats=new)

    def _update_once(self, batch: Batch) -> dict[str, torch.Tensor]:
        n = batch.obs.shape[0]
        self.state, metrics = flashsac_step(
            self.nets, self.hp, self.state, batch, self._noise(n), self._noise(n)
        )
        return metrics

    def _actor_tensors(self) -> tuple[Params, Params]:
        return self.state.actor, self.state.actor_buffers

    def _get_state(self) -> FlashState:
        return self.state

    def _set_state(self, s: Mapping[str, Any]) -> None:
        dev = self.device

        def move(d: Mapping[str, torch.Tensor]) -> Params:
            return {k: v.to(dev) for k, v in d.items()}

        self.state = FlashState(
            actor=move(s["actor"]),
            actor_buffers=move(s["actor_buffers"]),
            critic=move(s["critic"]),
            critic_buffers=move(s["critic_buffers"]),
            target_critic=move(s["target_critic"]),
            target_buffers=move(s["target_buffers"]),
            log_alpha=s["log_alpha"].to(dev),
            actor_opt=adam_state_from(s["actor_opt"], dev),
            critic_opt=adam_state_from(s["critic_opt"], dev),
            alpha_opt=adam_state_from(s["alpha_opt"], dev),
            reward_stats=s["reward_stats"].to(dev),
            step=int(s["step"]),
        )
