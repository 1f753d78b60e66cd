from __future__ import annotations

import dataclasses

import torch

from soakbench.runtime.learners import build_learner
from soakbench.runtime.learners.base import runtime_options
from soakbench.runtime.learners.networks import squashed_gaussian
from soakbench.runtime.learners.replay import Batch
from soakbench.runtime.learners.sac import SACLearner, sac_critic_loss, sac_step

from .conftest import ACT, OBS, algo_cfg


def _learner(**overrides: object) -> SACLearner:
    learner = build_learner(algo_cfg("sac", **overrides), OBS, ACT, torch.device("cpu"))
    assert isinstance(learner, SACLearner)
    return learner


def test_critic_loss_decreases_on_fixed_batch(batch: Batch) -> None:
    learner = _learner(critic_lr=1e-3, actor_lr=1e-3)
    noise = torch.zeros(batch.obs.shape[0], ACT)
    state, first = sac_step(learner.nets, learner.hp, learner.state, batch, noise, noise)
    for _ in range(150):
        state, last = sac_step(learner.nets, learner.hp, state, batch, noise, noise)
    assert float(last["loss/critic"]) < 0.3 * float(first["loss/critic"])


def test_step_is_pure_and_target_is_polyak(batch: Batch) -> None:
    learner = _learner(tau=0.1)
    before = {k: v.clone() for k, v in learner.state.critic.items()}
    target_before = {k: v.clone() for k, v in learner.state.target_critic.items()}
    noise = torch.zeros(batch.obs.shape[0], ACT)
    new, metrics = sac_step(learner.nets, learner.hp, learner.state, batch, noise, noise)
    for k in before:  # input state untouched
        assert torch.equal(learner.state.critic[k], before[k])
        expected = target_before[k] + 0.1 * (new.critic[k] - target_before[k])
        torch.testing.assert_close(new.target_critic[k], expected)
    assert new.step == 1 and "loss/actor" in metrics


def test_alpha_rises_when_entropy_is_below_target(batch: Batch) -> None:
    learner = _learner(target_entropy=100.0, alpha_lr=1e-2)  # unreachable target: alpha must grow
    state = learner.state
    noise = torch.zeros(batch.obs.shape[0], ACT)
    for _ in range(5):
        state, _ = sac_step(learner.nets, learner.hp, state, batch, noise, noise)
    assert float(state.log_alpha) > float(learner.state.log_alpha)


def test_actor_update_period(batch: Batch) -> None:
    learner = _learner(actor_update_period=2)
    noise = torch.zeros(batch.obs.shape[0], ACT)
    s1, m1 = sac_step(learner.nets, learner.hp, learner.state, batch, noise, noise)
    _, m2 = sac_step(learner.nets, learner.hp, s1, batch, noise, noise)
    assert "loss/actor" not in m1 and "loss/actor" in m2
    assert all(torch.equal(s1.actor[k], learner.state.actor[k]) for k in s1.actor)


def test_obs_normalizer_tracks_added_rows() -> None:
    learner = _learner()
    obs = torch.randn(500, OBS) * 3 + 2
    learner.add_transitions(
        obs, torch.zeros(500, ACT), torch.zeros(500), obs, torch.zeros(500, dtype=torch.bool)
    )
    buffers = dict(learner.actor.named_buffers())
    torch.testing.assert_close(buffers["normalizer.obs_mean"], obs.mean(0))
    torch.testing.assert_close(buffers["normalizer.obs_var"], obs.var(0, correction=0), rtol=1e-4, atol=1e-4)
    state = dataclasses.replace(learner.state)
    assert float(state.actor_buffers["normalizer.obs_count"]) == 500


def test_runtime_options_forced_off_on_cpu() -> None:
    opts = runtime_options(torch.device("cpu"), torch_compile=True, cuda_graphs=True)
    assert not opts.torch_compile and not opts.cuda_graphs
    for diag in opts.diagnostics.values():
        assert diag["requested"] and not diag["enabled"] and "cpu" in diag["disable_reason"]


def _reference_q(critic: dict[str, torch.Tensor], member: int, x: torch.Tensor) -> torch.Tensor:
    """One twin critic as a plain ReLU MLP of ``F.linear`` calls, read from the ensemble's parameters."""
    layer = 0
    while f"layers.{layer}.weight" in critic:
        weight, bias = critic[f"layers.{layer}.weight"][member], critic[f"layers.{layer}.bias"][member]
        x = torch.relu(torch.nn.functional.linear(x, weight.T, bias))
        layer += 1
    q = torch.nn.functional.linear(x, critic["out.weight"][member].T, critic["out.bias"][member])
    return q.squeeze(-1)


def test_critic_loss_and_gradients_equal_the_plain_twin_q_definition(batch: Batch) -> None:
    # The batched ensemble is an implementation choice: its loss and gradients must be the textbook
    # twin-Q soft Bellman loss, member by member, on the same batch.
    learner = _learner()
    learner.add_transitions(batch.obs, batch.action, batch.reward, batch.next_obs, batch.terminated)
    state, hp = learner.state, learner.hp
    noise = torch.randn(batch.obs.shape[0], ACT, generator=torch.Generator().manual_seed(3))
    critic = {k: v.detach().clone().requires_grad_() for k, v in state.critic.items()}
    loss, _ = sac_critic_loss(learner.nets, hp, state, critic, batch, noise)

    ref_critic = {k: v.detach().clone().requires_grad_() for k, v in state.critic.items()}
    buffers = state.actor_buffers

    def normalize(obs: torch.Tensor) -> torch.Tensor:
        scaled = (obs - buffers["normalizer.obs_mean"]) / torch.sqrt(buffers["normalizer.obs_var"] + 1e-8)
        return torch.clamp(scaled, -10.0, 10.0)

    with torch.no_grad():
        mean, log_std = torch.func.functional_call(learner.actor, (state.actor, buffers), (batch.next_obs,))
        next_action, next_logp = squashed_gaussian(mean, log_std, noise)
        next_in = torch.cat([normalize(batch.next_obs), next_action], -1)
        next_q = torch.minimum(*(_reference_q(state.target_critic, m, next_in) for m in (0, 1)))
        soft_next = next_q - state.log_alpha.exp() * next_logp
        target = batch.reward + hp.gamma * (1.0 - batch.terminated) * soft_next
    now_in = torch.cat([normalize(batch.obs), batch.action], -1)
    ref_loss = sum(0.5 * ((_reference_q(ref_critic, m, now_in) - target) ** 2).mean() for m in (0, 1))
    assert isinstance(ref_loss, torch.Tensor)

    torch.testing.assert_close(loss, ref_loss)
    grads = torch.autograd.grad(loss, list(critic.values()))
    ref_grads = torch.autograd.grad(ref_loss, list(ref_critic.values()))
    for name, got, want in zip(critic, grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6, msg=name)
