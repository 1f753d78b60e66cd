"""A rank's identity from torchrun's environment, its own settings, and the launches refused before
anything is built (pure: no process group)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from soakbench.foundation.mps import MULTI_GPU_GATE
from soakbench.runtime.cli import check_run
from soakbench.runtime.config import ComposedConfig, ConfigError, PlatformFacts, compose
from soakbench.runtime.distributed import (
    RankIdentity,
    check_job_dir,
    check_placement,
    rank_device_mask,
    rank_identity,
    rank_overrides,
)

TORCHRUN = {
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "2",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "job-7",
    "TORCHELASTIC_RESTART_COUNT": "3",
}
TWO_RANKS = RankIdentity(rank=1, local_rank=1, world_size=2, local_world_size=2, run_id=None, restart_count=0)


def _facts(gpus: int) -> PlatformFacts:
    return PlatformFacts(
        system="Linux", cuda_available=gpus > 0, cuda_device_count=gpus, hip_build=False, mps_available=False
    )


def test_torchrun_environment_gives_the_rank() -> None:
    assert rank_identity(TORCHRUN) == RankIdentity(
        rank=1, local_rank=1, world_size=2, local_world_size=2, run_id="job-7", restart_count=3
    )


def test_no_rank_variables_is_a_single_process_even_with_a_host_wide_master_address() -> None:
    assert rank_identity({}) is None
    assert rank_identity({"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}) is None


def test_a_job_of_one_rank_is_the_single_process_run() -> None:
    one = TORCHRUN | {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}
    assert rank_identity(one) is None


@pytest.mark.parametrize("dropped", ["RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"])
def test_world_size_without_the_other_launch_variables_is_refused_naming_them(dropped: str) -> None:
    env = {k: v for k, v in TORCHRUN.items() if k != dropped}
    with pytest.raises(ConfigError, match=f"without {dropped}") as err:
        rank_identity(env)
    assert err.value.key == dropped
    assert "torchrun --nproc-per-node" in str(err.value)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"RANK": "two"}, "RANK"),
        ({"RANK": "2"}, "RANK"),
        ({"LOCAL_RANK": "2"}, "LOCAL_RANK"),
        ({"LOCAL_WORLD_SIZE": "3"}, "LOCAL_RANK"),
        ({"TORCHELASTIC_RESTART_COUNT": "x"}, "TORCHELASTIC_RESTART_COUNT"),
    ],
)
def test_inconsistent_launch_variables_are_refused(change: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        rank_identity(TORCHRUN | change)
    assert err.value.key == key


def test_rank_overrides_give_each_rank_its_folder_seed_and_share_of_the_cores(tmp_path: Path) -> None:
    cfg = compose("sac", "g1_walk_flat", "mujoco", [f"log_dir={tmp_path / 'job'}", "seed=7"])
    assert rank_overrides(TWO_RANKS, cfg, cores=8) == [
        f"log_dir={tmp_path / 'job' / 'rank-1'}",
        "seed=8",
        "training.physics_threads=4",
        "training.learner_threads=4",
    ]
    mine = compose("sac", "g1_walk_flat", "mujoco", [f"log_dir={tmp_path}", "training.physics_threads=3"])
    assert "training.physics_threads=4" not in rank_overrides(TWO_RANKS, mine, cores=8)


def test_a_job_folder_with_anything_but_rank_folders_is_refused(tmp_path: Path) -> None:
    (tmp_path / "rank-0").mkdir()
    check_job_dir(tmp_path, restart_count=0)  # a peer's folder, already made, is expected
    (tmp_path / "run_summary.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"run_summary\.json") as err:
        check_job_dir(tmp_path, restart_count=0)
    assert err.value.key == "log_dir"


def test_a_job_folder_that_cannot_be_listed_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: Path) -> None:  # root lists any folder, so the refusal is simulated here
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", refuse)
    with pytest.raises(ConfigError, match=r"cannot be listed: .*Permission denied") as err:
        check_job_dir(tmp_path, restart_count=0)
    assert err.value.key == "log_dir"


def test_the_master_port_and_counts_must_be_whole_numbers() -> None:
    with pytest.raises(ConfigError, match=r"MASTER_PORT='abc'") as err:
        rank_identity(TORCHRUN | {"MASTER_PORT": "abc"})
    assert err.value.key == "MASTER_PORT"
    with pytest.raises(ConfigError, match="not a TCP port"):
        rank_identity(TORCHRUN | {"MASTER_PORT": "70000"})
    with pytest.raises(ConfigError, match="TORCHELASTIC_RESTART_COUNT='-1'"):
        rank_identity(TORCHRUN | {"TORCHELASTIC_RESTART_COUNT": "-1"})


def test_a_cpu_learner_needs_no_device_per_rank() -> None:
    check_placement(TWO_RANKS, "cpu", None, _facts(0))


def test_more_cuda_ranks_than_devices_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"2 ranks on this node .* 1 visible CUDA device") as err:
        check_placement(TWO_RANKS, "cuda", None, _facts(1))
    assert err.value.key == "LOCAL_WORLD_SIZE"
    check_placement(TWO_RANKS, "cuda", None, _facts(2))


def test_mps_with_ranks_on_several_gpus_keeps_the_multi_gpu_gate() -> None:
    with pytest.raises(
        ConfigError, match=r"single_task_multi_gpu topology, which is parsed but not supported"
    ) as err:
        check_placement(TWO_RANKS, "cuda", "mps", _facts(2))
    assert err.value.key == "training.cuda_process_sharing"


def test_each_rank_sees_its_own_device_of_the_visible_ones() -> None:
    assert rank_device_mask(TWO_RANKS, {}) == "1"
    assert rank_device_mask(TWO_RANKS, {"CUDA_VISIBLE_DEVICES": "GPU-a, GPU-b"}) == "GPU-b"


def test_an_injected_fault_fires_only_on_its_rank(tmp_path: Path) -> None:
    faults = ["training.test_fault=learner_exception", "training.test_fault_rank=0", f"log_dir={tmp_path}"]
    cfg = compose("sac", "g1_walk_flat", "mujoco", faults)
    assert "training.test_fault=null" in rank_overrides(TWO_RANKS, cfg, cores=2)
    rank0 = RankIdentity(rank=0, local_rank=0, world_size=2, local_world_size=2, run_id=None, restart_count=0)
    assert "training.test_fault=null" not in rank_overrides(rank0, cfg, cores=2)


def test_a_restarted_attempt_gets_its_own_folder_beside_the_earlier_ones(tmp_path: Path) -> None:
    restarted = RankIdentity(
        rank=1, local_rank=1, world_size=2, local_world_size=2, run_id="r", restart_count=2
    )
    (tmp_path / "rank-0").mkdir()
    (tmp_path / "attempt-1").mkdir()
    (tmp_path / "run_summary.json").write_text("{}")  # the failed attempt's job summary
    cfg = compose("sac", "g1_walk_flat", "mujoco", [f"log_dir={tmp_path}"])
    assert rank_overrides(restarted, cfg, cores=2)[0] == f"log_dir={tmp_path / 'attempt-2' / 'rank-1'}"
    assert restarted.job_directory(restarted.directory(tmp_path)) == tmp_path
    check_job_dir(tmp_path, restart_count=2)
    with pytest.raises(ConfigError, match="attempt-1"):
        check_job_dir(tmp_path, restart_count=0)  # a first attempt in a folder of earlier ones is refused


def _cuda_job(tmp_path: Path, *overrides: str) -> ComposedConfig:
    return compose("sac", "g1_walk_flat", "mujoco", [f"log_dir={tmp_path / 'job'}", *overrides])


def test_a_rank_of_a_cuda_job_on_two_visible_gpus_passes_and_gets_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each rank sees every device of the node until it is given its own: the single-process rule
    # (one visible GPU) must not refuse it
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b")
    run_cfg = check_run(_cuda_job(tmp_path), _facts(2), TWO_RANKS)
    assert run_cfg.resolved.learner_device == "cuda"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-b"


def test_a_single_process_on_two_visible_gpus_is_still_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"2 CUDA devices are visible; a single-process run is single-GPU"):
        check_run(_cuda_job(tmp_path), _facts(2), None)


def test_a_rank_without_a_device_of_its_own_is_refused_before_its_folder_is_checked(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "stray").write_text("x")  # the folder check would refuse this job too
    with pytest.raises(ConfigError, match=r"2 ranks on this node .* 1 visible CUDA device") as err:
        check_run(_cuda_job(tmp_path), _facts(1), TWO_RANKS)
    assert err.value.key == "LOCAL_WORLD_SIZE"


def test_one_rank_per_node_on_a_node_with_two_gpus_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --nnodes 2 --nproc-per-node 1: LOCAL_WORLD_SIZE 1, and still a rank, not a single-process run
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # recorded, so the rank's mask is undone after the test
    one_per_node = RankIdentity(
        rank=1, local_rank=0, world_size=2, local_world_size=1, run_id=None, restart_count=0
    )
    assert check_run(_cuda_job(tmp_path), _facts(2), one_per_node).resolved.learner_device == "cuda"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"


def test_a_rank_whose_physics_is_on_cuda_gets_its_own_device_with_a_cpu_learner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # recorded, so the rank's mask is undone after the test
    overrides = [f"log_dir={tmp_path / 'job'}", "training.learner_device=cpu"]
    cfg = compose("flashsac", "g1_motion_tracking", "mjwarp", overrides)
    with pytest.raises(ConfigError, match="2 ranks on this node"):
        check_run(cfg, _facts(1), TWO_RANKS)
    assert check_run(cfg, _facts(2), TWO_RANKS).resolved.learner_device == "cpu"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"


def test_the_multi_gpu_gate_of_mps_refuses_before_any_daemon_is_looked_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from soakbench.foundation import mps

    def no_lookup(*args: object, **kwargs: object) -> None:
        raise AssertionError("the MPS daemon was looked up before the multi-GPU gate refused")

    monkeypatch.setattr(mps, "resolve_for_training", no_lookup)
    cfg = _cuda_job(tmp_path, "training.cuda_process_sharing=mps")
    with pytest.raises(ConfigError, match=r"single_task_multi_gpu topology, which is parsed but not") as err:
        check_run(cfg, _facts(2), TWO_RANKS)
    assert err.value.key == "training.cuda_process_sharing"
    assert MULTI_GPU_GATE in str(err.value)
