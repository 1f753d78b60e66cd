"""The closed vocabularies shared by the runtime, the soak monitor, the matrix and the schemas.

Each list is defined once here; ``tests/foundation/test_vocab.py`` holds the shipped schemas' enums equal
to these, so a new class cannot reach one side without the others.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args


class Algo(StrEnum):
    """The learning algorithms an owner route may name (``train --algo``)."""

    sac = "sac"
    flashsac = "flashsac"


ALGOS: tuple[str, ...] = tuple(a.value for a in Algo)

ShutdownClassification = Literal[
    "normal_completion",
    "learner_failure",
    "collector_failure",
    "backend_worker_failure",
    "timeout/stale_tick",
    "external_cancellation",
    "peer_failure",
    "unknown_failure",
]
SHUTDOWN_CLASSIFICATIONS: tuple[ShutdownClassification, ...] = get_args(ShutdownClassification)
SHUTDOWN_FAILURES: tuple[ShutdownClassification, ...] = tuple(
    c for c in SHUTDOWN_CLASSIFICATIONS if c != "normal_completion"
)

ShutdownOwner = Literal["manager", "learner", "collector", "backend_worker", "external", "peer"]
SHUTDOWN_OWNERS: tuple[ShutdownOwner, ...] = get_args(ShutdownOwner)

RunPhase = Literal["startup", "prefill", "train", "finalize", "playback", "cleanup"]
RUN_PHASES: tuple[RunPhase, ...] = get_args(RunPhase)

RunStatus = Literal["completed", "failed", "cancelled"]
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)

MonitorFailure = Literal[
    "timeout/startup", "timeout/stale_tick", "shutdown_hang", "external_cancellation", "monitor_error"
]
MONITOR_FAILURES: tuple[MonitorFailure, ...] = get_args(MonitorFailure)

# Why the monitor stopped a run that had not failed (`--until-decided`): not a failure class.
MonitorStopReason = Literal["survival_decided", "max_duration"]
MONITOR_STOP_REASONS: tuple[MonitorStopReason, ...] = get_args(MonitorStopReason)

# Every soak failure class, in no particular precedence (the pass table orders its rows itself).
SOAK_FAILURE_CLASSIFICATIONS: tuple[str, ...] = tuple(
    dict.fromkeys(
        (
            *MONITOR_FAILURES,
            *SHUTDOWN_FAILURES,
            "trainer_failure",
            "rank_failure",
            "run_summary_missing",
            "schema_violation",
            "run_contract_violation",
            "shutdown_contract_violation",
            "resource_leak",
            "resource_exhaustion",
            "too_short",
            "insufficient_observation",
            "throughput_drift",
            "oom_killed",
            "gpu_fault",
            "gpu_throttle",
            "tree_process_killed",
        )
    )
)

# GPU clock-event reasons (foundation.gpu_health's names) that count as throttling: heat, the power brake
# and hardware slowdown. SwPowerCap is left out: a GPU at its power limit under full load works as designed.
GPU_THROTTLE_REASONS: tuple[str, ...] = ("HwSlowdown", "SwThermal", "HwThermal", "HwPowerBrake")
