"""No pass without observation: did every observable resource class get a verdict worth the name?

Pure logic over the monitor's samples and the ``trends.leak_verdicts`` result. Each resource class is

- ``not_observable``: ``gpu_memory`` where NVML saw no GPU, or could not attribute GPU memory to the
  run's processes, in every sample (the reason is the sampler's own); any class the process sampler
  declares it cannot measure (harness.soak.host.interface.Capabilities, e.g. ``eventfd`` under psutil);
- ``insufficient_data``: its leak verdict is ``insufficient_data``, or the verdict rests on fewer than
  ``min_trend_samples`` samples in the post-start-up trend window;
- ``observed``: a ``bounded`` or ``growing`` verdict resting on at least ``min_trend_samples`` samples.

A soak passes only when no class is ``insufficient_data`` (row ``trend_observation``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the monitor loads this module while it samples: no numpy then
    from soakbench.harness.soak.verdicts.trends import LeakTrends

DEFAULT_MIN_TREND_SAMPLES = 30
ObservationStatus = Literal["observed", "insufficient_data", "not_observable"]


def gpu_unobservable_reason(samples: Sequence[Mapping[str, Any]]) -> str | None:
    """Why GPU memory could not be observed in any sample, or None when some sample could."""
    reasons: list[str] = []
    for sample in samples:
        gpu = sample.get("gpu")
        if not isinstance(gpu, Mapping):
            return None  # samples without a GPU block say nothing about NVML
        if gpu.get("available") is True and gpu.get("process_memory_reason") is None:
            return None
        reasons.append(str(gpu.get("reason") or gpu.get("process_memory_reason") or "NVML unavailable"))
    return reasons[0] if reasons else None


def class_observation(
    name: str, trend: Mapping[str, Any], min_trend_samples: int, gpu_reason: str | None
) -> dict[str, Any]:
    """``{status, verdict, samples, reason}`` of one resource class."""
    verdict = trend.get("verdict")
    window = trend.get("window")
    n = window.get("n") if isinstance(window, Mapping) else None
    samples = n if isinstance(n, int) and not isinstance(n, bool) else 0
    status: ObservationStatus
    if name == "gpu_memory" and gpu_reason is not None:
        status, reason = "not_observable", f"GPU memory not observable: {gpu_reason}"
    elif verdict not in ("bounded", "growing"):
        status, reason = "insufficient_data", f"leak verdict {verdict}: {trend.get('reason')}"
    elif samples < min_trend_samples:
        status = "insufficient_data"
        reason = (
            f"verdict {verdict} rests on {samples} post-start-up samples in the trend window, "
            f"fewer than the {min_trend_samples} required"
        )
    else:
        status, reason = "observed", f"verdict {verdict} on {samples} post-start-up samples"
    return {"status": status, "verdict": verdict, "samples": samples, "reason": reason}


def observe_classes(
    samples: Sequence[Mapping[str, Any]],
    leak: LeakTrends,
    min_trend_samples: int,
    unobservable: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The artifact's ``resource_summary.observation``: the threshold and one entry per class.

    Args:
        samples: the monitor samples (for the GPU block).
        leak: ``trends.leak_verdicts``'s result, whose trend records say how many samples each verdict had.
        min_trend_samples: samples each verdict must rest on.
        unobservable: resource class -> why the sampler cannot measure it (those are not_observable).
    """
    if not isinstance(min_trend_samples, int) or isinstance(min_trend_samples, bool) or min_trend_samples < 1:
        raise ValueError(f"min_trend_samples: must be an integer >= 1, got {min_trend_samples!r}")
    trends = leak.trends
    gpu_reason = gpu_unobservable_reason(samples)
    classes = {
        name: class_observation(name, trend, min_trend_samples, gpu_reason)
        for name, trend in trends.items()
        if isinstance(trend, Mapping)
    }
    for name, why in (unobservable or {}).items():
        if name in classes:
            entry = classes[name]
            entry.update(status="not_observable", reason=f"{name} not observable: {why}")
    return {"min_trend_samples": min_trend_samples, "classes": classes}


def declared_limits(section: Mapping[str, Any] | None) -> tuple[dict[str, str], str | None]:
    """From an artifact's ``sampler`` section: (resource class -> why unobservable, why /dev/shm could not
    be listed or None). An artifact without the section was written by the Linux sampler."""
    if not isinstance(section, Mapping):
        return {}, None
    classes = section.get("unobservable_classes")
    limits = {str(k): str(v) for k, v in classes.items()} if isinstance(classes, Mapping) else {}
    if section.get("shm_observable") is False:
        return limits, str(section.get("shm_reason") or "the sampler could not list shared memory")
    return limits, None
