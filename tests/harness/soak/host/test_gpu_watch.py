"""harness.soak.host.gpu_watch over the fake NVML: events timed by the drains around them, every event
kept (also those of a discarded sample and of the last drain), start and end counters side by side."""

from __future__ import annotations

from soakbench.harness.soak.host.gpu_watch import GpuWatch
from tests.harness import fake_nvml as fake


def test_watch_times_events_keeps_all_of_them_and_reads_the_end_counters() -> None:
    nvml = fake.FakeNvml([fake.FakeDevice("GPU-a", "NVIDIA H200", 0, 1)])
    watch = GpuWatch.begin("0", nvml)
    watch.t0 = watch.registered_mono
    first = watch.sample(watch.t0 + 1.0, 1000.0)
    nvml.post_xid(nvml.devices[0], 48)
    second = watch.sample(watch.t0 + 2.0, 1001.0)  # say the loop discards this one: the root had exited
    nvml.post_xid(nvml.devices[0], 79)
    nvml.devices[0].ecc_uncorrected = 4
    section = watch.finish(watch.t0 + 2.5, 1001.5)
    assert first["xid_events"] == []
    assert second["xid_events"] == [
        {"xid": 48, "index": 0, "uuid": "GPU-a", "after_t": 1.0, "t": 2.0, "wall": 1001.0}
    ]
    assert [(e["xid"], e["after_t"], e["t"]) for e in section["xid_events"]] == [
        (48, 1.0, 2.0),
        (79, 2.0, 2.5),
    ]
    device = section["devices"][0]
    assert device["start"]["ecc_volatile"]["uncorrected"] == 0
    assert device["end"]["ecc_volatile"]["uncorrected"] == 4
    assert device["at_start"] == {"clock_event_reasons": {"mask": 0, "names": []}, "temperature_c": 45}
    assert section["available"] is True and section["cuda_visible_devices"] == "0"
    assert nvml.shutdown_calls == 1
    watch.close()  # idempotent
    assert nvml.shutdown_calls == 1


def test_watch_without_nvml_is_unavailable_and_takes_no_reading() -> None:
    nvml = fake.FakeNvml([], fail={"nvmlInit": fake.NVMLError("Driver Not Loaded")})
    watch = GpuWatch.begin(None, nvml)
    record = watch.sample(watch.registered_mono + 1.0, 0.0)
    assert record["available"] is False and "Driver Not Loaded" in record["reason"]
    section = watch.finish(watch.registered_mono + 2.0, 0.0)
    assert section["available"] is False and section["devices"] == [] and section["xid_events"] == []
