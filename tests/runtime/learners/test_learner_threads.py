"""training.learner_threads: validation, the documented null rule, and that the trainer applies it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soakbench.runtime.config import (
    LEARNER_THREADS_CAP,
    ConfigError,
    PlatformFacts,
    compose,
    resolve_learner_threads,
    validate_for_run,
)


def test_explicit_value_wins() -> None:
    assert resolve_learner_threads(3, "mujoco", 2, 2) == 3
    cfg = compose("sac", "g1_walk_flat", "mujoco", ["training.learner_threads=3"])
    assert cfg.resolved.learner_threads == 3


@pytest.mark.parametrize(
    ("sim", "physics", "cores", "expected"),
    [
        ("mujoco", 2, 2, 1),  # default on a 2-core host: physics takes both cores
        ("mujoco", 1, 2, 1),
        ("mujoco", 4, 16, 8),  # capped
        ("mujoco", 12, 16, 4),
        ("mujoco", 64, 16, 1),  # oversubscribed physics never yields 0
        ("mjwarp", 16, 16, 8),  # physics on the device: only the collector thread is busy
        ("mjwarp", 2, 2, 1),
    ],
)
def test_null_rule(sim: str, physics: int, cores: int, expected: int) -> None:
    assert resolve_learner_threads(None, sim, physics, cores) == expected
    assert 1 <= expected <= LEARNER_THREADS_CAP


def test_compose_resolves_null_from_physics_threads() -> None:
    cfg = compose("sac", "g1_walk_flat", "mujoco", ["training.physics_threads=1"])
    assert cfg.training.learner_threads is None
    assert cfg.resolved.learner_threads == resolve_learner_threads(None, "mujoco", 1, _cores())


@pytest.mark.parametrize("bad", ["0", "-2", "true", "1.5", "many"])
def test_invalid_values_fail_closed(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"training\.learner_threads"):
        compose("sac", "g1_walk_flat", "mujoco", [f"training.learner_threads={bad}"])


def test_resolved_value_cannot_be_overridden() -> None:
    with pytest.raises(ConfigError, match="derived"):
        compose("sac", "g1_walk_flat", "mujoco", ["resolved.learner_threads=4"])


def _cores() -> int:
    import os

    return os.cpu_count() or 1


def test_trainer_sets_threads_before_building_the_learner(tmp_path: Path) -> None:
    """The learner factory sees the resolved thread count; run_config.json records it."""
    import torch

    from soakbench.runtime.manager.hooks import TrainerHooks
    from soakbench.runtime.manager.null_learner import null_learner_factory
    from soakbench.runtime.manager.trainer import run_training

    seen: list[int] = []

    def factory(cfg: Any, obs_dim: int, action_dim: int, device: Any) -> Any:
        seen.append(torch.get_num_threads())
        return null_learner_factory(cfg, obs_dim, action_dim, device)

    before = torch.get_num_threads()
    wanted = 2 if before != 2 else 3
    log_dir = tmp_path / "run"
    cfg = compose(
        "sac",
        "g1_walk_flat",
        "mujoco",
        [
            f"log_dir={log_dir}",
            "algo.num_envs=4",
            "algo.max_iterations=3",
            "algo.prefill_iterations=1",
            "training.no_play=true",
            f"training.learner_threads={wanted}",
        ],
    )
    run_cfg = validate_for_run(cfg, PlatformFacts.detect())
    hooks = TrainerHooks(env_factory="tests.runtime.manager.manager_fakes:make_env", learner_factory=factory)
    try:
        assert run_training(run_cfg, hooks) == 0
    finally:
        torch.set_num_threads(before)  # the trainer owns its process's threads; pytest's is shared
    assert seen == [wanted]
    run_config = json.loads((log_dir / "run_config.json").read_text())
    assert run_config["config"]["resolved"]["learner_threads"] == wanted
