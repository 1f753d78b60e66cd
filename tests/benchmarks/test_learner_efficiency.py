"""benchmarks/learner_efficiency.py: the largest matrix product is found by its FLOP, and a real
measurement of the SAC learner gives consistent figures (no speed is asserted)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "learner_efficiency.py"


@pytest.fixture(scope="module")
def le() -> ModuleType:
    spec = importlib.util.spec_from_file_location("learner_efficiency", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["learner_efficiency"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_the_largest_product_is_chosen_by_flop_across_mm_addmm_and_bmm(le: ModuleType) -> None:
    def run() -> None:
        torch.mm(torch.randn(8, 16), torch.randn(16, 40))  # 2 * 8*16*40 = 10 240 FLOP
        torch.addmm(torch.zeros(30, 5), torch.randn(30, 40), torch.randn(40, 5))  # 12 000
        torch.bmm(torch.randn(3, 4, 8), torch.randn(3, 8, 50))  # 2 * 3*4*8*50 = 9 600

    assert le.largest_matmul_shape(run) == ("addmm.default", (1, 30, 40, 5))


def test_no_product_is_refused(le: ModuleType) -> None:
    with pytest.raises(SystemExit, match="no matrix product"):
        le.largest_matmul_shape(lambda: torch.ones(3) + 1)


def test_a_real_sac_measurement_is_consistent(le: ModuleType) -> None:
    torch.set_num_threads(1)
    row = le.measure("sac", updates=1, repeats=1)
    assert row.learner == "sac" and row.batch_size == 256
    assert row.flop_per_update > 1e8  # two critics and an actor at batch 256: hundreds of MFLOP
    assert row.achieved_gflops == pytest.approx(row.flop_per_update / row.ms_per_update / 1e6)
    assert row.efficiency == pytest.approx(row.achieved_gflops / row.limit_gflops)
    assert 0 < row.matmul_share < 1 and row.other_share == pytest.approx(1 - row.matmul_share)
    assert row.compile.startswith("none (")
    assert "sac" in le.table([row])
