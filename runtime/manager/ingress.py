"""Replay ingress: the shared-memory slot queue that carries transitions collector -> learner.

``depth`` slots of ``slot_rows`` packed float32 rows ``[obs | action | reward | next_obs | terminated]``
form a single-producer / single-consumer ring. The collector fills slot ``published % depth`` and bumps
``published_sequence``; the learner copies slot ``released % depth`` into its replay buffer and bumps
``release_sequence``. Counters (all in a shared header, each with one writer):

* occupancy = published − released (derived); ``high_water_occupancy`` ≤ depth (collector);
* ``backpressure_waits`` / ``backpressure_wait_s``: times and seconds the collector found every slot
  full and had to wait for a release;
* ``early_returns`` = ``dropped_batches`` = ``closed_returns`` + ``stop_returns``: a pending batch the
  collector gave up on because the learner closed the ingress or a stop was requested. Each early return
  drops exactly one pending batch (the rest of that vector step is abandoned with it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from soakbench.runtime.manager.shm import (
    CountersSpec,
    SharedCounters,
    SharedTensor,
    TensorSpec,
    attach_header_and_data,
    create_header_and_data,
)
from soakbench.runtime.manager.signals import WakeSignal

if TYPE_CHECKING:
    import torch

INGRESS_INT_FIELDS: tuple[str, ...] = (
    "published_sequence",
    "release_sequence",
    "high_water_occupancy",
    "backpressure_waits",
    "early_returns",
    "dropped_batches",
    "closed_returns",
    "stop_returns",
    "closed",
    "stop_requested",
)
INGRESS_FLOAT_FIELDS: tuple[str, ...] = ("backpressure_wait_s",)


@dataclass(frozen=True)
class IngressLayout:
    """Geometry of the ingress: ``depth`` slots × ``slot_rows`` rows × ``width`` float32 columns."""

    depth: int
    slot_rows: int
    obs_dim: int
    action_dim: int

    def __post_init__(self) -> None:
        for key in ("depth", "slot_rows", "obs_dim", "action_dim"):
            if getattr(self, key) < 1:
                raise ValueError(f"ingress {key} must be >= 1, got {getattr(self, key)}")

    @property
    def width(self) -> int:
        return 2 * self.obs_dim + self.action_dim + 2

    def columns(self) -> dict[str, slice]:
        """Column ranges of each field inside a packed row."""
        o, a = self.obs_dim, self.action_dim
        return {
            "obs": slice(0, o),
            "action": slice(o, o + a),
            "reward": slice(o + a, o + a + 1),
            "next_obs": slice(o + a + 1, 2 * o + a + 1),
            "terminated": slice(2 * o + a + 1, 2 * o + a + 2),
        }


@dataclass(frozen=True)
class IngressSpec:
    """Everything the collector needs to attach (picklable)."""

    layout: IngressLayout
    counters: CountersSpec
    data: TensorSpec


@dataclass(frozen=True)
class IngressBatch:
    """One slot of transitions: what :meth:`ReplayIngress.put` writes and :meth:`ReplayIngress.peek`
    returns (as views valid until :meth:`ReplayIngress.release`).

    Shapes: obs [R, O], action [R, A], reward [R], next_obs [R, O], terminated [R] (bool or float on
    put; a bool copy from peek).
    """

    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: torch.Tensor
    terminated: torch.Tensor


class ReplayStats(TypedDict):
    """The manifest's replay_ingress counters (``final_occupancy`` is the occupancy when read)."""

    depth: int
    slot_rows: int
    published_sequence: int
    release_sequence: int
    final_occupancy: int
    high_water_occupancy: int
    backpressure_waits: int
    backpressure_wait_s: float
    early_returns: int
    dropped_batches: int
    closed_returns: int
    stop_returns: int


def empty_replay_stats(depth: int, slot_rows: int) -> ReplayStats:
    """The counters of an ingress that was never created (a run that failed before the attach)."""
    return ReplayStats(
        depth=depth,
        slot_rows=slot_rows,
        published_sequence=0,
        release_sequence=0,
        final_occupancy=0,
        high_water_occupancy=0,
        backpressure_waits=0,
        backpressure_wait_s=0.0,
        early_returns=0,
        dropped_batches=0,
        closed_returns=0,
        stop_returns=0,
    )


class ReplayIngress:
    """One end of the ingress (the learner creates it, the collector attaches)."""

    def __init__(
        self,
        layout: IngressLayout,
        counters: SharedCounters,
        data: SharedTensor,
        to_learner: WakeSignal,
        to_collector: WakeSignal,
    ) -> None:
        self.layout = layout
        self.counters = counters
        self.data = data
        self.to_learner = to_learner
        self.to_collector = to_collector
        self._cols = layout.columns()
        self._closed_local = False

    @classmethod
    def create(
        cls,
        layout: IngressLayout,
        device: str | torch.device,
        to_learner: WakeSignal,
        to_collector: WakeSignal,
    ) -> ReplayIngress:
        shape = (layout.depth, layout.slot_rows, layout.width)
        counters, data = create_header_and_data(
            "ingress", INGRESS_INT_FIELDS, INGRESS_FLOAT_FIELDS, shape, device
        )
        return cls(layout, counters, data, to_learner, to_collector)

    @classmethod
    def attach(cls, spec: IngressSpec, to_learner: WakeSignal, to_collector: WakeSignal) -> ReplayIngress:
        counters, data = attach_header_and_data(spec.counters, spec.data)
        return cls(spec.layout, counters, data, to_learner, to_collector)

    @property
    def spec(self) -> IngressSpec:
        return IngressSpec(self.layout, self.counters.spec, self.data.spec)

    # -- producer (collector) ---------------------------------------------------------------------
    def _early_return(self) -> bool:
        c = self.counters
        c.add("early_returns")
        c.add("dropped_batches")
        c.add("closed_returns" if c.get("closed") else "stop_returns")
        return False

    def halted(self) -> bool:
        """True once the consumer closed the ingress or a stop was requested: the producer must stop."""
        return bool(self.counters.get("closed") or self.counters.get("stop_requested"))

    def put(
        self, batch: IngressBatch, *, poll_s: float = 0.25, abort: Callable[[], bool] | None = None
    ) -> bool:
        """Publish one slot of ``slot_rows`` rows; block (counted backpressure) while all are full.

        Returns False (an early return, batch dropped) when the ingress is closed, a stop is requested,
        or ``abort()`` turns true while waiting (counted as a stop return).
        """
        if self.halted() or not self._wait_for_free_slot(poll_s, abort):
            return self._early_return()
        c = self.counters
        seq = c.get("published_sequence")
        self._write_slot(seq % self.layout.depth, batch)
        seq += 1
        c.set("published_sequence", seq)
        occupancy = seq - c.get("release_sequence")
        if occupancy > c.get("high_water_occupancy"):
            c.set("high_water_occupancy", occupancy)
        self.to_learner.set()
        return True

    def _wait_for_free_slot(self, poll_s: float, abort: Callable[[], bool] | None) -> bool:
        """Wait while every slot is full; False when halted (or aborted) meanwhile."""
        if self.pending() < self.layout.depth:
            return True
        c = self.counters
        c.add("backpressure_waits")
        start = time.monotonic()
        try:
            while self.pending() >= self.layout.depth:
                if abort is not None and abort():
                    c.set("stop_requested", 1)
                if self.halted():
                    return False
                self.to_collector.wait(poll_s)
        finally:
            c.addf("backpressure_wait_s", time.monotonic() - start)
        return True

    def _write_slot(self, index: int, batch: IngressBatch) -> None:
        import torch

        slot = self.data.tensor[index]
        # one packed write straight into the slot (contiguous [R, W]) instead of five strided copies
        torch.cat(
            [
                batch.obs.to(torch.float32),
                batch.action.to(torch.float32),
                batch.reward.reshape(-1, 1).to(torch.float32),
                batch.next_obs.to(torch.float32),
                batch.terminated.reshape(-1, 1).to(torch.float32),
            ],
            dim=1,
            out=slot,
        )
        if slot.device.type == "cuda":
            torch.cuda.synchronize(slot.device)  # the learner reads from another CUDA context

    # -- consumer (learner) -----------------------------------------------------------------------
    def pending(self) -> int:
        """Published but not yet released slots (the occupancy)."""
        return self.counters.get("published_sequence") - self.counters.get("release_sequence")

    def peek(self, timeout_s: float) -> IngressBatch | None:
        """The oldest unreleased slot as views, waiting up to ``timeout_s`` for one; else None."""
        if self.pending() <= 0:
            self.to_learner.wait(timeout_s)
            if self.pending() <= 0:
                return None
        slot = self.data.tensor[self.counters.get("release_sequence") % self.layout.depth]
        cols = self._cols
        return IngressBatch(
            obs=slot[:, cols["obs"]],
            action=slot[:, cols["action"]],
            reward=slot[:, cols["reward"]].reshape(-1),
            next_obs=slot[:, cols["next_obs"]],
            terminated=slot[:, cols["terminated"]].reshape(-1) > 0.5,
        )

    def release(self) -> None:
        """Hand the oldest slot back to the collector."""
        if self.pending() <= 0:
            raise RuntimeError("ingress release without a published slot")
        self.counters.add("release_sequence")
        self.to_collector.set()

    # -- lifecycle --------------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Ask the producer to give up pending batches (stop path) and wake it."""
        self.counters.set("stop_requested", 1)
        self.to_collector.set()

    def mark_closed(self) -> None:
        """Declare the consumer gone (close path) and wake the producer."""
        self.counters.set("closed", 1)
        self.to_collector.set()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` released this end's mapping (not the shared ``closed`` flag that
        :meth:`mark_closed` raises for the producer)."""
        return self._closed_local

    def stats(self) -> ReplayStats:
        """The manifest's replay_ingress counters (final_occupancy is the live occupancy)."""
        c = self.counters
        pub, rel = c.get("published_sequence"), c.get("release_sequence")
        return ReplayStats(
            depth=self.layout.depth,
            slot_rows=self.layout.slot_rows,
            published_sequence=pub,
            release_sequence=rel,
            final_occupancy=pub - rel,
            high_water_occupancy=c.get("high_water_occupancy"),
            backpressure_waits=c.get("backpressure_waits"),
            backpressure_wait_s=c.getf("backpressure_wait_s"),
            early_returns=c.get("early_returns"),
            dropped_batches=c.get("dropped_batches"),
            closed_returns=c.get("closed_returns"),
            stop_returns=c.get("stop_returns"),
        )

    def close(self) -> None:
        """Release views and shared memory (unlinked by the creator); idempotent. Signals are owned by
        the caller and closed separately."""
        if self._closed_local:
            return
        self._closed_local = True
        try:
            self.data.close()
        finally:
            self.counters.close()
