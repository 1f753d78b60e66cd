from __future__ import annotations

import pytest
import torch

from soakbench.runtime.learners import (
    actor_state_size,
    actor_state_vector,
    build_actor,
    build_learner,
    load_actor_state_vector,
)

from .conftest import ACT, OBS, algo_cfg, toy_batch


def _fill(learner: object, n: int = 128) -> None:
    b = toy_batch(n)
    learner.add_transitions(b.obs * 4 + 1, b.action, b.reward, b.next_obs, b.terminated.bool())  # type: ignore[attr-defined]


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_actor_state_vector_round_trip(algo: str) -> None:
    cfg = algo_cfg(algo)
    learner = build_learner(cfg, OBS, ACT, torch.device("cpu"))
    _fill(learner)
    assert learner.ready()
    for _ in range(2):
        learner.update()
    vec = actor_state_vector(learner.actor)
    assert vec.dtype == torch.float32 and vec.shape == (actor_state_size(cfg, OBS, ACT),)
    collector = build_actor(cfg, OBS, ACT)
    assert not torch.equal(actor_state_vector(collector), vec)
    load_actor_state_vector(collector, vec)
    assert torch.equal(actor_state_vector(collector), vec)
    # buffers travel too: normaliser / batch-norm statistics moved away from their initial values
    names = [n for n, _ in collector.named_buffers()]
    assert names and any(float(b.abs().sum()) not in (0.0, float(b.numel())) for b in collector.buffers())
    obs = torch.randn(5, OBS)
    torch.testing.assert_close(collector.act(obs, True), learner.actor.act(obs, True))
    acts = collector.act(obs, False)
    assert acts.shape == (5, ACT) and bool((acts.abs() <= 1).all())
    with pytest.raises(ValueError, match="expected"):
        load_actor_state_vector(collector, vec[:-1])


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_state_dict_round_trip(algo: str) -> None:
    cfg = algo_cfg(algo)
    a = build_learner(cfg, OBS, ACT, torch.device("cpu"), seed=1)
    _fill(a)
    a.update()
    b = build_learner(cfg, OBS, ACT, torch.device("cpu"), seed=2)
    b.load_state_dict(a.state_dict())
    assert torch.equal(actor_state_vector(a.actor), actor_state_vector(b.actor))
    _fill(b)
    _fill(a)
    assert a.update()["loss/critic"] == b.update()["loss/critic"]
    other = build_learner(
        algo_cfg("sac" if algo == "flashsac" else "flashsac"), OBS, ACT, torch.device("cpu")
    )
    with pytest.raises(ValueError, match="algo"):
        other.load_state_dict(a.state_dict())


def test_ready_and_update_metrics() -> None:
    learner = build_learner(
        algo_cfg("sac", learning_starts=100, updates_per_iteration=3), OBS, ACT, torch.device("cpu")
    )
    _fill(learner, 64)
    assert not learner.ready()
    with pytest.raises(RuntimeError, match="ready"):
        learner.update()
    _fill(learner, 64)
    metrics = learner.update()
    assert metrics["learner/updates_total"] == 3 and metrics["learner/replay_size"] == 128
    for tag in ("loss/critic", "loss/actor", "policy/alpha", "policy/entropy", "q/mean"):
        assert tag in metrics


def test_bad_input_is_named() -> None:
    learner = build_learner(algo_cfg("sac"), OBS, ACT, torch.device("cpu"))
    with pytest.raises(ValueError, match="action has shape"):
        learner.add_transitions(
            torch.zeros(4, OBS), torch.zeros(4, ACT + 1), torch.zeros(4), torch.zeros(4, OBS), torch.zeros(4)
        )
    with pytest.raises(ValueError, match=r"algo\.name"):
        build_learner(algo_cfg("sac", name="ppo"), OBS, ACT, torch.device("cpu"))
    with pytest.raises(ValueError, match=r"algo\.batch_size"):
        build_learner(algo_cfg("sac", batch_size="big"), OBS, ACT, torch.device("cpu"))
