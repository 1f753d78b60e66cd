"""The GPU's own health in the pass table: critical XID events, uncorrected ECC errors, clock throttling.

Pure: the raw ``gpu_health`` record of a run (harness.soak.host.gpu_watch: start and end counters, every
XID event with the drains around it) and the samples in, summaries, rows and sentences out.

- ``gpu_xid_errors`` fails on any critical XID event during the run, and when the event wait itself
  failed (the monitor can then no longer say that none happened). A GPU whose registration NVML refused
  is listed as not observable; with none registered the row is ``not_applicable`` with NVML's reason.
- ``gpu_ecc_uncorrected`` fails when a GPU's volatile uncorrected ECC count rose over the run (the
  highest of the end reading and the per-sample readings, against the start); ``not_applicable`` where
  no GPU reports the count (a card without ECC: NVML says ``Not Supported``).
- ``gpu_throttle`` is the share of samples in which a GPU's clocks were held down by a thermal,
  power-brake or hardware-slowdown event (``THROTTLE_REASONS``; the software power cap is recorded but
  not counted: a GPU at its power limit under full load is working as designed). Information
  (``not_applicable`` with the value) unless ``--fail-on-gpu-throttle``; then any such sample fails.

On a host without NVML every row is ``not_applicable`` with NVML's reason: no GPU, nothing to judge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from soakbench.foundation.vocab import GPU_THROTTLE_REASONS as THROTTLE_REASONS
from soakbench.harness.soak.verdicts.criterion import Criterion

GPU_ROWS: tuple[str, ...] = ("gpu_xid_errors", "gpu_ecc_uncorrected", "gpu_throttle")
MAX_EPISODES = 200
_EXPECTED = {
    "gpu_xid_errors": "no critical XID event on the run's GPUs during the run",
    "gpu_ecc_uncorrected": "no increase of any GPU's volatile uncorrected ECC count over the run",
    "gpu_throttle": "no sample with a thermal, power-brake or hardware-slowdown clock event "
    "(information unless --fail-on-gpu-throttle)",
}


def _unobservable(value: Any) -> str | None:
    """NVML's reason when ``value`` is ``{"not_observable": reason}``, else None."""
    return str(value["not_observable"]) if isinstance(value, Mapping) and "not_observable" in value else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _Episodes:
    """Runs of consecutive throttled samples, per GPU."""

    def __init__(self) -> None:
        self.open: dict[int, dict[str, Any]] = {}
        self.done: list[dict[str, Any]] = []

    def update(self, device: Mapping[str, Any], hit: Sequence[str], t: float) -> None:
        index = int(device["index"])
        current = self.open.get(index)
        if hit and current is None:
            self.open[index] = {
                "index": index,
                "uuid": device.get("uuid"),
                "t_start": t,
                "t_end": t,
                "reasons": set(hit),
            }
        elif hit and current is not None:
            current["t_end"] = t
            current["reasons"] |= set(hit)
        elif current is not None:
            self.done.append(self.open.pop(index))

    def finish(self) -> list[dict[str, Any]]:
        episodes = sorted([*self.done, *self.open.values()], key=lambda e: (e["t_start"], e["index"]))
        return [{**e, "reasons": sorted(e["reasons"])} for e in episodes]


def throttle_summary(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Share of samples with a throttle reason on any GPU, counts per reason, and the episodes.

    Returns ``{samples_judged, samples_throttled, share, reasons: {name: samples}, episodes: [{index,
    uuid, t_start, t_end, reasons}], episodes_omitted, not_observable: {gpu index: NVML's reason}}``;
    ``share`` is null when no sample had a readable reasons mask.
    """
    judged = throttled = 0
    reasons: dict[str, int] = {}
    unobservable: dict[str, str] = {}
    episodes = _Episodes()
    for sample in samples:
        record = sample.get("gpu_health")
        if not isinstance(record, Mapping) or not record.get("available"):
            continue
        names: set[str] = set()
        seen = False
        for device in record.get("devices") or []:
            mask = device.get("clock_event_reasons")
            why = _unobservable(mask)
            if why is not None or not isinstance(mask, Mapping):
                unobservable[str(device.get("index"))] = why or "no reasons mask"
                continue
            seen = True
            hit = sorted(set(mask.get("names") or ()) & set(THROTTLE_REASONS))
            names |= set(hit)
            episodes.update(device, hit, float(sample["t"]))
        judged += seen
        throttled += bool(names)
        for name in names:
            reasons[name] = reasons.get(name, 0) + 1
    found = episodes.finish()
    return {
        "samples_judged": judged,
        "samples_throttled": throttled,
        "share": round(throttled / judged, 4) if judged else None,
        "reasons": dict(sorted(reasons.items())),
        "episodes": found[:MAX_EPISODES],
        "episodes_omitted": max(0, len(found) - MAX_EPISODES),
        "not_observable": unobservable,
    }


def _ecc_entry(device: Mapping[str, Any], samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    start = (device.get("start") or {}).get("ecc_volatile", {}).get("uncorrected")
    if _count(start) is None:
        return {"not_observable": _unobservable(start) or "no starting count"}
    end = ((device.get("end") or {}).get("ecc_volatile") or {}).get("uncorrected")
    seen: list[tuple[float, int]] = []
    for sample in samples:
        for reading in (sample.get("gpu_health") or {}).get("devices") or []:
            value = _count(reading.get("ecc_uncorrected"))
            if reading.get("uuid") == device.get("uuid") and value is not None:
                seen.append((float(sample["t"]), value))
    counts = [v for v in (_count(end), *(v for _, v in seen)) if v is not None]
    return {
        "start": start,
        "end": end,
        "max_seen": max((v for _, v in seen), default=None),
        "increase": max(counts) - start if counts else None,
        "first_increase_t": next((t for t, v in seen if v > start), None),
    }


def ecc_summary(health: Mapping[str, Any], samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per GPU index: ``{start, end, max_seen, increase, first_increase_t}`` or ``{not_observable}``;
    ``increase`` is null when no count was read after the start."""
    return {str(d["index"]): _ecc_entry(d, samples) for d in health.get("devices") or []}


@dataclass(frozen=True)
class GpuAssessment:
    """The run's GPUs judged: the watch's record (devices, counters at start and end, XID events, NVML's
    reason where it is unavailable) and what the record and the samples give: the uncorrected ECC
    increase and the throttle episodes. ``to_json()`` is the artifact's ``gpu_health`` section."""

    record: Mapping[str, Any]
    ecc_uncorrected: Mapping[str, Any]
    throttle: Mapping[str, Any]

    @property
    def available(self) -> bool:
        return bool(self.record.get("available"))

    @property
    def reason(self) -> str | None:
        """Why NVML could not be read, when it could not."""
        return self.record.get("reason")

    @property
    def devices(self) -> list[Mapping[str, Any]]:
        return list(self.record.get("devices") or [])

    @property
    def xid_events(self) -> list[Mapping[str, Any]]:
        return list(self.record.get("xid_events") or [])

    @property
    def event_errors(self) -> list[Mapping[str, Any]]:
        return list(self.record.get("event_errors") or [])

    def to_json(self) -> dict[str, Any]:
        return {**self.record, "ecc_uncorrected": dict(self.ecc_uncorrected), "throttle": dict(self.throttle)}


def assess_gpu(
    health: Mapping[str, Any] | None, samples: Sequence[Mapping[str, Any]]
) -> GpuAssessment | None:
    """The run's GPUs judged from the watch's record and the samples (recomputed when given an
    artifact's section); None without a record."""
    if health is None:
        return None
    return GpuAssessment(
        record=health, ecc_uncorrected=ecc_summary(health, samples), throttle=throttle_summary(samples)
    )


def _not_applicable(name: str, value: Any) -> Criterion:
    return Criterion(name, _EXPECTED[name], value, "not_applicable")


def _row(name: str, value: Any, ok: bool) -> Criterion:
    return Criterion(name, _EXPECTED[name], value, "pass" if ok else "fail")


def _reasons_text(reasons: Mapping[str, str]) -> str:
    return "not observable: " + "; ".join(f"GPU {gpu}: {why}" for gpu, why in reasons.items())


def _xid_row(health: GpuAssessment) -> Criterion:
    devices = health.devices
    refused = {
        str(d["index"]): _unobservable(d.get("xid_events")) or "?"
        for d in devices
        if "registered" not in (d.get("xid_events") or {})
    }
    if len(refused) == len(devices):
        return _not_applicable(
            "gpu_xid_errors", _reasons_text(refused) if refused else "not observable: no GPU"
        )
    events = [dict(e) for e in health.xid_events]
    errors = [dict(e) for e in health.event_errors]
    value = {"events": events, "event_errors": errors, "not_observable": refused}
    return _row("gpu_xid_errors", value, not events and not errors)


def _ecc_row(health: GpuAssessment) -> Criterion:
    summary = health.ecc_uncorrected
    judged = {gpu: e for gpu, e in summary.items() if _count(e.get("increase")) is not None}
    if not judged:
        why = {gpu: _unobservable(e) or "no count read after the start" for gpu, e in summary.items()}
        return _not_applicable("gpu_ecc_uncorrected", _reasons_text(why) if why else "not observable: no GPU")
    return _row("gpu_ecc_uncorrected", dict(summary), all(e["increase"] <= 0 for e in judged.values()))


def _throttle_row(health: GpuAssessment, gate: bool) -> Criterion:
    summary = health.throttle
    if not summary.get("samples_judged"):
        why = summary.get("not_observable") or {}
        return _not_applicable(
            "gpu_throttle", _reasons_text(why) if why else "not observable: no GPU reading"
        )
    keys = ("share", "samples_judged", "samples_throttled", "reasons")
    value = {**{k: summary.get(k) for k in keys}, "episodes": len(summary.get("episodes") or [])}
    if not gate:
        return _not_applicable("gpu_throttle", value)
    return _row("gpu_throttle", value, summary.get("samples_throttled") == 0)


def gpu_rows(health: GpuAssessment | None, fail_on_throttle: bool) -> list[Criterion]:
    """The three GPU rows, in ``GPU_ROWS`` order, from ``assess_gpu(...)``."""
    if health is None:
        return [_not_applicable(name, "no GPU health record") for name in GPU_ROWS]
    if not health.available:
        return [_not_applicable(name, f"not observable: {health.reason}") for name in GPU_ROWS]
    return [_xid_row(health), _ecc_row(health), _throttle_row(health, fail_on_throttle)]


def died_after_xid(health: GpuAssessment | None, trainer_returncode: int | None) -> bool:
    """A critical XID arrived during the run and the trainer did not exit 0 (it crashed, or hung and
    was killed): the card explains the end."""
    return health is not None and bool(health.xid_events) and trainer_returncode != 0


def _when(event: Mapping[str, Any]) -> str:
    wall = event.get("wall")
    stamp = (
        datetime.fromtimestamp(float(wall), tz=UTC).strftime(" (%Y-%m-%dT%H:%M:%SZ)")
        if isinstance(wall, int | float)
        else ""
    )
    return f"between t={event.get('after_t')} s and t={event.get('t')} s{stamp}"


def xid_text(value: Mapping[str, Any]) -> str:
    """The ``gpu_xid_errors`` row's failure in one clause: the XID number, the GPU and the time."""
    events = value.get("events") or []
    if events:
        first = events[0]
        text = f"critical XID {first.get('xid')} on GPU {first.get('index')} ({first.get('uuid')}) {_when(first)}"
        others = ", ".join(
            f"XID {e.get('xid')} on GPU {e.get('index')} by t={e.get('t')} s" for e in events[1:4]
        )
        return text + (f"; also {others}" if others else "") + (" ..." if len(events) > 4 else "")
    errors = value.get("event_errors") or []
    first_error = errors[0] if errors else {}
    return f"the XID event wait failed at t={first_error.get('t')} s: {first_error.get('error')}"


def ecc_text(value: Mapping[str, Any]) -> str:
    """The ``gpu_ecc_uncorrected`` row's failure in one clause."""
    rose = [
        f"GPU {gpu}: {e['start']} -> {e['start'] + e['increase']}"
        + (f" (first seen at t={e['first_increase_t']} s)" if e.get("first_increase_t") is not None else "")
        for gpu, e in value.items()
        if isinstance(e, Mapping) and _count(e.get("increase")) is not None and e["increase"] > 0
    ]
    return "volatile uncorrected ECC errors rose over the run: " + "; ".join(rose)


def throttle_text(value: Mapping[str, Any]) -> str:
    """The ``gpu_throttle`` row's failure (under the gate) in one clause."""
    share = value.get("share") or 0.0
    reasons = ", ".join(value.get("reasons") or {})
    return (
        f"GPU clocks held down in {100.0 * share:.1f} % of samples "
        f"({value.get('samples_throttled')} of {value.get('samples_judged')}): {reasons}"
    )


def annotate_drift(drift: Mapping[str, Any], throttle: Mapping[str, Any] | None) -> dict[str, Any]:
    """The throughput drift record, its reason saying so when it is ``declining`` and a throttle
    episode overlaps its window (the decline then may be the card's, not the trainer's)."""
    window = drift.get("window") or {}
    t0, t1 = window.get("t_start"), window.get("t_end")
    if drift.get("verdict") != "declining" or not throttle or t0 is None or t1 is None:
        return dict(drift)
    overlap = [e for e in throttle.get("episodes") or [] if e["t_end"] >= t0 and e["t_start"] <= t1]
    if not overlap:
        return dict(drift)
    gpus = ", ".join(str(g) for g in sorted({e["index"] for e in overlap}))
    reasons = ", ".join(sorted({r for e in overlap for r in e["reasons"]}))
    first = min(e["t_start"] for e in overlap)
    note = (
        f"; GPU throttling coincides with the decline: {reasons} on GPU {gpus} from t={first:.1f} s, "
        f"inside the trend window {t0:.1f}-{t1:.1f} s"
    )
    return {**drift, "reason": str(drift.get("reason")) + note}
