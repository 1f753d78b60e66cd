"""TensorBoard metric schema v1: the fixed tag set every training run writes, and its writer.

Every event file starts with the scalar ``meta/metric_schema_version`` = 1 (step 0) so consumers can
refuse unversioned or future files (``extract-metrics``). A *window* is the set of scalars written at
one TensorBoard step; the step is ``total_env_steps`` at the time of writing, so curves plot against
environment steps. Writers may write any subset of the tags per window, never a tag outside the set.

This module imports no torch at import time (the harness reads TAGS); ``MetricsWriter`` loads
torch.utils.tensorboard when constructed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

METRIC_SCHEMA_VERSION = 1
SCHEMA_TAG = "meta/metric_schema_version"

# tag -> meaning (units). The only definition of schema v1; docs/metrics.md explains each group.
TAGS: dict[str, str] = {
    SCHEMA_TAG: "metric schema version of this event file (1)",
    # learner losses and policy
    "loss/critic": "critic loss per update (SAC: 0.5 * summed twin MSE; FlashSAC: categorical cross-entropy, nats)",
    "loss/actor": "actor loss alpha*log_pi - min Q (learner value units)",
    "loss/alpha": "entropy-temperature loss",
    "policy/entropy": "policy entropy estimate -E[log pi(a|s)] on the batch (nats)",
    "policy/alpha": "entropy temperature alpha",
    "q/mean": "mean online Q(s, a) on the batch (SAC: reward units; FlashSAC: normalised return units)",
    "q/min": "minimum online Q(s, a) on the batch",
    "q/max": "maximum online Q(s, a) on the batch",
    "learner/critic_grad_norm": "global L2 norm of the critic gradient before clipping",
    "learner/reward_scale": "divisor applied to rewards before the critic target (SAC: 1)",
    "learner/updates_total": "gradient updates applied since the start of the run",
    "learner/replay_size": "rows held by the learner-side replay buffer",
    "learner/updates_per_s": "gradient updates per second of wall time over the window",
    "learner/ingress_wait_share": "share (0..1) of learner wall time spent waiting on the replay ingress",
    # episodes
    "episode/reward_mean": "mean undiscounted return of the episodes that finished in the window",
    "episode/length_mean": "mean length (control steps) of the episodes that finished in the window",
    "episode/count": "episodes that finished in the window",
    # throughput
    "throughput/env_steps_per_s": "environment steps per second (num_envs x vector steps / s)",
    "throughput/total_env_steps": "environment steps since the start of the run (prefill included)",
    "throughput/iteration": "collector iterations (vector steps) since the start of the run",
    # replay ingress (shared-memory slots between collector and learner)
    "replay/occupancy": "published - released ingress slots",
    "replay/high_water_occupancy": "maximum occupancy so far",
    "replay/published_sequence": "ingress slots published by the collector",
    "replay/release_sequence": "ingress slots released by the learner",
    "replay/backpressure_waits": "times the collector waited for a free slot",
    "replay/backpressure_wait_s": "seconds the collector waited for a free slot",
    "replay/dropped_batches": "batches dropped (early returns)",
    "replay/early_returns": "early returns of the ingress (closed + stop)",
    # inference ring (weight publication to the collector)
    "inference/queue_depth": "weight publications not yet consumed by the collector",
    "inference/publication_lag": "published_version - consumed_version",
    "inference/max_in_flight": "maximum queue depth so far",
    "inference/max_publication_lag": "maximum publication lag so far",
    "inference/events": "inference-ring events (publications + consumptions)",
    "inference/published_version": "latest published weight version",
    "inference/consumed_version": "latest weight version the collector acts with",
}


def check_tags(scalars: Mapping[str, Any]) -> None:
    """Raise ValueError naming every tag outside schema v1 (and the schema tag, which is reserved)."""
    unknown = sorted(k for k in scalars if k not in TAGS or k == SCHEMA_TAG)
    if unknown:
        raise ValueError(
            f"metric tags not in TensorBoard metric schema v{METRIC_SCHEMA_VERSION}: {', '.join(unknown)} "
            "(allowed tags: runtime/metrics_schema.py TAGS)"
        )


class MetricsWriter:
    """Writes schema-v1 windows to TensorBoard event files in ``log_dir``.

    ``write(step, scalars)``: ``step`` is total_env_steps (int >= 0), ``scalars`` maps schema tags to
    floats. Unknown tags raise ValueError before anything is written (fail closed)."""

    def __init__(self, log_dir: str | Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        self._writer: Any = SummaryWriter(log_dir=str(self.log_dir))
        self._writer.add_scalar(SCHEMA_TAG, float(METRIC_SCHEMA_VERSION), global_step=0)
        self._writer.add_text("meta/metric_schema", f"TensorBoard metric schema v{METRIC_SCHEMA_VERSION}", 0)
        self._writer.flush()

    def write(self, step: int, scalars: Mapping[str, float]) -> None:
        """Write one window at ``step``; values must be real numbers (NaN/inf are written as-is)."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"metrics step must be an int >= 0 (total_env_steps), got {step!r}")
        check_tags(scalars)
        values = {}
        for tag, value in scalars.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"metric {tag} must be a number, got {type(value).__name__}")
            values[tag] = float(value)
        for tag, value in values.items():
            self._writer.add_scalar(tag, value, global_step=step)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def json_number(value: float) -> float | None:
    """NaN/inf are not JSON: map them to None for machine-readable output."""
    return value if math.isfinite(value) else None
