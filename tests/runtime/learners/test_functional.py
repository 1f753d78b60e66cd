from __future__ import annotations

import torch

from soakbench.runtime.learners.functional import (
    ProjectionGroup,
    adam_init,
    adam_update,
    clip_grad_norm,
    polyak,
    project_params,
)


def test_adam_matches_torch_optim() -> None:
    torch.manual_seed(0)
    p0 = {"w": torch.randn(4, 3), "b": torch.randn(3)}
    ref = {k: v.clone().requires_grad_(True) for k, v in p0.items()}
    opt = torch.optim.Adam(ref.values(), lr=1e-2)
    params, state = dict(p0), adam_init(p0)
    for step in range(3):
        grads = {k: torch.randn_like(v) * (step + 1) for k, v in p0.items()}
        for k, v in ref.items():
            v.grad = grads[k].clone()
        opt.step()
        params, state = adam_update(params, grads, state, lr=1e-2)
    for k in p0:
        torch.testing.assert_close(params[k], ref[k].detach())
    assert state.step == 3


def test_adam_does_not_mutate_inputs() -> None:
    p = {"w": torch.ones(2)}
    s = adam_init(p)
    adam_update(p, {"w": torch.ones(2)}, s, lr=0.1)
    assert torch.equal(p["w"], torch.ones(2)) and torch.equal(s.m["w"], torch.zeros(2)) and s.step == 0


def test_polyak_is_lerp() -> None:
    target, online = {"w": torch.zeros(3)}, {"w": torch.full((3,), 2.0)}
    out = polyak(target, online, 0.25)
    torch.testing.assert_close(out["w"], torch.full((3,), 0.5))
    assert torch.equal(target["w"], torch.zeros(3))


def test_clip_grad_norm() -> None:
    grads = {"a": torch.tensor([3.0, 0.0]), "b": torch.tensor([4.0])}
    clipped, norm = clip_grad_norm(grads, 1.0)
    assert float(norm) == 5.0
    total = torch.sqrt(sum((g * g).sum() for g in clipped.values()))  # type: ignore[arg-type]
    torch.testing.assert_close(total, torch.tensor(1.0), atol=1e-5, rtol=0)
    same, _ = clip_grad_norm(grads, None)
    assert same["a"] is grads["a"]


def test_projection_norms() -> None:
    torch.manual_seed(0)
    params = {
        "lin.weight": torch.randn(2, 5, 7),
        "bn.weight": torch.randn(2, 7),
        "bn.bias": torch.randn(2, 7),
    }
    groups = [ProjectionGroup("rows", ("lin.weight",)), ProjectionGroup("scale", ("bn.weight", "bn.bias"))]
    out = project_params(params, groups)
    torch.testing.assert_close(torch.linalg.vector_norm(out["lin.weight"], dim=-2), torch.ones(2, 7))
    joint = torch.sqrt((out["bn.weight"] ** 2 + out["bn.bias"] ** 2).sum(-1))
    torch.testing.assert_close(joint, torch.full((2,), 7**0.5))
