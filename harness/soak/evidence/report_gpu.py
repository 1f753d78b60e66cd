"""The report's GPU health section: a table per GPU (counters at start and end, XID registration, the
state at start), the XID events, the throttle share, and one plot per GPU of clocks, temperature and power
over time with the throttle episodes and XID events marked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from soakbench.harness.soak.evidence.report_plots import png_data_uri
from soakbench.harness.soak.verdicts.gpu import xid_text

_SERIES = (  # sample field, label, axis (0: clocks, 1: temperature, 2: power), colour
    ("sm_clock_mhz", "SM clock (MHz)", 0, "#2563eb"),
    ("mem_clock_mhz", "memory clock (MHz)", 0, "#7c3aed"),
    ("temperature_c", "temperature (°C)", 1, "#d97706"),
    ("power_w", "power (W)", 2, "#059669"),
)


def shown(value: Any) -> str:
    """A figure as text: NVML's reason when it is not observable."""
    if isinstance(value, Mapping) and "not_observable" in value:
        return f"not observable ({value['not_observable']})"
    if isinstance(value, Mapping) and "names" in value:
        return ", ".join(value["names"]) or "none"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {shown(v)}" for k, v in value.items())
    return "—" if value is None else str(value)


def _device_row(device: Mapping[str, Any]) -> dict[str, str]:
    start, end = device.get("start") or {}, device.get("end") or {}

    def pair(key: str) -> str:
        return f"{shown(start.get(key))} → {shown(end.get(key))}"

    at_start = device.get("at_start") or {}
    return {
        "gpu": f"{device['index']}: {device['name']} ({device['uuid']})",
        "xid": "registered"
        if "registered" in (device.get("xid_events") or {})
        else shown(device.get("xid_events")),
        "ecc": pair("ecc_volatile"),
        "remapped": pair("remapped_rows"),
        "retired": pair("retired_pages"),
        "pcie": pair("pcie_replay_counter"),
        "at_start": f"{shown(at_start.get('temperature_c'))} °C, clock events: {shown(at_start.get('clock_event_reasons'))}",
    }


def _series(samples: Sequence[Mapping[str, Any]], index: int) -> dict[str, list[tuple[float, float]]]:
    found: dict[str, list[tuple[float, float]]] = {key: [] for key, *_ in _SERIES}
    for sample in samples:
        for reading in (sample.get("gpu_health") or {}).get("devices") or []:
            if reading.get("index") != index:
                continue
            for key in found:
                value = reading.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    found[key].append((float(sample["t"]), float(value)))
    return found


def gpu_plot(
    index: int,
    samples: Sequence[Mapping[str, Any]],
    episodes: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
) -> str | None:
    """PNG data URI: clocks (top), temperature and power (bottom) of GPU ``index``, throttle episodes
    shaded red and XID events as red lines; None when no sample read this GPU."""
    series = _series(samples, index)
    if not any(series.values()):
        return None
    from matplotlib.figure import Figure  # Figure API: no pyplot global state

    fig = Figure(figsize=(12.8, 4.6), layout="constrained")
    clocks, heat = fig.subplots(2, 1, sharex=True)
    power = heat.twinx()
    axes = (clocks, heat, power)
    missing = [label for key, label, *_ in _SERIES if not series[key]]
    title = f"GPU {index}: clocks, temperature and power (NVML)"
    clocks.set_title(
        title + (f" — no reading of {', '.join(missing)}" if missing else ""), fontsize=10, loc="left"
    )
    for key, label, axis, colour in _SERIES:
        points = series[key]
        axes[axis].plot([p[0] for p in points], [p[1] for p in points], color=colour, lw=1.2, label=label)
    _mark(
        clocks,
        heat,
        [e for e in episodes if e.get("index") == index],
        [e for e in events if e.get("index") == index],
    )
    clocks.set_ylabel("MHz", fontsize=8)
    heat.set_ylabel("°C", fontsize=8)
    power.set_ylabel("W", fontsize=8)
    heat.set_xlabel("time since monitor start (s)", fontsize=8)
    for ax in axes:
        ax.tick_params(labelsize=8)
    for ax in (clocks, heat):
        ax.grid(alpha=0.3)
    clocks.legend(fontsize=7, loc="lower left", framealpha=0.8)
    heat.legend(fontsize=7, loc="upper left", framealpha=0.8)
    power.legend(fontsize=7, loc="upper right", framealpha=0.8)
    return png_data_uri(fig)


def _mark(
    clocks: Any, heat: Any, episodes: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]
) -> None:
    """Throttle episodes as red bands and XID events as red lines, on both axes (labelled once)."""
    for number, episode in enumerate(episodes):
        t0, t1 = float(episode["t_start"]), float(episode["t_end"])
        label = "throttle: " + ", ".join(episode["reasons"]) if number == 0 else None
        for ax in (clocks, heat):
            ax.axvspan(
                t0,
                max(t1, t0 + 1e-3),
                color="#dc2626",
                alpha=0.15,
                lw=0,
                label=label if ax is clocks else None,
            )
    for event in events:
        for ax in (clocks, heat):
            ax.axvline(
                float(event["t"]),
                color="#dc2626",
                lw=1.5,
                label=f"XID {event['xid']}" if ax is clocks else None,
            )


def gpu_view(artifact: Mapping[str, Any], samples: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What the report's GPU section shows; None for an artifact written before the section existed."""
    section = artifact.get("gpu_health")
    if not isinstance(section, Mapping):
        return None
    if not section["available"]:
        return {"available": False, "reason": section["reason"]}
    throttle = section["throttle"]
    share = throttle["share"]
    events = section["xid_events"]
    return {
        "available": True,
        "rows": [_device_row(d) for d in section["devices"]],
        "xid": xid_text({"events": events, "event_errors": section["event_errors"]})
        if events or section["event_errors"]
        else None,
        "throttle": "no sample read a clock-event reasons mask"
        if share is None
        else f"{100.0 * share:.1f} % of {throttle['samples_judged']} samples with a thermal, power-brake or "
        f"hardware-slowdown clock event ({', '.join(throttle['reasons']) or 'none'})"
        + (" — fails the run (--fail-on-gpu-throttle)" if section["fails_on_throttle"] else " — information"),
        "plots": [
            {"index": d["index"], "src": src}
            for d in section["devices"]
            if (src := gpu_plot(d["index"], samples, throttle["episodes"], events)) is not None
        ],
    }
