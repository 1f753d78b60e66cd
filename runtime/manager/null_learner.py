"""The null learner of the machinery-overhead benchmark (benchmarks/machinery_overhead.py): ingests and releases like a learner, never takes a gradient step.

It isolates the cost of the machinery (collector process, ingress, ring, signalling) from learning.
Reachable only through ``TrainerHooks.learner_factory`` (benchmarks/machinery_overhead.py), never
through a user configuration key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from soakbench.runtime.config import RunConfig
    from soakbench.runtime.learners.collective import Collective


class NullLearner:
    """Copies every ingested slot into a private buffer (as a replay buffer would) and does nothing else.

    ``ready()`` is always False, so the trainer never calls ``update()`` and publishes only the initial
    and final weights."""

    def __init__(self, cfg: RunConfig, obs_dim: int, action_dim: int, device: torch.device) -> None:
        import torch

        from soakbench.runtime.learners import build_actor

        self.actor = build_actor(cfg.algo, obs_dim, action_dim).to(device)
        self.device = torch.device(device)
        self.updates_per_iteration = 0
        self.rows_ingested = 0
        self._sink: torch.Tensor | None = None
        self._requested = {
            "torch_compile": bool(cfg.training.torch_compile),
            "cuda_graphs": bool(cfg.training.cuda_graphs),
        }

    def add_transitions(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
    ) -> None:
        """Copy [n, O], [n, A], [n], [n, O], [n] into the sink (same bytes a replay insert moves)."""
        import torch

        n = int(obs.shape[0])
        width = 2 * obs.shape[1] + action.shape[1] + 2
        if self._sink is None or self._sink.shape[0] != n:
            self._sink = torch.empty((n, width), dtype=torch.float32, device=self.device)
        torch.cat(
            [obs, action, reward.reshape(-1, 1), next_obs, terminated.reshape(-1, 1).to(torch.float32)],
            dim=1,
            out=self._sink,
        )
        self.rows_ingested += n

    def ready(self) -> bool:
        return False

    def update(self) -> dict[str, float]:
        return {}

    def join(self, collective: Collective) -> None:
        """Take rank 0's actor, so that every rank's collector acts the same."""
        collective.broadcast(list(self.actor.state_dict().values()), src=0)

    def synchronize(self) -> None:
        """Nothing to average: the null learner learns nothing from its data."""

    def checksum(self) -> str:
        from soakbench.runtime.learners.base import state_checksum

        return state_checksum(dict(self.actor.state_dict()))

    def runtime_diagnostics(self) -> dict[str, dict[str, Any]]:
        """Every optimisation is off: there is no gradient step to compile or capture."""
        reason = "null learner: it takes no gradient steps"
        return {
            name: {"requested": requested, "enabled": False, "disable_reason": reason}
            for name, requested in self._requested.items()
        }

    def state_dict(self) -> dict[str, Any]:
        return {"rows_ingested": self.rows_ingested, "actor": self.actor.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.rows_ingested = int(state["rows_ingested"])
        self.actor.load_state_dict(state["actor"])


def null_learner_factory(cfg: RunConfig, obs_dim: int, action_dim: int, device: torch.device) -> NullLearner:
    """``TrainerHooks.learner_factory`` for the machinery-overhead benchmark."""
    return NullLearner(cfg, obs_dim, action_dim, device)
