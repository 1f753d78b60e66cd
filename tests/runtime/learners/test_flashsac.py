from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from soakbench.runtime.learners import build_learner
from soakbench.runtime.learners.flashsac import (
    FlashSACLearner,
    FlashState,
    categorical_projection,
    flashsac_step,
)
from soakbench.runtime.learners.networks import BNStats, EnsembleLinear, FlashBatchNorm, FlashRMSNorm
from soakbench.runtime.learners.replay import Batch

from .conftest import ACT, OBS, algo_cfg


def _learner(**overrides: object) -> FlashSACLearner:
    learner = build_learner(algo_cfg("flashsac", **overrides), OBS, ACT, torch.device("cpu"))
    assert isinstance(learner, FlashSACLearner)
    return learner


@settings(max_examples=40, deadline=None)
@given(
    reward=st.floats(-20, 20),
    discount=st.floats(0, 1),
    entropy=st.floats(-3, 3),
    seed=st.integers(0, 1000),
)
def test_categorical_projection_sums_to_one(
    reward: float, discount: float, entropy: float, seed: int
) -> None:
    bins = torch.linspace(-5, 5, 11)
    probs = torch.rand(3, 11, generator=torch.Generator().manual_seed(seed)).softmax(-1)
    out = categorical_projection(
        probs, torch.full((3,), reward), torch.full((3,), discount), bins, torch.full((3,), entropy)
    )
    torch.testing.assert_close(out.sum(-1), torch.ones(3))
    assert bool((out >= 0).all())


def test_categorical_projection_exact_shift() -> None:
    bins = torch.linspace(-5, 5, 11)  # width 1
    probs = torch.zeros(1, 11)
    probs[0, 5] = 1.0  # all mass at 0
    out = categorical_projection(probs, torch.tensor([1.5]), torch.tensor([0.9]), bins, torch.tensor([0.0]))
    # 0 -> 1.5: half at 1, half at 2
    assert math.isclose(float(out[0, 6]), 0.5, abs_tol=1e-6) and math.isclose(
        float(out[0, 7]), 0.5, abs_tol=1e-6
    )
    terminal = categorical_projection(
        probs, torch.tensor([-9.0]), torch.tensor([0.0]), bins, torch.tensor([0.0])
    )
    assert math.isclose(float(terminal[0, 0]), 1.0, abs_tol=1e-6)  # clipped to the support edge


def _assert_unit_norm(
    learner: FlashSACLearner, params: dict[str, torch.Tensor], module: torch.nn.Module
) -> None:
    for name, mod in module.named_modules():
        if isinstance(mod, EnsembleLinear):
            norms = torch.linalg.vector_norm(params[f"{name}.weight"], dim=-2)
            torch.testing.assert_close(norms, torch.ones_like(norms))
        elif isinstance(mod, FlashBatchNorm | FlashRMSNorm):
            sq = params[f"{name}.weight"] ** 2
            if isinstance(mod, FlashBatchNorm):
                sq = sq + params[f"{name}.bias"] ** 2
            torch.testing.assert_close(sq.sum(-1).sqrt(), torch.full(sq.shape[:-1], math.sqrt(sq.shape[-1])))


def test_unit_norm_holds_after_updates(batch: Batch) -> None:
    learner = _learner(critic_lr=1e-2, actor_lr=1e-2)
    noise = torch.randn(batch.obs.shape[0], ACT)
    state = learner.state
    for _ in range(4):
        state, _ = flashsac_step(learner.nets, learner.hp, state, batch, noise, noise)
    assert state.step == 4
    assert any(not torch.equal(state.critic[k], learner.state.critic[k]) for k in state.critic)
    _assert_unit_norm(learner, state.critic, learner.nets.critic)
    _assert_unit_norm(learner, state.actor, learner.nets.actor)


def test_critic_loss_decreases_and_actor_every_second_step(batch: Batch) -> None:
    # Frozen target (tau = 0, actor and alpha fixed): cross-entropy = H(target) + KL, so its decrease
    # is the KL shrinking; the floor H(target) of a near-uniform 101-bin target is about 4 nats.
    # Zero rates lie outside the config bounds, so they are set on the step's hyperparameters directly.
    learner = _learner(critic_lr=3e-3)
    hp = dataclasses.replace(learner.hp, tau=0.0, actor_lr=0.0, alpha_lr=0.0)
    learner.add_transitions(batch.obs, batch.action, batch.reward, batch.next_obs, batch.terminated)
    noise = torch.zeros(batch.obs.shape[0], ACT)
    state, first = flashsac_step(learner.nets, hp, learner.state, batch, noise, noise)
    assert "loss/actor" not in first
    state, second = flashsac_step(learner.nets, hp, state, batch, noise, noise)
    assert "loss/actor" in second
    for _ in range(100):
        state, last = flashsac_step(learner.nets, hp, state, batch, noise, noise)
    assert float(last["loss/critic"]) < float(first["loss/critic"]) - 0.5


def test_bn_running_stats_and_target_follow(batch: Batch) -> None:
    learner = _learner()
    noise = torch.zeros(batch.obs.shape[0], ACT)
    state, _ = flashsac_step(learner.nets, learner.hp, learner.state, batch, noise, noise)
    key = "trunk.in_bn.running_mean"
    assert not torch.equal(state.critic_buffers[key], learner.state.critic_buffers[key])
    expected = torch.lerp(learner.state.target_buffers[key], state.critic_buffers[key], learner.hp.tau)
    torch.testing.assert_close(state.target_buffers[key], expected)


def test_reward_scale_maps_rms_return_to_half_support() -> None:
    learner = _learner(gamma=0.9, v_max=4.0)
    r = torch.full((100,), 3.0)
    learner.add_transitions(
        torch.zeros(100, OBS), torch.zeros(100, ACT), r, torch.zeros(100, OBS), torch.zeros(100)
    )
    from soakbench.runtime.learners.flashsac import reward_scale

    d = float(reward_scale(learner.hp, learner.state.reward_stats))
    # constant reward 3 -> return 30 -> normalised return v_max / 2 = 2
    assert math.isclose(3.0 / d / (1 - 0.9), 2.0, rel_tol=1e-5)


def test_ensemble_batch_norm_matches_torch_batch_norm_per_member_with_its_gradients() -> None:
    # the two-pass variance is an implementation choice: output, gradients and the recorded statistics
    # must be torch's batch norm per ensemble member within float tolerance
    torch.manual_seed(0)
    members, rows, dim = 2, 64, 24
    norm = FlashBatchNorm(members, dim)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    x = (torch.randn(members, rows, dim) * 3 + 1).requires_grad_()
    ref_x = x.detach().clone().requires_grad_()
    stats: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    out = norm(x, True, stats)
    ref = torch.stack(
        [
            torch.nn.functional.batch_norm(
                ref_x[e], None, None, norm.weight[e], norm.bias[e], training=True, eps=norm.eps
            )
            for e in range(members)
        ]
    )
    torch.testing.assert_close(out, ref)
    upstream = torch.randn_like(out)
    grads = torch.autograd.grad((out * upstream).sum(), [x, norm.weight, norm.bias])
    ref_grads = torch.autograd.grad((ref * upstream).sum(), [ref_x, norm.weight, norm.bias])
    for got, want in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    mean, unbiased_var = stats[norm.key]
    torch.testing.assert_close(mean, ref_x.mean(1))
    torch.testing.assert_close(unbiased_var, ref_x.var(1, correction=1))


def _reference_batch_norm(
    self: FlashBatchNorm, x: torch.Tensor, training: bool, stats: BNStats | None
) -> torch.Tensor:
    """The ensemble batch norm as torch's own batch norm, one member at a time."""
    members = range(x.shape[0])
    if training and stats is not None:
        stats[self.key] = (x.mean(1).detach(), x.var(1, correction=1).detach())
    mean = None if training else self.running_mean
    var = None if training else self.running_var
    return torch.stack(
        [
            torch.nn.functional.batch_norm(
                x[e],
                None if mean is None else mean[e],
                None if var is None else var[e],
                self.weight[e],
                self.bias[e],
                training=training,
                eps=self.eps,
            )
            for e in members
        ]
    )


def test_two_updates_give_the_losses_and_state_of_torch_batch_norm(
    batch: Batch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The whole update (critic step, then the actor and temperature step) on the same batch and noise,
    # once with the learner's batch norm and once with torch's: same losses, same new state.
    learner = _learner()
    learner.add_transitions(batch.obs, batch.action, batch.reward, batch.next_obs, batch.terminated)
    noise = torch.randn(batch.obs.shape[0], ACT, generator=torch.Generator().manual_seed(5))

    def two_updates() -> tuple[FlashState, list[dict[str, torch.Tensor]]]:
        state, metrics = learner.state, []
        for _ in range(2):
            state, step_metrics = flashsac_step(learner.nets, learner.hp, state, batch, noise, noise)
            metrics.append(step_metrics)
        return state, metrics

    state, metrics = two_updates()
    monkeypatch.setattr(FlashBatchNorm, "forward", _reference_batch_norm)
    ref_state, ref_metrics = two_updates()

    assert "loss/actor" in metrics[1]
    for got, want in zip(metrics, ref_metrics, strict=True):
        assert got.keys() == want.keys()
        for name in got:
            torch.testing.assert_close(got[name], want[name], rtol=1e-4, atol=1e-5, msg=name)
    for part in ("critic", "critic_buffers", "actor", "actor_buffers", "target_critic", "target_buffers"):
        got_params, want_params = getattr(state, part), getattr(ref_state, part)
        for name in got_params:
            torch.testing.assert_close(
                got_params[name], want_params[name], rtol=1e-4, atol=1e-5, msg=f"{part}.{name}"
            )
    torch.testing.assert_close(state.log_alpha, ref_state.log_alpha)
