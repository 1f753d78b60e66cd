"""GPU health over one soak (foundation.gpu_health): started before the command is spawned, because NVML
delivers only the XID events that happen after registration; read once per sample; the end counters and a
last drain of XID events after the loop.

Each XID event is timed by the drains around it: it arrived after ``after_t`` and by ``t`` (seconds since
the spawn, like the samples' ``t``). The watch keeps every event, including those drained by a sample the
loop then discards (the root had exited) and by the last drain, so the artifact's list is complete even
where the samples' lists are not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from soakbench.foundation.gpu_health import GpuHealthReader


@dataclass
class GpuWatch:
    """The GPU health of one run; ``t0`` is the spawn time (monotonic), set once the command starts."""

    reader: GpuHealthReader
    start: dict[str, Any]
    registered_mono: float
    t0: float | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    event_errors: list[dict[str, Any]] = field(default_factory=list)
    last_t: float | None = None

    @classmethod
    def begin(cls, cuda_visible_devices: str | None, nvml: Any | None = None) -> GpuWatch:
        """Register for XID events and read the starting counters now (before the spawn)."""
        reader = GpuHealthReader(nvml, cuda_visible_devices)
        start = reader.start()
        return cls(reader, start, time.monotonic())

    def _since_spawn(self, now: float) -> float:
        return round(now - (self.t0 if self.t0 is not None else self.registered_mono), 3)

    def _timed(
        self, events: list[dict[str, Any]], error: str | None, now: float, wall: float
    ) -> list[dict[str, Any]]:
        """The drained events with the interval they arrived in, kept; a failed wait kept too."""
        t = self._since_spawn(now)
        after = self.last_t if self.last_t is not None else self._since_spawn(self.registered_mono)
        timed = [{**event, "after_t": after, "t": t, "wall": round(wall, 3)} for event in events]
        self.events.extend(timed)
        if error is not None:
            self.event_errors.append({"t": t, "error": error})
        self.last_t = t
        return timed

    def sample(self, now: float, wall: float) -> dict[str, Any]:
        """The sample's ``gpu_health`` record (foundation.gpu_health ``sample()``, events timed)."""
        record = self.reader.sample()
        record["xid_events"] = self._timed(record["xid_events"], record["event_error"], now, wall)
        return record

    def finish(self, now: float, wall: float) -> dict[str, Any]:
        """Drain the last events, read the end counters, close NVML; the artifact's raw ``gpu_health``."""
        self._timed(*self.reader.drain(), now, wall)
        end = {d["uuid"]: d["counters"] for d in self.reader.end_counters()}
        self.reader.close()
        devices = [
            {
                "index": d["index"],
                "uuid": d["uuid"],
                "name": d["name"],
                "xid_events": d["xid_events"],
                "start": d["counters"],
                "end": end.get(d["uuid"]),
                "at_start": {k: d["reading"][k] for k in ("clock_event_reasons", "temperature_c")},
            }
            for d in self.start["devices"]
        ]
        return {
            "available": self.start["available"],
            "reason": self.start["reason"],
            "cuda_visible_devices": self.start["cuda_visible_devices"],
            "devices": devices,
            "xid_events": self.events,
            "event_errors": self.event_errors,
        }

    def close(self) -> None:
        self.reader.close()


def at_start(section: dict[str, Any] | None) -> dict[str, Any] | None:
    """The run context's ``gpu.health_at_start`` from ``finish()``'s section (the reading taken when the
    run started); None without a section."""
    if section is None:
        return None
    devices = [{"index": d["index"], "uuid": d["uuid"], **d["at_start"]} for d in section["devices"]]
    return {"available": section["available"], "reason": section["reason"], "devices": devices}
