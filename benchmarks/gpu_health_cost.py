"""What the GPU health reading adds to one soak sample, measured with the fake NVML.

Times ``harness.soak.host.gpu_watch.GpuWatch.sample`` (the per-sample part: SM and memory clocks, the
clock-event reasons, temperature, power, the uncorrected ECC count, and one 0 ms XID event wait) over the
fake NVML of tests/harness/fake_nvml.py with 1, 2 and 8 GPUs, and prints the per-sample time. The fake
answers from Python objects, so this is the monitor's own cost per sample (bookkeeping and the NVML
binding's call overhead), not the driver's: a real NVML query is an ioctl into the kernel driver and
costs more; that part is not measured here (no GPU on the host this was written on). Not a test: nothing
is asserted.

    uv run --frozen python benchmarks/gpu_health_cost.py [--samples 5000] [--gpus 1,2,8]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path
from typing import Any

from soakbench.harness.soak.host.gpu_watch import GpuWatch
from soakbench.harness.soak.loop.overhead import percentile

FAKE = Path(__file__).resolve().parents[1] / "tests" / "harness" / "fake_nvml.py"


def _fake_module() -> Any:
    spec = importlib.util.spec_from_file_location("_soakbench_fake_nvml", FAKE)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {FAKE}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def measure(gpus: int, samples: int) -> dict[str, Any]:
    """Per-sample time of the GPU health reading over ``gpus`` fake GPUs, ``samples`` times."""
    fake = _fake_module()
    nvml = fake.FakeNvml([fake.FakeDevice(f"GPU-{i}", "fake", 0, 1, reasons=0x60) for i in range(gpus)])
    watch = GpuWatch.begin(None, nvml)
    watch.t0 = time.monotonic()
    times_us: list[float] = []
    for _ in range(samples):
        started = time.perf_counter()
        watch.sample(time.monotonic(), time.time())
        times_us.append((time.perf_counter() - started) * 1e6)
    watch.close()
    return {
        "gpus": gpus,
        "samples": samples,
        "us_p50": round(percentile(times_us, 50) or 0.0, 1),
        "us_p95": round(percentile(times_us, 95) or 0.0, 1),
        "us_max": round(max(times_us), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--gpus", default="1,2,8", help="comma-separated GPU counts")
    args = parser.parse_args()
    for count in (int(c) for c in args.gpus.split(",")):
        print(json.dumps(measure(count, args.samples)))


if __name__ == "__main__":
    main()
