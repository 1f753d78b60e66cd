"""benchmarks/learning_parity.py: the pure curve logic, the budget overrides and the result schema."""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import asdict
from pathlib import Path
from types import ModuleType

import pytest

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "learning_parity.py"


@pytest.fixture(scope="module")
def lp() -> ModuleType:
    spec = importlib.util.spec_from_file_location("learning_parity", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["learning_parity"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def _windows(lp: ModuleType, lengths: list[float | None], counts: list[float] | None = None) -> list:
    counts = counts or [10.0] * len(lengths)
    return [
        lp.Window(env_steps=1000 * (i + 1), wall_s=2.0 * i, episode_count=c, episode_length_mean=v,
                  episode_reward_mean=None if v is None else v / 2, updates_total=float(10 * i))
        for i, (v, c) in enumerate(zip(lengths, counts, strict=True))
    ]  # fmt: skip


def test_weighted_mean_weights_by_episode_count_and_skips_empty_windows(lp: ModuleType) -> None:
    windows = _windows(lp, [100.0, 400.0, None], counts=[3.0, 1.0, 0.0])
    assert lp.weighted_mean(windows, "episode_length_mean") == pytest.approx((300 + 400) / 4)
    assert lp.weighted_mean(_windows(lp, [None]), "episode_length_mean") is None


def test_first_crossing_uses_the_running_mean_not_one_lucky_window(lp: ModuleType) -> None:
    windows = _windows(lp, [50.0, 950.0, 60.0, 900.0, 950.0, 990.0])
    assert lp.first_crossing(windows, 900.0, span=1) == lp.Crossing(2000, 2.0, 950.0)
    crossing = lp.first_crossing(windows, 900.0, span=3)
    assert (
        crossing is not None
        and crossing.env_steps == 6000
        and crossing.smoothed_length == pytest.approx(946.6667, rel=1e-4)
    )
    assert lp.first_crossing(windows, 1000.0, span=3) is None
    with pytest.raises(ValueError, match="span must be >= 1"):
        lp.smoothed_lengths(windows, 0)


def test_seed_summary_is_recomputed_from_the_windows(lp: ModuleType) -> None:
    windows = _windows(lp, [50.0, 60.0, 900.0, 980.0])
    summary = lp.seed_summary(windows, target=900.0, span=2, wall_s=8.0)
    assert summary["initial_episode_length_mean"] == pytest.approx(55.0)
    assert summary["final_episode_length_mean"] == pytest.approx(940.0)
    assert summary["env_steps"] == 4000 and summary["env_steps_per_s"] == pytest.approx(500.0)
    assert summary["updates_total"] == 30.0 and summary["updates_per_s"] == pytest.approx(3.75)
    assert summary["reached"] == {"env_steps": 4000, "wall_s": 6.0, "smoothed_length": pytest.approx(940.0)}


def test_the_budget_comes_from_the_options_and_a_recipe_may_not_override_it(
    lp: ModuleType, tmp_path: Path
) -> None:
    got = lp.train_overrides(2048, 10_260_480, tmp_path / "s0", 3, ("algo.batch_size=1024",))
    assert got[:4] == [
        "algo.num_envs=2048",
        "algo.max_iterations=5010",
        f"log_dir={tmp_path / 's0'}",
        "seed=3",
    ]
    assert got[-1] == "algo.batch_size=1024"
    with pytest.raises(ValueError, match=r"may not override algo\.max_iterations, seed"):
        lp.train_overrides(32, 1000, tmp_path, 0, ("seed=1", "algo.max_iterations=9"))


def test_a_built_result_matches_its_schema_and_a_broken_one_is_named(lp: ModuleType) -> None:
    recipe = lp.Recipe("sac", "g1_walk_flat", "mujoco", 32, 4000, ("algo.tau=0.02",), 900.0, 2)
    windows = _windows(lp, [50.0, 60.0, None, 980.0])
    seed = {"seed": 0, "run_dir": "/runs/seed0", "wall_s": 8.0, "checkpoints": [],
            "summary": lp.seed_summary(windows, 900.0, 2, 8.0), "windows": [asdict(w) for w in windows]}  # fmt: skip
    result = lp.build_result(recipe, [seed], {"source": {}, "host": {}, "software": {}})
    lp.validate_result(result)
    assert result["recipe"]["overrides"] == ["algo.tau=0.02"]
    del result["seeds"][0]["summary"]["reached"]
    result["recipe"]["num_envs"] = 0
    with pytest.raises(ValueError, match=r"recipe\.num_envs.*seeds\[0\]\.summary: 'reached' is a required"):
        lp.validate_result(result)


def test_an_unwritable_output_is_refused_before_any_training(lp: ModuleType, tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    app = typer.Typer()
    app.command()(lp.main)
    taken = tmp_path / "taken.json"
    taken.write_text("{}")
    for flag, value in (
        ("--out", tmp_path / "no" / "r.json"),
        ("--out", taken),
        ("--plot", tmp_path / "no" / "p.png"),
    ):
        args = [
            "--algo",
            "sac",
            "--task",
            "g1_walk_flat",
            "--runs-dir",
            str(tmp_path / "runs"),
            flag,
            str(value),
        ]
        if flag == "--plot":
            args += ["--out", str(tmp_path / "r.json")]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        assert flag in said and ("does not exist" in said or "exists; choose a new path" in said), said
        assert not (tmp_path / "runs").exists()  # nothing was trained


def test_only_the_last_checkpoints_are_evaluated_when_asked(lp: ModuleType) -> None:
    saved = ["ckpt_00001000.pt", "ckpt_00000500.pt", "ckpt_00001500.pt"]
    assert lp.checkpoints_to_evaluate(saved, 0, 1600) == [
        "ckpt_00000500.pt", "ckpt_00001000.pt", "ckpt_00001500.pt", "final.pt"
    ]  # fmt: skip
    assert lp.checkpoints_to_evaluate(saved, 2, 1600) == ["ckpt_00001500.pt", "final.pt"]
    assert lp.checkpoints_to_evaluate([], 3, 1600) == ["final.pt"]


def test_the_last_iterations_checkpoint_is_not_evaluated_twice(lp: ModuleType) -> None:
    saved = ["ckpt_00001000.pt", "ckpt_00000500.pt", "ckpt_00001500.pt"]
    # 1500 iterations: ckpt_00001500.pt and final.pt are the same policy
    assert lp.checkpoints_to_evaluate(saved, 0, 1500) == ["ckpt_00000500.pt", "ckpt_00001000.pt", "final.pt"]
    assert lp.checkpoints_to_evaluate(saved, 2, 1500) == ["ckpt_00001000.pt", "final.pt"]


RESULTS = sorted((PATH.parent / "results").glob("learning_parity_*.json"))


@pytest.mark.parametrize("result_path", RESULTS, ids=[p.name for p in RESULTS])
def test_a_committed_result_matches_its_schema_and_its_raw_windows(lp: ModuleType, result_path: Path) -> None:
    # the figures docs/learners.md quotes come from these summaries: each must be what its windows give
    result = json.loads(result_path.read_text())
    lp.validate_result(result)
    recipe = result["recipe"]
    for seed in result["seeds"]:
        windows = [lp.Window(**w) for w in seed["windows"]]
        recomputed = lp.seed_summary(
            windows, recipe["target_episode_length"], recipe["smoothing_windows"], seed["wall_s"]
        )
        assert seed["summary"] == recomputed, f"{result_path.name} seed {seed['seed']}"


def test_committed_results_exist() -> None:
    assert RESULTS, f"no learning-parity results under {PATH.parent / 'results'}"
