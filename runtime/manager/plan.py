"""The numbers and placement one training run is driven by, read once from the validated config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soakbench.runtime.config import RunConfig


@dataclass(frozen=True)
class RunPlan:
    """Iteration counts, geometry, intervals and device placement of one run.

    ``fault_at`` is the iteration of an injected learner exception (``training.test_fault``), or None;
    ``sharing_resolved`` is ``resolved.cuda_process_sharing`` (set by host validation) as plain data.
    """

    num_envs: int
    slot_rows: int
    total_iterations: int
    prefill: int
    ingress_depth: int
    ring_capacity: int
    metrics_interval: int
    save_interval: int
    heartbeat_s: float
    fault_at: int | None
    learner_device: str
    physics_device: str
    sim_backend: str
    sharing_configured: str | None
    sharing_resolved: dict[str, Any] | None

    @property
    def slots_per_iteration(self) -> int:
        return self.num_envs // self.slot_rows

    @classmethod
    def from_config(cls, cfg: RunConfig) -> RunPlan:
        training, resolved = cfg.training, cfg.resolved
        return cls(
            num_envs=int(cfg.algo.num_envs),
            slot_rows=int(cfg.resolved.replay_ingress_slot_rows),
            total_iterations=int(cfg.algo.max_iterations),
            prefill=int(cfg.algo.prefill_iterations),
            ingress_depth=int(training.replay_ingress_depth),
            ring_capacity=int(training.inference_slot_capacity),
            metrics_interval=int(training.collector_metrics_interval),
            save_interval=int(cfg.algo.save_interval),
            heartbeat_s=float(training.heartbeat_seconds),
            fault_at=int(training.test_fault_iteration)
            if training.test_fault == "learner_exception"
            else None,
            learner_device=resolved.learner_device,
            physics_device=resolved.physics_device,
            sim_backend=str(training.sim_backend),
            sharing_configured=training.cuda_process_sharing,
            sharing_resolved=resolved.cuda_process_sharing.to_dict(),
        )
