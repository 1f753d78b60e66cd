"""Actor and critic networks for SAC and FlashSAC.

Modules are used two ways: the collector calls ``Actor.act`` directly (eval semantics: running
statistics, no gradients); the learner evaluates them functionally with ``torch.func.functional_call``
on parameter/buffer dicts, so updates stay pure. Everything the collector needs (weights, observation
normaliser statistics, batch-norm running statistics) is a parameter or buffer of the actor, hence part
of ``actor_state_vector``.

Shapes: B = batch rows, O = obs_dim, A = action_dim, E = ensemble members (twin critics: 2),
K = categorical bins, H = hidden width.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from soakbench.runtime.learners.functional import ProjectionGroup

LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0


def squashed_gaussian(
    mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterised tanh-Gaussian sample.

    mean, log_std, noise: [B, A] (noise ~ N(0, 1)). Returns (action [B, A] in (-1, 1), log_prob [B])
    with the tanh change-of-variables correction (stable form of log(1 - tanh(u)^2))."""
    std = log_std.exp()
    u = mean + std * noise
    log_prob = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    log_prob = log_prob - (2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1)
    return torch.tanh(u), log_prob


class Actor(nn.Module):
    """Policy for the collector and the learner: ``forward(obs) -> (mean, log_std)`` [B, A] each."""

    obs_dim: int
    action_dim: int

    def forward(
        self,
        obs: torch.Tensor,
        training: bool = False,
        stats: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        """obs [N, O] -> actions [N, A] in [-1, 1]; stochastic unless ``deterministic``."""
        mean, log_std = self(obs.to(torch.float32), training=False)
        if deterministic:
            return torch.tanh(mean)
        return torch.tanh(mean + log_std.exp() * torch.randn_like(mean))


# ----------------------------------------------------------------------------------------------- SAC


class ObsNormalizer(nn.Module):
    """Running mean/variance observation normaliser; statistics are buffers so they travel with the
    actor state vector. forward: x [B, O] -> clamp((x - mean) / sqrt(var + eps), ±clip)."""

    obs_mean: torch.Tensor
    obs_var: torch.Tensor
    obs_count: torch.Tensor

    def __init__(self, obs_dim: int, clip: float = 10.0) -> None:
        super().__init__()
        self.clip = clip
        self.register_buffer("obs_mean", torch.zeros(obs_dim))
        self.register_buffer("obs_var", torch.ones(obs_dim))
        self.register_buffer("obs_count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp((x - self.obs_mean) * torch.rsqrt(self.obs_var + 1e-8), -self.clip, self.clip)


def normalizer_update(
    mean: torch.Tensor, var: torch.Tensor, count: torch.Tensor, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Merge batch x [n, O] into running (mean [O], var [O], count []) — Chan et al. parallel update."""
    n = torch.tensor(float(x.shape[0]), device=x.device)
    b_mean = x.mean(0)
    b_var = x.var(0, correction=0)
    total = count + n
    delta = b_mean - mean
    new_mean = mean + delta * (n / total)
    m2 = var * count + b_var * n + delta.pow(2) * count * n / total
    return new_mean, m2 / total, total


def _mlp(in_dim: int, hidden: Sequence[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width), nn.ReLU()]
        in_dim = width
    return nn.Sequential(*layers)


class SACActor(Actor):
    """Obs normaliser -> ReLU MLP -> (mean, log_std) heads; log_std squashed into [LOG_STD_MIN, LOG_STD_MAX]."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.normalizer = ObsNormalizer(obs_dim)
        self.trunk = _mlp(obs_dim, hidden)
        self.mean = nn.Linear(hidden[-1], action_dim)
        self.log_std = nn.Linear(hidden[-1], action_dim)
        # DDPG/SAC convention: a near-zero initial mean, so the first policy explores around the
        # default pose (joint-target offsets of 0) instead of saturating random directions.
        with torch.no_grad():
            self.mean.weight.uniform_(-3e-3, 3e-3)
            self.mean.bias.zero_()

    def forward(
        self,
        obs: torch.Tensor,
        training: bool = False,
        stats: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(self.normalizer(obs))
        raw = torch.tanh(self.log_std(h))
        return self.mean(h), LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (raw + 1.0)


class EnsembleLinear(nn.Module):
    """E independent linear maps evaluated in one batched matmul: x [E, B, in] -> [E, B, out].

    weight [E, in, out]; bias [E, out] (optional). Each member is initialised like ``nn.Linear``."""

    def __init__(
        self, members: int, in_dim: int, out_dim: int, bias: bool = True, orthogonal: bool = False
    ) -> None:
        super().__init__()
        w = torch.empty(members, out_dim, in_dim)
        for e in range(members):
            if orthogonal:
                nn.init.orthogonal_(w[e])
            else:
                nn.init.kaiming_uniform_(w[e], a=math.sqrt(5))
        self.weight = nn.Parameter(w.transpose(1, 2).contiguous())
        bound = 1.0 / math.sqrt(in_dim)
        self.bias = nn.Parameter(torch.empty(members, out_dim).uniform_(-bound, bound)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.bmm(x, self.weight)
        return y if self.bias is None else y + self.bias.unsqueeze(1)


class SACCritic(nn.Module):
    """Twin (E-member) Q ensemble: (obs_n [B, O] normalised, action [B, A]) -> q [E, B]."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: Sequence[int], members: int = 2) -> None:
        super().__init__()
        self.members = members
        dims = [obs_dim + action_dim, *hidden]
        self.layers = nn.ModuleList(EnsembleLinear(members, a, b) for a, b in itertools.pairwise(dims))
        self.out = EnsembleLinear(members, dims[-1], 1)

    def forward(self, obs_n: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs_n, action], -1).unsqueeze(0).expand(self.members, -1, -1)
        for layer in self.layers:
            x = F.relu(layer(x))
        q: torch.Tensor = self.out(x).squeeze(-1)
        return q


# ------------------------------------------------------------------------------------------ FlashSAC

BNStats = dict[str, tuple[torch.Tensor, torch.Tensor]]


class FlashBatchNorm(nn.Module):
    """Ensemble batch norm over the batch dim of x [E, B, d]; gain/bias [E, d]; running stats buffers.

    In training mode the batch statistics are used and, when ``stats`` is given, recorded under
    ``self.key`` as (mean [E, d], unbiased var [E, d]) so the caller can fold them into the running
    buffers functionally (``bn_running_update``); the module never mutates its buffers itself."""

    running_mean: torch.Tensor
    running_var: torch.Tensor

    def __init__(self, members: int, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.key = ""
        self.weight = nn.Parameter(torch.ones(members, dim))
        self.bias = nn.Parameter(torch.zeros(members, dim))
        self.register_buffer("running_mean", torch.zeros(members, dim))
        self.register_buffer("running_var", torch.ones(members, dim))

    def forward(self, x: torch.Tensor, training: bool, stats: BNStats | None) -> torch.Tensor:
        if training:
            # Two-pass variance from the centred batch, which the output reuses: on CPU, Tensor.var over
            # the middle dim costs about as much as the whole rest of the norm (docs/learners.md).
            mean = x.mean(1, keepdim=True)
            centred = x - mean
            var = (centred * centred).mean(1, keepdim=True)
            if stats is not None:
                n = x.shape[1]
                stats[self.key] = (mean.squeeze(1).detach(), (var.squeeze(1) * n / max(n - 1, 1)).detach())
        else:
            centred, var = x - self.running_mean.unsqueeze(1), self.running_var.unsqueeze(1)
        return centred * torch.rsqrt(var + self.eps) * self.weight.unsqueeze(1) + self.bias.unsqueeze(1)


class FlashRMSNorm(nn.Module):
    """RMS normalisation over the feature dim of x [E, B, d] with gain [E, d]: bounds per-sample norms."""

    def __init__(self, members: int, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(members, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.unsqueeze(1)


class FlashBlock(nn.Module):
    """Inverted residual block: x + relu(BN(W2 relu(BN(W1 x)))), W1: H -> expansion*H, then RMSNorm.

    Normalisation sits before each nonlinearity; the RMSNorm after the residual sum bounds the
    feature norm handed to the next block."""

    def __init__(self, members: int, hidden: int, expansion: int) -> None:
        super().__init__()
        self.w1 = EnsembleLinear(members, hidden, hidden * expansion, bias=False, orthogonal=True)
        self.bn1 = FlashBatchNorm(members, hidden * expansion)
        self.w2 = EnsembleLinear(members, hidden * expansion, hidden, bias=False, orthogonal=True)
        self.bn2 = FlashBatchNorm(members, hidden)
        self.rms = FlashRMSNorm(members, hidden)

    def forward(self, x: torch.Tensor, training: bool, stats: BNStats | None) -> torch.Tensor:
        h = F.relu(self.bn1(self.w1(x), training, stats))
        h = F.relu(self.bn2(self.w2(h), training, stats))
        out: torch.Tensor = self.rms(x + h)
        return out


class FlashTrunk(nn.Module):
    """BN(input) -> unit-norm embedding (in -> H) -> ``blocks`` inverted residual blocks: [E, B, in] -> [E, B, H]."""

    def __init__(self, members: int, in_dim: int, hidden: int, blocks: int, expansion: int) -> None:
        super().__init__()
        self.in_bn = FlashBatchNorm(members, in_dim)
        self.embed = EnsembleLinear(members, in_dim, hidden, bias=False, orthogonal=True)
        self.blocks = nn.ModuleList(FlashBlock(members, hidden, expansion) for _ in range(blocks))

    def forward(self, x: torch.Tensor, training: bool, stats: BNStats | None) -> torch.Tensor:
        x = self.embed(self.in_bn(x, training, stats))
        for block in self.blocks:
            x = block(x, training, stats)
        return x


def _assign_bn_keys(root: nn.Module) -> None:
    for name, mod in root.named_modules():
        if isinstance(mod, FlashBatchNorm):
            mod.key = name


class FlashActor(Actor):
    """FlashSAC policy: trunk (E=1) -> unit-norm mean and log-std heads with free biases.

    The input batch norm replaces a separate observation normaliser; its running statistics are
    actor buffers. log_std = MIN + (MAX - MIN) * (tanh(raw) + 1) / 2."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: int, blocks: int, expansion: int) -> None:
        super().__init__()
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.trunk = FlashTrunk(1, obs_dim, hidden, blocks, expansion)
        self.mean = EnsembleLinear(1, hidden, action_dim, orthogonal=True)
        self.log_std = EnsembleLinear(1, hidden, action_dim, orthogonal=True)
        with torch.no_grad():
            for head in (self.mean, self.log_std):
                assert head.bias is not None
                head.bias.zero_()
        _assign_bn_keys(self)

    def forward(
        self, obs: torch.Tensor, training: bool = False, stats: BNStats | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(obs.unsqueeze(0), training, stats)
        raw = torch.tanh(self.log_std(h)[0])
        return self.mean(h)[0], LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (raw + 1.0)


@dataclass(frozen=True)
class CategoricalSupport:
    """``num_bins`` atoms evenly spaced on [-v_max, v_max] (the normalised return)."""

    num_bins: int
    v_max: float


class FlashCritic(nn.Module):
    """Twin categorical critic: (obs [B, O], action [B, A]) -> logits [E, B, K] over ``bins`` [K]."""

    bins: torch.Tensor

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden: int,
        blocks: int,
        expansion: int,
        support: CategoricalSupport,
    ) -> None:
        super().__init__()
        self.members = 2
        self.trunk = FlashTrunk(2, obs_dim + action_dim, hidden, blocks, expansion)
        self.head = EnsembleLinear(2, hidden, support.num_bins, orthogonal=True)
        with torch.no_grad():
            assert self.head.bias is not None
            self.head.bias.zero_()
        self.register_buffer("bins", torch.linspace(-support.v_max, support.v_max, support.num_bins))
        _assign_bn_keys(self)

    def forward(
        self, obs: torch.Tensor, action: torch.Tensor, training: bool, stats: BNStats | None
    ) -> torch.Tensor:
        x = torch.cat([obs, action], -1).unsqueeze(0).expand(self.members, -1, -1)
        logits: torch.Tensor = self.head(self.trunk(x, training, stats))
        return logits


def projection_groups(root: nn.Module) -> list[ProjectionGroup]:
    """The FlashSAC projection set of ``root``: every bias-free/unit-norm ensemble weight (heads
    included: their weights are projected, biases stay free) and every norm-layer gain (+bias)."""
    groups: list[ProjectionGroup] = []
    for name, mod in root.named_modules():
        prefix = f"{name}." if name else ""
        if isinstance(mod, EnsembleLinear):
            groups.append(ProjectionGroup("rows", (prefix + "weight",)))
        elif isinstance(mod, FlashBatchNorm):
            groups.append(ProjectionGroup("scale", (prefix + "weight", prefix + "bias")))
        elif isinstance(mod, FlashRMSNorm):
            groups.append(ProjectionGroup("scale", (prefix + "weight",)))
    return groups


def bn_running_update(
    buffers: dict[str, torch.Tensor], stats: BNStats, momentum: float
) -> dict[str, torch.Tensor]:
    """Fold recorded batch statistics into running buffers: running <- lerp(running, batch, momentum)."""
    out = dict(buffers)
    for key, (mean, var) in stats.items():
        out[f"{key}.running_mean"] = torch.lerp(buffers[f"{key}.running_mean"], mean, momentum)
        out[f"{key}.running_var"] = torch.lerp(buffers[f"{key}.running_var"], var, momentum)
    return out
