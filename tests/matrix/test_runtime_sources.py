"""This runtime's cell sources name files that exist, and each cell's data are the assets its own task reads."""

from __future__ import annotations

from itertools import product
from pathlib import Path

import pytest

from soakbench.foundation.vocab import ALGOS
from soakbench.matrix.declared.runtime_facts import runtime_cell_sources, task_assets
from soakbench.matrix.model import CellKey
from soakbench.runtime.backends import BACKENDS
from soakbench.runtime.tasks import TASKS

REPO = Path(__file__).resolve().parents[2]
CELLS = [CellKey(a, t, b, "linux-cpu") for a, t, b in product(sorted(ALGOS), sorted(TASKS), sorted(BACKENDS))]


@pytest.mark.parametrize("key", CELLS, ids=lambda k: k.label())
def test_every_source_of_every_cell_exists(key: CellKey) -> None:
    sources = runtime_cell_sources(key)
    assert [e for e in sources.entries if not (REPO / e).is_file()] == []
    assert [d for d in sources.data if not (REPO / d).exists()] == []


def test_a_walk_cell_reads_no_motion_clip_and_a_tracking_cell_reads_its_own() -> None:
    walk = runtime_cell_sources(CellKey("sac", "g1_walk_flat", "mujoco", "linux-cpu")).data
    tracking = runtime_cell_sources(CellKey("sac", "g1_motion_tracking", "mujoco", "linux-cpu")).data
    assert not any(d.startswith("runtime/assets/motions") for d in walk)
    assert "runtime/assets/motions/g1/dance_wave.npz" in tracking
    assert "runtime/assets/robots/g1/" in walk and "runtime/assets/robots/g1/" in tracking


def test_an_owner_override_names_the_asset_a_run_reads(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "t.yaml").write_text(
        "task:\n  scene: robots/a/scene.xml\n  motion: motions/a.npz\n"
    )
    override = tmp_path / "sac" / "task" / "t"
    override.mkdir(parents=True)
    (override / "mujoco.yaml").write_text("task:\n  motion: motions/b.npz\n")
    key = CellKey("sac", "t", "mujoco", "linux-cpu")
    assert task_assets(key, tmp_path) == ("runtime/assets/motions/b.npz", "runtime/assets/robots/a/")
    assert task_assets(CellKey("sac", "t", "mjwarp", "linux-cpu"), tmp_path) == (
        "runtime/assets/motions/a.npz",
        "runtime/assets/robots/a/",
    )
