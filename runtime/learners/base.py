"""The Learner edge object shared by SAC and FlashSAC: replay, randomness, state swapping, metrics.

The math lives in pure step functions (``sac.sac_step``, ``flashsac.flashsac_step``) that take a state
and a batch and return a new state plus metrics; this class only feeds them and keeps the result.
"""

from __future__ import annotations

import dataclasses
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import TYPE_CHECKING, Any

import torch

from soakbench.runtime.learners.collective import SOLO, Collective, mean_params
from soakbench.runtime.learners.networks import Actor
from soakbench.runtime.learners.replay import Batch, ReplayBuffer, check_transitions

if TYPE_CHECKING:
    from soakbench.runtime.config import LearnerConfig


def shared_hyperparameters(algo_cfg: LearnerConfig) -> dict[str, Any]:
    """The scalar hyperparameters every learner's ``*Hyper`` dataclass has."""
    return {
        "gamma": algo_cfg.gamma,
        "tau": algo_cfg.tau,
        "actor_lr": algo_cfg.actor_lr,
        "critic_lr": algo_cfg.critic_lr,
        "alpha_lr": algo_cfg.alpha_lr,
        "max_grad_norm": algo_cfg.max_grad_norm,
        "actor_update_period": algo_cfg.actor_update_period,
    }


@dataclass(frozen=True)
class RuntimeOptions:
    """Learner execution options from ``training.*`` with the decision recorded per optimisation."""

    torch_compile: bool
    cuda_graphs: bool
    diagnostics: dict[str, dict[str, Any]]


def runtime_options(device: torch.device, torch_compile: bool, cuda_graphs: bool) -> RuntimeOptions:
    """Decide torch.compile / CUDA graphs for ``device``: forced off on CPU (reason recorded)."""
    diag: dict[str, dict[str, Any]] = {}
    compile_on = torch_compile and device.type != "cpu"
    diag["torch_compile"] = {
        "requested": torch_compile,
        "enabled": compile_on,
        "disable_reason": None
        if compile_on
        else ("not requested" if not torch_compile else "forced off on cpu: compile time exceeds the gain"),
    }
    reason = "not requested"
    if cuda_graphs:
        reason = (
            "forced off on cpu: CUDA graphs need a CUDA device"
            if device.type != "cuda"
            else "not implemented: learner updates run eagerly (host-side update counters)"
        )
    diag["cuda_graphs"] = {"requested": cuda_graphs, "enabled": False, "disable_reason": reason}
    return RuntimeOptions(torch_compile=compile_on, cuda_graphs=False, diagnostics=diag)


def state_to_dict(state: Any) -> Any:
    """Recursively turn (nested) frozen dataclasses into dicts for ``torch.save``."""
    if is_dataclass(state) and not isinstance(state, type):
        return {f.name: state_to_dict(getattr(state, f.name)) for f in fields(state)}
    return state


def state_leaves(tree: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted name, leaf) of a nested state dict, in sorted name order (the same on every rank)."""
    if isinstance(tree, Mapping):
        for key in sorted(tree):
            yield from state_leaves(tree[key], f"{prefix}{key}.")
    else:
        yield prefix.removesuffix("."), tree


def state_checksum(state: Any) -> str:
    """``sha256:<hex>`` of every name and value of a learner state (tensors by their exact bytes)."""
    digest = hashlib.sha256()
    for name, leaf in state_leaves(state_to_dict(state)):
        digest.update(name.encode())
        if isinstance(leaf, torch.Tensor):
            flat = leaf.detach().to("cpu").contiguous().reshape(-1)
            digest.update(str(flat.dtype).encode())
            digest.update(flat.view(torch.uint8).numpy().tobytes())
        else:
            digest.update(repr(leaf).encode())
    return f"sha256:{digest.hexdigest()}"


class Learner(ABC):
    """Owns the replay buffer and the current learner state; see runtime/learners/__init__.py.

    As one rank of several (:meth:`join`), the gradients are averaged inside each update, and the
    statistics each rank gathers from its own data (``rank_local_fields``) are averaged after each
    ``update()``, so every rank holds the same parameters and the same policy."""

    actor: Actor
    updates_per_iteration: int
    algo: str
    state: Any  # the subclass's frozen state dataclass
    nets: Any  # the subclass's frozen nets dataclass, with a ``collective`` field
    rank_local_fields: tuple[str, ...]  # state fields updated from this rank's data alone
    constant_buffers: frozenset[str] = frozenset()  # keys in those fields that never change

    def __init__(
        self,
        algo_cfg: LearnerConfig,
        obs_dim: int,
        action_dim: int,
        device: torch.device,
        seed: int,
        options: RuntimeOptions,
    ) -> None:
        torch.manual_seed(seed)  # network initialisation in the subclasses draws from the global RNG
        self.obs_dim, self.action_dim, self.device, self.options = obs_dim, action_dim, device, options
        self.shared_hyper = shared_hyperparameters(algo_cfg)
        self.batch_size = algo_cfg.batch_size
        self.learning_starts = algo_cfg.learning_starts
        self.updates_per_iteration = algo_cfg.updates_per_iteration
        self.replay = ReplayBuffer(algo_cfg.replay_capacity, obs_dim, action_dim, device)
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.updates_total = 0
        self.collective: Collective = SOLO

    # -- edge: peers ---------------------------------------------------------------------------
    def join(self, collective: Collective) -> None:
        """Train as one rank of ``collective``: take rank 0's initial state, average from now on."""
        self.collective = collective
        self.nets = dataclasses.replace(self.nets, collective=collective)
        tensors = [t for _, t in state_leaves(state_to_dict(self.state)) if isinstance(t, torch.Tensor)]
        collective.broadcast(tensors, src=0)
        self._sync_actor()

    def synchronize(self) -> None:
        """Average the rank-local statistics over the ranks (one rank has nothing to average), then copy
        the state's actor into ``self.actor``."""
        if self.collective.world_size == 1:
            self._sync_actor()
            return
        flat: dict[str, torch.Tensor] = {}
        for name in self.rank_local_fields:
            value = getattr(self.state, name)
            items = value.items() if isinstance(value, Mapping) else [("", value)]
            flat |= {f"{name}/{key}": t for key, t in items if key not in self.constant_buffers}
        averaged = mean_params(self.collective, flat)
        changes: dict[str, Any] = {}
        for name in self.rank_local_fields:
            value = getattr(self.state, name)
            if isinstance(value, Mapping):
                changes[name] = {key: averaged.get(f"{name}/{key}", t) for key, t in value.items()}
            else:
                changes[name] = averaged[f"{name}/"]
        self.state = dataclasses.replace(self.state, **changes)
        self._sync_actor()

    def checksum(self) -> str:
        """``sha256:...`` of the whole learner state: equal on every rank after :meth:`synchronize`."""
        return state_checksum(self.state)

    # -- edge: data in -------------------------------------------------------------------------
    def add_transitions(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: torch.Tensor,
        terminated: torch.Tensor,
    ) -> None:
        """Copy n transitions into the replay buffer (obs [n, O], action [n, A], reward [n],
        next_obs [n, O], terminated [n]) and fold them into running statistics."""
        check_transitions(Batch(obs, action, reward, next_obs, terminated), self.obs_dim, self.action_dim)
        self.replay.add(obs, action, reward, next_obs, terminated)
        self._observe(obs.to(self.device, torch.float32), reward.to(self.device, torch.float32))

    def ready(self) -> bool:
        """True once the replay holds at least max(batch_size, learning_starts) rows."""
        return self.replay.size >= max(self.batch_size, self.learning_starts)

    # -- edge: updates -------------------------------------------------------------------------
    def update(self) -> dict[str, float]:
        """Run ``updates_per_iteration`` gradient updates; returns the mean of each metric over the
        updates that produced it plus learner counters (TB schema v1 tag names)."""
        if not self.ready():
            raise RuntimeError(
                f"update() before ready(): replay holds {self.replay.size} rows, "
                f"needs {max(self.batch_size, self.learning_starts)}"
            )
        sums: dict[str, torch.Tensor] = {}
        counts: dict[str, int] = {}
        for _ in range(self.updates_per_iteration):
            batch = self.replay.sample(self.batch_size, self.generator)
            for key, value in self._update_once(batch).items():
                sums[key] = sums[key] + value if key in sums else value.detach()
                counts[key] = counts.get(key, 0) + 1
            self.updates_total += 1
        self.synchronize()
        out = {k: float(v) / counts[k] for k, v in sums.items()}
        out["learner/updates_total"] = float(self.updates_total)
        out["learner/replay_size"] = float(self.replay.size)
        return out

    def _noise(self, rows: int) -> torch.Tensor:
        """Standard normal noise [rows, A] from the learner generator (sampled at the edge)."""
        return torch.randn(rows, self.action_dim, generator=self.generator, device=self.device)

    @torch.no_grad()
    def _sync_actor(self) -> None:
        """Copy the state's actor params/buffers into ``self.actor`` (the module the state vector reads)."""
        params, buffers = self._actor_tensors()
        own = dict(self.actor.named_parameters()) | dict(self.actor.named_buffers())
        for name, value in (params | buffers).items():
            own[name].copy_(value)

    def runtime_diagnostics(self) -> dict[str, dict[str, Any]]:
        """Per-optimisation ``{requested, enabled, disable_reason}`` for the run manifest."""
        return {k: dict(v) for k, v in self.options.diagnostics.items()}

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Networks, optimiser moments, running statistics and counters (not the replay contents)."""
        return {
            "algo": self.algo,
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "updates_total": self.updates_total,
            "generator": self.generator.get_state(),
            "state": state_to_dict(self._get_state()),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore ``state_dict`` output; refuses a checkpoint of another algorithm or shape."""
        for key, want in (("algo", self.algo), ("obs_dim", self.obs_dim), ("action_dim", self.action_dim)):
            if state.get(key) != want:
                raise ValueError(
                    f"checkpoint {key}={state.get(key)!r} does not match this learner ({want!r})"
                )
        self.updates_total = int(state["updates_total"])
        self.generator.set_state(state["generator"])
        self._set_state(state["state"])
        self._sync_actor()

    # -- subclass hooks ------------------------------------------------------------------------
    @abstractmethod
    def _observe(self, obs: torch.Tensor, reward: torch.Tensor) -> None:
        """Fold newly added obs [n, O] and reward [n] into running statistics."""

    @abstractmethod
    def _update_once(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient update on ``batch``: swap in the new state, return 0-dim metric tensors."""

    @abstractmethod
    def _actor_tensors(self) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """(actor params, actor buffers) of the current state, keyed like ``self.actor``."""

    @abstractmethod
    def _get_state(self) -> Any: ...

    @abstractmethod
    def _set_state(self, state: Mapping[str, Any]) -> None: ...
