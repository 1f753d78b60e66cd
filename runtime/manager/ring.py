"""Inference ring: versioned actor-weight publication learner -> collector.

``capacity`` slots each hold one flattened actor state vector [P] (params and buffers). Publication
``v`` goes to slot ``v % capacity`` under a per-slot seqlock (``seq`` odd while being written), then
``published_version`` becomes ``v`` and the collector's doorbell rings. The collector adopts the newest
version only (skipping stale ones is correct for weights) and records ``consumed_version``.

Counters (shared header; learner writes all but ``consumed_version`` and the per-slot reads):

* publication_lag = published_version − consumed_version (derived);
* queue_depth = min(lag, capacity): publications sitting unconsumed in slots (derived);
* max_publication_lag / max_in_flight: peaks of those two, sampled at each publication;
* events: publications (learner) + adoptions (collector), each counted by its own writer.
"""

from __future__ import annotations

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

_BASE_FIELDS: tuple[str, ...] = (
    "published_version",
    "consumed_version",
    "max_in_flight",
    "max_publication_lag",
    "publications",
    "consumptions",
    "torn_reads",
)


def ring_int_fields(capacity: int) -> tuple[str, ...]:
    """Header fields: the base counters plus ``seq_i`` / ``ver_i`` per slot."""
    per_slot = [f"{kind}_{i}" for i in range(capacity) for kind in ("seq", "ver")]
    return _BASE_FIELDS + tuple(per_slot)


class RingStats(TypedDict):
    """Live ring counters: derived depth and lag, their peaks, events and the two versions."""

    queue_depth: int
    publication_lag: int
    max_in_flight: int
    max_publication_lag: int
    events: int
    published_version: int
    consumed_version: int
    slot_capacity: int
    torn_reads: int


def empty_ring_stats(capacity: int) -> RingStats:
    """The counters of a ring that was never created (a run that failed before the attach)."""
    return RingStats(
        queue_depth=0,
        publication_lag=0,
        max_in_flight=0,
        max_publication_lag=0,
        events=0,
        published_version=0,
        consumed_version=0,
        slot_capacity=capacity,
        torn_reads=0,
    )


@dataclass(frozen=True)
class RingSpec:
    """Everything the collector needs to attach (picklable)."""

    capacity: int
    state_size: int
    counters: CountersSpec
    data: TensorSpec


class InferenceRing:
    """One end of the ring (the learner creates it, the collector attaches)."""

    def __init__(
        self,
        capacity: int,
        state_size: int,
        counters: SharedCounters,
        data: SharedTensor,
        doorbell: WakeSignal,
    ) -> None:
        self.capacity = capacity
        self.state_size = state_size
        self.counters = counters
        self.data = data
        self.doorbell = doorbell
        self._closed = False

    @classmethod
    def create(
        cls, capacity: int, state_size: int, device: str | torch.device, doorbell: WakeSignal
    ) -> InferenceRing:
        if not 1 <= capacity <= 16:
            raise ValueError(f"training.inference_slot_capacity must be in 1..16, got {capacity}")
        if state_size < 1:
            raise ValueError(f"actor state size must be >= 1, got {state_size}")
        counters, data = create_header_and_data(
            "ring", ring_int_fields(capacity), (), (capacity, state_size), device
        )
        return cls(capacity, state_size, counters, data, doorbell)

    @classmethod
    def attach(cls, spec: RingSpec, doorbell: WakeSignal) -> InferenceRing:
        counters, data = attach_header_and_data(spec.counters, spec.data)
        return cls(spec.capacity, spec.state_size, counters, data, doorbell)

    @property
    def spec(self) -> RingSpec:
        return RingSpec(self.capacity, self.state_size, self.counters.spec, self.data.spec)

    # -- learner ----------------------------------------------------------------------------------
    def publish(self, state: torch.Tensor) -> int:
        """Publish ``state`` [P] float32 as the next version; returns that version."""
        if tuple(state.shape) != (self.state_size,):
            raise ValueError(
                f"actor state vector has shape {tuple(state.shape)}, ring expects ({self.state_size},)"
            )
        c = self.counters
        version = c.get("published_version") + 1
        slot = version % self.capacity
        c.add(f"seq_{slot}")  # odd: write in progress
        self.data.tensor[slot].copy_(state)
        if self.data.tensor.device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.data.tensor.device)
        c.set(f"ver_{slot}", version)
        c.add(f"seq_{slot}")  # even: stable
        c.set("published_version", version)
        lag = version - c.get("consumed_version")
        if lag > c.get("max_publication_lag"):
            c.set("max_publication_lag", lag)
        if min(lag, self.capacity) > c.get("max_in_flight"):
            c.set("max_in_flight", min(lag, self.capacity))
        c.add("publications")
        self.doorbell.set()
        return version

    # -- collector --------------------------------------------------------------------------------
    def consume_latest(self, out: torch.Tensor, attempts: int = 8) -> int | None:
        """Copy the newest unconsumed publication into ``out`` [P]; return its version, or None when
        nothing new is published (or every attempt raced a writer: counted in ``torn_reads``)."""
        c = self.counters
        for _ in range(attempts):
            version = c.get("published_version")
            if version == c.get("consumed_version"):
                return None
            slot = version % self.capacity
            before = c.get(f"seq_{slot}")
            if before % 2 or c.get(f"ver_{slot}") != version:
                continue  # being overwritten by a newer publication: re-read the head
            out.copy_(self.data.tensor[slot])
            if out.device.type == "cuda":
                import torch

                torch.cuda.synchronize(out.device)
            if c.get(f"seq_{slot}") == before and c.get(f"ver_{slot}") == version:
                c.set("consumed_version", version)
                c.add("consumptions")
                return version
        c.add("torn_reads")
        return None

    # -- both -------------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True once :meth:`close` released this end's mapping."""
        return self._closed

    def stats(self) -> RingStats:
        """Live counters: queue_depth, publication_lag, peaks, events and versions."""
        c = self.counters
        published, consumed = c.get("published_version"), c.get("consumed_version")
        lag = published - consumed
        return RingStats(
            queue_depth=min(lag, self.capacity),
            publication_lag=lag,
            max_in_flight=c.get("max_in_flight"),
            max_publication_lag=c.get("max_publication_lag"),
            events=c.get("publications") + c.get("consumptions"),
            published_version=published,
            consumed_version=consumed,
            slot_capacity=self.capacity,
            torn_reads=c.get("torn_reads"),
        )

    def close(self) -> None:
        """Release views and shared memory (unlinked by the creator); idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.data.close()
        finally:
            self.counters.close()
