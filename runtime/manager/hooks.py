"""Wiring of one training session that is not user configuration: test and benchmark hooks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from soakbench.runtime.config import RunConfig
    from soakbench.runtime.manager.contracts import ManagedLearner

LearnerFactory = Callable[["RunConfig", int, int, "torch.device"], "ManagedLearner"]


@dataclass
class TrainerHooks:
    """Wiring that tests and benchmarks swap; deliberately not a user config key.

    ``learner_factory(cfg, obs_dim, action_dim, device) -> learner`` replaces the configured learner
    (the machinery-overhead benchmark's null learner); ``env_factory``/``policy_module`` are import paths for the collector.
    """

    learner_factory: LearnerFactory | None = None
    env_factory: str = "soakbench.runtime.env:make_env"
    policy_module: str = "soakbench.runtime.learners"
    startup_timeout_s: float = 900.0
    stale_tick_timeout_s: float = 300.0
    shutdown_deadline_s: float = 8.0
    poll_s: float = 0.25
    finalize_exit_timeout_s: float = 60.0  # collector exit after its "done" (torch/physics teardown)
    tb_min_interval_s: float = 1.0  # at most one TensorBoard window per second (see telemetry.py)
    # The collector's tensors are small (one vector step) and physics has its own threads: intra-op
    # parallelism there costs more than it gains (measured 140 ms vs 1.2 ms per SAC actor call at 64 envs
    # on a loaded 2-core host), so the collector runs torch single-threaded. None keeps torch's default.
    collector_torch_threads: int | None = 1
    extra_progress: Callable[[], dict[str, Any]] | None = None
