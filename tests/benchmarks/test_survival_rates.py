"""The survival benchmark's own arithmetic: a slower read cadence emulated from a recorded one."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def rates(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the scripts import their siblings by name
    return importlib.import_module("survival_rates")


def test_thinning_keeps_every_kth_read_and_holds_its_level(rates: ModuleType):
    """Reads every 3rd sample, thinned by 2: every 6th sample is a read, each level held until the
    next kept read, so the level only ever shows values the kept reads saw."""
    t = np.arange(12.0) * 5.0
    read = np.zeros(12, dtype=bool)
    read[::3] = True
    x = np.repeat([10.0, 20.0, 30.0, 40.0], 3)
    series = rates.Healthy("pss", "stream", t, x, read)
    thin = rates.thinned(series, 2)
    assert np.flatnonzero(thin.read).tolist() == [0, 6]
    assert thin.x.tolist() == [10.0] * 6 + [30.0] * 6
    assert rates.thinned(series, 1) is series
    counts = rates.Healthy("fds", "stream:1", t, np.arange(12.0), np.ones(12, dtype=bool))
    assert rates.thinned(counts, 4) is counts
