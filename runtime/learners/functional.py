"""Pure tensor-dict helpers for the learners: Adam, Polyak averaging, gradient clipping, unit-norm projection.

Parameters are plain ``dict[str, Tensor]`` (names as in ``nn.Module.named_parameters``). Every function
returns new tensors and never mutates its inputs, so an update step is a function
``(state, batch) -> (new_state, metrics)`` in the Brax style; the learner object at the edge swaps states.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

Params = dict[str, torch.Tensor]


@dataclass(frozen=True)
class AdamState:
    """Adam moments per parameter name; ``step`` counts applied updates (python int, host side)."""

    step: int
    m: Params
    v: Params


def adam_init(params: Mapping[str, torch.Tensor]) -> AdamState:
    """Zero first/second moments shaped like ``params``."""
    return AdamState(
        step=0,
        m={k: torch.zeros_like(p) for k, p in params.items()},
        v={k: torch.zeros_like(p) for k, p in params.items()},
    )


def adam_state_from(saved: Mapping[str, Any], device: torch.device) -> AdamState:
    """Rebuild an AdamState from its checkpoint dict (``state_to_dict`` output) on ``device``."""
    return AdamState(
        step=int(saved["step"]),
        m={k: t.to(device) for k, t in saved["m"].items()},
        v={k: t.to(device) for k, t in saved["v"].items()},
    )


def adam_update(
    params: Mapping[str, torch.Tensor],
    grads: Mapping[str, torch.Tensor],
    state: AdamState,
    lr: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> tuple[Params, AdamState]:
    """One bias-corrected Adam step; returns (new params, new state). Out-of-place foreach ops."""
    keys = list(params)
    b1, b2 = betas
    step = state.step + 1
    p = [params[k].detach() for k in keys]
    g = [grads[k] for k in keys]
    # Fused foreach ops: out of place for the returned tensors, in place only on temporaries made here.
    m = torch._foreach_lerp([state.m[k] for k in keys], g, 1.0 - b1)
    v = torch._foreach_addcmul(torch._foreach_mul([state.v[k] for k in keys], b2), g, g, value=1.0 - b2)
    bc1 = 1.0 - b1**step
    bc2 = 1.0 - b2**step
    denom = torch._foreach_sqrt(v)
    torch._foreach_div_(denom, math.sqrt(bc2))
    torch._foreach_add_(denom, eps)
    new_p = torch._foreach_addcdiv(p, m, denom, value=-lr / bc1)
    return dict(zip(keys, new_p, strict=True)), AdamState(
        step=step, m=dict(zip(keys, m, strict=True)), v=dict(zip(keys, v, strict=True))
    )


def clip_grad_norm(grads: Mapping[str, torch.Tensor], max_norm: float | None) -> tuple[Params, torch.Tensor]:
    """Scale ``grads`` so their global L2 norm is at most ``max_norm`` (None: unchanged).

    Returns (grads, pre-clip global norm as a 0-dim tensor)."""
    keys = list(grads)
    norms = torch._foreach_norm([grads[k] for k in keys])
    total = torch.linalg.vector_norm(torch.stack(norms))
    if max_norm is None:
        return dict(grads), total
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    return dict(zip(keys, torch._foreach_mul([grads[k] for k in keys], scale), strict=True)), total


def polyak(target: Mapping[str, torch.Tensor], online: Mapping[str, torch.Tensor], tau: float) -> Params:
    """target <- (1 - tau) * target + tau * online, for every key of ``target``."""
    return {k: torch.lerp(t, online[k].detach(), tau) for k, t in target.items()}


@dataclass(frozen=True)
class ProjectionGroup:
    """Parameters re-projected together after every update.

    kind:
      ``rows``  — a weight ``[..., in, out]``: each output unit's input weight vector gets unit L2 norm
                  (normalised over dim -2).
      ``scale`` — norm-layer gain (and bias): the concatenated vector over the last dim gets L2 norm
                  sqrt(d), i.e. it stays at its initial norm (gain 1 everywhere, bias 0).
    """

    kind: str
    names: tuple[str, ...]


def project_params(params: Mapping[str, torch.Tensor], groups: Sequence[ProjectionGroup]) -> Params:
    """Apply the FlashSAC weight projection (see ``ProjectionGroup``); other params pass through."""
    out = dict(params)
    for group in groups:
        if group.kind == "rows":
            (name,) = group.names
            w = params[name].detach()
            out[name] = w / torch.linalg.vector_norm(w, dim=-2, keepdim=True).clamp_min(1e-8)
        elif group.kind == "scale":
            parts = [params[n].detach() for n in group.names]
            d = parts[0].shape[-1]
            sq = sum((x * x).sum(dim=-1, keepdim=True) for x in parts)
            factor = math.sqrt(d) * torch.rsqrt(sq + 1e-8)  # type: ignore[arg-type]
            for n, x in zip(group.names, parts, strict=True):
                out[n] = x * factor
        else:  # construction bug, not user input
            raise ValueError(f"unknown projection kind {group.kind!r}")
    return out


def flatten(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Concatenate tensors into one float32 vector [sum numel]."""
    if not tensors:
        return torch.zeros(0, dtype=torch.float32)
    return torch.cat([t.detach().reshape(-1).to(torch.float32) for t in tensors])
