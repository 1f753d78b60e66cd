"""What one training session holds: the collector's hello, the shared-memory arenas, the learner and
the run's output files, gathered during start-up into one typed :class:`SessionResources`."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from soakbench.runtime.artifacts import ProgressLog
from soakbench.runtime.manager.control import ControlSegment, ControlStats
from soakbench.runtime.manager.ingress import IngressLayout, ReplayIngress, ReplayStats, empty_replay_stats
from soakbench.runtime.manager.link import CollectorLink
from soakbench.runtime.manager.plan import RunPlan
from soakbench.runtime.manager.ring import InferenceRing, RingStats, empty_ring_stats
from soakbench.runtime.manager.shutdown import RunFailure
from soakbench.runtime.manager.signals import WakeSignal

if TYPE_CHECKING:
    from soakbench.runtime.config import RunConfig
    from soakbench.runtime.manager.contracts import ManagedLearner
    from soakbench.runtime.manager.hooks import TrainerHooks
    from soakbench.runtime.metrics_schema import MetricsWriter


@dataclass(frozen=True)
class Hello:
    """The collector's start-up report: env geometry, backend identity and the actor state size."""

    obs_dim: int
    action_dim: int
    backend_type: str
    data_plane: str | None
    device: str
    actor_state_size: int
    backend_diagnostics: dict[str, Any]

    @classmethod
    def from_message(cls, msg: Mapping[str, Any]) -> Hello:
        data_plane = msg.get("data_plane")
        return cls(
            obs_dim=int(msg["obs_dim"]),
            action_dim=int(msg["action_dim"]),
            backend_type=str(msg["backend_type"]),
            data_plane=None if data_plane is None else str(data_plane),
            device=str(msg["device"]),
            actor_state_size=int(msg["actor_state_size"]),
            backend_diagnostics=dict(msg["backend_diagnostics"]),
        )


@dataclass(frozen=True)
class Doorbells:
    """The two wake-up signals: ``to_learner`` (a slot is published) and ``to_collector`` (a slot is
    released, weights are published, or a stop/finish is requested)."""

    to_learner: WakeSignal
    to_collector: WakeSignal

    @classmethod
    def create(cls) -> Doorbells:
        to_learner = WakeSignal()
        try:
            return cls(to_learner, WakeSignal())
        except BaseException:
            to_learner.close()
            raise


@dataclass(frozen=True)
class ArenaStats:
    """The counters of the three shared segments at one moment (control None: never created)."""

    replay: ReplayStats
    inference: RingStats
    control: ControlStats | None

    @classmethod
    def empty(cls, plan: RunPlan) -> ArenaStats:
        return cls(
            empty_replay_stats(plan.ingress_depth, plan.slot_rows), empty_ring_stats(plan.ring_capacity), None
        )


@dataclass(frozen=True)
class Arenas:
    """The shared-memory segments between trainer and collector, created together by the trainer."""

    ingress: ReplayIngress
    ring: InferenceRing
    control: ControlSegment

    @classmethod
    def create(cls, plan: RunPlan, hello: Hello, bells: Doorbells) -> Arenas:
        """Size the ingress and the ring from the hello; no segment survives a failure here."""
        layout = IngressLayout(plan.ingress_depth, plan.slot_rows, hello.obs_dim, hello.action_dim)
        device = plan.physics_device
        with contextlib.ExitStack() as undo:
            ingress = ReplayIngress.create(layout, device, bells.to_learner, bells.to_collector)
            undo.callback(ingress.close)
            ring = InferenceRing.create(
                plan.ring_capacity, hello.actor_state_size, device, bells.to_collector
            )
            undo.callback(ring.close)
            control = ControlSegment.create()
            undo.pop_all()
        return cls(ingress, ring, control)

    def stats(self) -> ArenaStats | None:
        """Live counters, or None once any segment is closed."""
        if self.ingress.closed or self.ring.closed or self.control.closed:
            return None
        return ArenaStats(self.ingress.stats(), self.ring.stats(), self.control.stats())

    def attach_message(self, plan: RunPlan) -> dict[str, Any]:
        """The ``attach`` message that lets the waiting collector map the segments and start."""
        return {
            "kind": "attach",
            "ingress": self.ingress.spec,
            "ring": self.ring.spec,
            "control": self.control.spec,
            "total_iterations": plan.total_iterations,
            "prefill_iterations": plan.prefill,
        }


@dataclass(frozen=True)
class SessionResources:
    """Everything a started session drives; every field exists once start-up has completed."""

    progress: ProgressLog
    writer: MetricsWriter | None  # None on the ranks after rank 0, which write no TensorBoard
    link: CollectorLink
    hello: Hello
    learner: ManagedLearner
    arenas: Arenas


@dataclass
class StartupState:
    """What start-up has created so far: the cleanup releases exactly these, whatever failed."""

    progress: ProgressLog | None = None
    writer: MetricsWriter | None = None
    link: CollectorLink | None = None
    hello: Hello | None = None
    learner: ManagedLearner | None = None
    arenas: Arenas | None = None

    def complete(self) -> SessionResources:
        """The typed resources; raises if any part is missing (a start-up ordering bug)."""
        p = self
        if p.progress is None or p.link is None or p.hello is None or p.learner is None or p.arenas is None:
            raise RuntimeError("start-up left a session resource unset")
        return SessionResources(p.progress, p.writer, p.link, p.hello, p.learner, p.arenas)


def build_learner(cfg: RunConfig, hooks: TrainerHooks, plan: RunPlan, hello: Hello) -> ManagedLearner:
    """The hooks' learner, else the configured one, on the learner device; any failure is the
    learner's (``learner_failure``)."""
    import torch

    device = torch.device(plan.learner_device)
    # torch's default (one thread per core) makes the learner fight the collector's physics threads.
    torch.set_num_threads(int(cfg.resolved.learner_threads))
    try:
        if hooks.learner_factory is not None:
            return hooks.learner_factory(cfg, hello.obs_dim, hello.action_dim, device)
        from soakbench.runtime.learners import build_learner as build_configured

        return build_configured(
            cfg.algo,
            hello.obs_dim,
            hello.action_dim,
            device,
            seed=int(cfg.seed),
            torch_compile=bool(cfg.training.torch_compile),
            cuda_graphs=bool(cfg.training.cuda_graphs),
        )
    except Exception as exc:
        raise RunFailure("learner_failure", f"building the learner failed: {exc}", cause=exc) from exc
