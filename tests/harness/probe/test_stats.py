"""Pure probe logic: statistics, per-iteration phase accounting, transfers vs inventory, acceptance rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from soakbench.harness.probe.stats import (
    PROBE_PHASES,
    counter_delta,
    efficiency,
    idle_verdict,
    interleaved_efficiency,
    per_iteration_phase_ms,
    phase_report,
    profiler_env_violations,
    split_blocks,
    summarize_ms,
    throughput,
    transfer_report,
)
from soakbench.runtime.backends.contract import TransferCount


def test_summarize_known_values() -> None:
    s = summarize_ms([4.0, 1.0, 3.0, 2.0])
    assert s["count"] == 4 and s["total_ms"] == 10.0 and s["mean_ms"] == 2.5
    assert s["median_ms"] == 2.5 and s["min_ms"] == 1.0 and s["max_ms"] == 4.0
    assert s["p95_ms"] == 4.0
    assert summarize_ms(list(range(1, 101)))["p95_ms"] == 95  # nearest rank


@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=1, max_size=200))
def test_summary_order_invariants(samples: list[float]) -> None:
    s = summarize_ms(samples)
    assert s["min_ms"] <= s["median_ms"] <= s["max_ms"]
    assert s["min_ms"] <= s["p95_ms"] <= s["max_ms"]
    assert s["min_ms"] - 1e-9 <= s["mean_ms"] <= s["max_ms"] + 1e-9


def test_summarize_rejects_empty() -> None:
    with pytest.raises(ValueError):
        summarize_ms([])


def test_per_iteration_accounting_fills_skipped_phases_with_zero() -> None:
    samples = [
        {"physics_exchange": [2.0], "update_state": [0.5], "reset_selection": [0.1]},
        {
            "physics_exchange": [2.0],
            "update_state": [0.5],
            "reset_selection": [0.1],
            "backend_reset": [1.0, 0.5],
        },
    ]
    per = per_iteration_phase_ms(samples)
    assert set(per) == set(PROBE_PHASES)
    assert all(len(v) == 2 for v in per.values())
    assert per["backend_reset"] == [0.0, 1.5]
    assert per["reset_publication"] == [0.0, 0.0]


def test_unknown_phase_is_an_error_not_dropped() -> None:
    with pytest.raises(ValueError, match="unknown phases"):
        per_iteration_phase_ms([{"physics_exchange": [1.0], "mystery": [1.0]}])


def test_phase_report_blocks_and_residual() -> None:
    iteration = [3.0, 5.0]
    per = {p: [0.0, 0.0] for p in PROBE_PHASES}
    per["physics_exchange"] = [2.0, 3.0]
    report = phase_report(iteration, per, {"physics_exchange": 2})
    assert set(report) == {f"{p}_ms" for p in PROBE_PHASES} | {"iteration_ms", "unattributed_ms"}
    assert report["physics_exchange_ms"]["invocations"] == 2
    assert report["physics_exchange_ms"]["share_of_iteration"] == pytest.approx(5.0 / 8.0)
    assert report["unattributed_ms"]["total_ms"] == pytest.approx(3.0)
    with pytest.raises(ValueError):
        phase_report([1.0], {"physics_exchange": [1.0, 2.0]}, {})


def test_throughput_and_efficiency() -> None:
    assert throughput(64, [10.0, 10.0]) == pytest.approx(6400.0)
    # limit 40k physics steps/s at decimation 4 = 10k control steps/s; 8k achieved -> 0.8
    assert efficiency(8000.0, 40000.0, 4) == pytest.approx(0.8)
    with pytest.raises(ValueError):
        efficiency(1.0, 0.0, 4)
    with pytest.raises(ValueError):
        throughput(1, [0.0])


@given(st.integers(1, 500), st.integers(1, 20))
def test_split_blocks_covers_total_evenly(total: int, blocks: int) -> None:
    sizes = split_blocks(total, blocks)
    assert sum(sizes) == total and len(sizes) == min(blocks, total)
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def test_interleaved_efficiency_is_the_median_round() -> None:
    # 64 envs, decimation 4. Round env rates: 6400, 3200, 6400 control steps/s; limit rates 40k, 40k, 20k
    # physics steps/s (10k, 10k, 5k control steps/s) -> per-round ratios 0.64, 0.32, 1.28 -> median 0.64.
    rounds = [([10.0, 10.0], 40_000, 1.0), ([20.0, 20.0], 20_000, 0.5), ([10.0], 10_000, 0.5)]
    out = interleaved_efficiency(64, 4, rounds)
    assert [r["efficiency"] for r in out["rounds"]] == pytest.approx([0.64, 0.32, 1.28])
    assert out["rounds"][1]["env_control_steps_per_s"] == pytest.approx(3200.0)
    assert out["rounds"][2]["physics_steps_per_s"] == pytest.approx(20_000.0)
    assert out["efficiency"] == pytest.approx(0.64)
    with pytest.raises(ValueError):
        interleaved_efficiency(64, 4, [])
    with pytest.raises(ValueError):
        interleaved_efficiency(64, 4, [([1.0], 10, 0.0)])


INVENTORY = [
    {"phase": "physics_exchange", "direction": "d2h", "max_per_control_step": 1, "description": "ctrl"},
    {"phase": "physics_exchange", "direction": "h2d", "max_per_control_step": 1, "description": "state"},
]


def test_counter_delta() -> None:
    before: dict[str, TransferCount] = {"h2d/physics_exchange": {"count": 1, "bytes": 10}}
    after: dict[str, TransferCount] = {
        "h2d/physics_exchange": {"count": 3, "bytes": 30},
        "d2h/backend_reset": {"count": 1, "bytes": 4},
    }
    assert counter_delta(before, after) == {
        "d2h/backend_reset": {"count": 1, "bytes": 4},
        "h2d/physics_exchange": {"count": 2, "bytes": 20},
    }


def test_transfers_within_inventory() -> None:
    step: dict[str, TransferCount] = {
        "d2h/physics_exchange": {"count": 1, "bytes": 8},
        "h2d/physics_exchange": {"count": 1, "bytes": 16},
    }
    report = transfer_report(INVENTORY, [step, step])
    assert report["within_inventory"] is True and report["undeclared"] == []
    assert report["inventory"][1]["measured_total_bytes"] == 32


def test_transfers_over_limit_and_undeclared_fail() -> None:
    over: dict[str, TransferCount] = {"d2h/physics_exchange": {"count": 2, "bytes": 8}}
    assert transfer_report(INVENTORY, [over])["within_inventory"] is False
    stray: dict[str, TransferCount] = {"h2d/update_state": {"count": 1, "bytes": 4}}
    report = transfer_report(INVENTORY, [stray])
    assert report["undeclared"] == ["h2d/update_state"] and report["within_inventory"] is False
    # a device-plane backend declares nothing and must copy nothing
    assert transfer_report([], [{}])["within_inventory"] is True
    with pytest.raises(ValueError, match="twice"):
        transfer_report(INVENTORY + INVENTORY[:1], [])


def test_profiler_env_detection() -> None:
    env = {"PATH": "/bin", "NSYS_PROFILING_SESSION_ID": "1", "CUDA_LAUNCH_BLOCKING": "", "HOME": "/h"}
    assert profiler_env_violations(env) == ["CUDA_LAUNCH_BLOCKING", "NSYS_PROFILING_SESSION_ID"]
    assert profiler_env_violations({"CUDA_VISIBLE_DEVICES": "0"}) == []


def _snap(used: int, pids: list[int], available: bool = True) -> dict[str, object]:
    if not available:
        return {"available": False, "reason": "NVML initialisation failed: x", "driver": None, "devices": []}
    return {
        "available": True,
        "reason": None,
        "driver": "1",
        "devices": [
            {
                "index": 0,
                "uuid": "GPU-a",
                "name": "H200",
                "driver": "1",
                "used_bytes": used,
                "total_bytes": 10**11,
                "processes": [{"pid": p, "used_bytes": 1, "kind": "compute"} for p in pids],
            }
        ],
    }


def test_idle_verdicts() -> None:
    assert idle_verdict(_snap(100, []), 1000)["idle"] is True
    busy = idle_verdict(_snap(100, [42]), 1000)
    assert busy["idle"] is False and "[42]" in busy["reasons"][0]
    full = idle_verdict(_snap(5000, []), 1000)
    assert full["idle"] is False and "threshold" in full["reasons"][0]
    none = idle_verdict(_snap(0, [], available=False), 1000)
    assert none["idle"] is False and "no NVML evidence" in none["reasons"][0]


def test_host_contention_from_proc_stat_and_rusage() -> None:
    from soakbench.harness.probe.host import HostSample, busy_seconds, contention_block

    stat = "cpu  100 20 30 400 50 5 5 7 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"
    assert busy_seconds(stat, 100) == pytest.approx((100 + 20 + 30 + 5 + 5) / 100)
    with pytest.raises(ValueError):
        busy_seconds("intr 1\n", 100)
    start = HostSample(monotonic_s=0.0, loadavg=(1.0, 1.0, 1.0), busy_cpu_s=10.0, own_cpu_s=1.0)
    end = HostSample(monotonic_s=10.0, loadavg=(2.0, 1.5, 1.0), busy_cpu_s=25.0, own_cpu_s=6.0)
    block = contention_block(start, end, 2, {"available": False, "reason": "no driver"})
    assert (block["host_busy_cpu_s"], block["probe_cpu_s"], block["other_cpu_s"]) == (15.0, 5.0, 10.0)
    assert block["other_cpu_share"] == pytest.approx(0.5) and block["cpu_reason"] is None
    blind = contention_block(start, HostSample(10.0, None, None, 6.0), 2, {"available": False})
    assert blind["other_cpu_s"] is None and blind["loadavg_end"] is None and blind["cpu_reason"]
