"""Plain-data shapes of the :class:`~runtime.backends.base.SimBackend` contract, and the diagnostics payload.

Everything here is JSON-ready (TypedDicts) or frozen, and torch-free, so the trainer's manifest and the
probe's artifact can describe a backend without importing physics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, TypedDict

DataPlane = Literal["host_bridge", "device"]
TransferDirection = Literal["h2d", "d2h"]


class PlatformView(Protocol):
    """The platform facts a capability declaration reads (``runtime.config.PlatformFacts`` has them)."""

    @property
    def system(self) -> str: ...

    @property
    def cuda_available(self) -> bool: ...


@dataclass(frozen=True)
class BackendCapabilities:
    """What a backend offers on one platform, declared by its class without building it (plain data).

    ``physics_device`` is None when the backend cannot run on that platform; ``unavailable_reason`` says
    why. ``host_transfers`` pairs each declared transfer phase with its host<->device copies per control
    step (the :attr:`SimBackend.TRANSFER_INVENTORY` summed by phase; empty for a device-resident backend).
    """

    data_plane: DataPlane
    physics_device: str | None
    unavailable_reason: str | None
    process_model: str
    cuda_graph_requested: bool
    cuda_graph_possible: bool
    host_transfers: tuple[tuple[str, int], ...]


class OptimizationDiagnostic(TypedDict):
    """State of one runtime optimization. ``disable_reason`` is non-empty iff ``enabled`` is false."""

    requested: bool
    enabled: bool
    disable_reason: str | None


@dataclass(frozen=True)
class TransferDeclaration:
    """One host<->device copy a backend may make, at most ``max_per_control_step`` times per control step.

    ``direction`` reads from the tensor device's side: ``d2h`` leaves it for host physics, ``h2d``
    returns results to it. Counted under the key ``"<direction>/<phase>"``.
    """

    phase: str
    direction: TransferDirection
    max_per_control_step: int
    description: str


class TransferCount(TypedDict):
    """Copies counted under one ``"<direction>/<phase>"`` key, and their bytes."""

    count: int
    bytes: int


class HostSteppingInfo(TypedDict):
    """How a host-stepping backend runs its physics (cold-path facts for artifacts)."""

    engine: str
    num_threads: int
    requested_threads: int
    decimation: int
    pinned_staging: bool
    packed_row_width: int


class WarningCount(TypedDict):
    """Occurrences of one MuJoCo warning, and how many worlds raised it."""

    total: int
    worlds: int


class PhysicsWarnings(TypedDict):
    """MuJoCo warnings since construction, and the silent auto-resets among them (bad qpos/qvel/qacc)."""

    counts: dict[str, WarningCount]
    auto_resets: int
    auto_reset_worlds: int


class AvailableDiagnostics(TypedDict):
    """Artifact payload of a backend that reported its optimizations."""

    available: Literal[True]
    backend_type: str
    diagnostics: dict[str, OptimizationDiagnostic]


class UnavailableDiagnostics(TypedDict):
    """Artifact payload when no diagnostics could be read; the reason is never empty."""

    available: Literal[False]
    backend_type: str | None
    unavailable_reason: str


BackendDiagnostics = AvailableDiagnostics | UnavailableDiagnostics


class DiagnosticsSource(Protocol):
    """What :func:`diagnostics_payload` reads: every ``SimBackend`` (and the trainer's test doubles)."""

    backend_type: str

    def get_tensor_runtime_diagnostics(self) -> Mapping[str, OptimizationDiagnostic]: ...


def unavailable_diagnostics(backend_type: str | None, reason: str) -> UnavailableDiagnostics:
    """The explicit "no diagnostics" payload (artifacts never carry null here)."""
    return {"available": False, "backend_type": backend_type, "unavailable_reason": reason}


def diagnostics_payload(backend: DiagnosticsSource) -> BackendDiagnostics:
    """``{available: true, backend_type, diagnostics}``, or the unavailable payload when the backend
    declares none or its getter raises (a diagnostics failure never fails a run or a probe)."""
    backend_type = str(backend.backend_type)
    try:
        raw = backend.get_tensor_runtime_diagnostics()
        diagnostics = optimization_entries(raw)
    except Exception as exc:
        return unavailable_diagnostics(
            backend_type, f"get_tensor_runtime_diagnostics raised {type(exc).__name__}: {exc}"
        )
    if not diagnostics:
        return unavailable_diagnostics(backend_type, "backend declares no tensor runtime diagnostics")
    return {"available": True, "backend_type": backend_type, "diagnostics": diagnostics}


def optimization_entries(raw: Mapping[str, Mapping[str, object]]) -> dict[str, OptimizationDiagnostic]:
    """``{name: {requested, enabled, disable_reason}}`` normalised: booleans, and a reason exactly when the
    optimization is off (the artifact schemas require that), for backends and learners alike."""
    return {str(name): _normalized(item) for name, item in raw.items()}


def _normalized(item: Mapping[str, object]) -> OptimizationDiagnostic:
    enabled = bool(item["enabled"])
    reason = None if enabled else str(item["disable_reason"] or "unspecified")
    return {"requested": bool(item["requested"]), "enabled": enabled, "disable_reason": reason}
