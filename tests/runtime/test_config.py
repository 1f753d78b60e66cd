"""Owner composition, inheritance and every class of validation error (pure, no physics)."""

from __future__ import annotations

from pathlib import Path

import pytest

from soakbench.runtime.config import (
    ConfigError,
    FlashSacConfig,
    PlatformFacts,
    compose,
    platform_blockers,
    process_sharing_environment,
    resolve_learner_device,
    validate_for_run,
)
from tests.runtime._platforms import LINUX_CPU, LINUX_CUDA, MACOS

# (algo, task, sim) -> (num_envs, max_iterations, updates_per_iteration) where an owner sets its own
# learning recipe (docs/learners.md); every other owner keeps the algo defaults (2048, 25000, 1).
OWNER_LEARNING_RECIPES = {
    ("sac", "g1_walk_flat", "mujoco"): (1024, 10020, 8),
    ("sac", "g1_walk_flat", "mjwarp"): (1024, 10020, 8),
    ("flashsac", "g1_motion_tracking", "mujoco"): (1024, 10020, 4),
}


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking"])
@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_every_owner_composes_with_its_defaults(algo: str, task: str, sim: str) -> None:
    cfg = compose(algo, task, sim)
    assert cfg.algo.name == algo and cfg.task.name == task
    assert cfg.training.sim_backend == sim
    learning_recipe = OWNER_LEARNING_RECIPES.get((algo, task, sim), (2048, 25000, 1))
    assert (cfg.algo.num_envs, cfg.algo.max_iterations, cfg.algo.updates_per_iteration) == learning_recipe
    assert cfg.training.inference_slot_capacity == 1 and cfg.training.replay_ingress_depth == 2
    assert cfg.training.replay_ingress_slot_rows is None
    assert cfg.resolved.replay_ingress_slot_rows == cfg.algo.num_envs
    assert cfg.training.collector_metrics_interval == (1 if sim == "mujoco" else 100)
    assert cfg.training.cuda_process_sharing is None


def test_the_flashsac_tracking_cpu_sizes_stay_on_the_mujoco_owner() -> None:
    def sizes(sim: str) -> tuple[int, int, int, int]:
        algo = compose("flashsac", "g1_motion_tracking", sim).algo
        assert isinstance(algo, FlashSacConfig)
        return (algo.batch_size, algo.critic_hidden_dim, algo.actor_hidden_dim, algo.learning_starts)

    assert sizes("mujoco") == (512, 128, 64, 4096)  # a CPU learner's sizes
    defaults = compose("flashsac", "g1_walk_flat", "mjwarp").algo  # an owner that sets no learner sizes
    assert isinstance(defaults, FlashSacConfig)
    paper = (
        defaults.batch_size,
        defaults.critic_hidden_dim,
        defaults.actor_hidden_dim,
        defaults.learning_starts,
    )
    assert sizes("mjwarp") == paper == (2048, 256, 128, 10000)


def test_mjwarp_owner_inherits_mujoco_owner() -> None:
    cfg = compose("flashsac", "g1_motion_tracking", "mjwarp")
    assert list(cfg.owner.chain) == ["mujoco", "mjwarp"]
    assert cfg.owner.files[-1].endswith("flashsac/task/g1_motion_tracking/mjwarp.yaml")
    assert compose("flashsac", "g1_motion_tracking", "mujoco").owner.chain == ["mujoco"]


def test_composed_config_is_read_only() -> None:
    cfg = compose("sac", "g1_walk_flat", "mujoco")
    with pytest.raises(Exception, match="read-only"):
        cfg.algo.num_envs = 3  # type: ignore[misc]  # the point: frozen at runtime too


def test_overrides_apply_with_yaml_types() -> None:
    cfg = compose(
        "sac",
        "g1_walk_flat",
        "mujoco",
        [
            "algo.num_envs=64",
            "training.replay_ingress_slot_rows=16",
            "training.no_play=true",
            "log_dir=/tmp/a",
        ],
    )
    assert cfg.algo.num_envs == 64 and cfg.resolved.replay_ingress_slot_rows == 16
    assert cfg.training.no_play is True and cfg.log_dir == "/tmp/a"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("training.sim_backend=mujoco", "set by the owner YAML"),
        ("algo.name=sac", "set by the owner YAML"),
        ("env.tensor_runtime=x", "was removed"),
        ("env.tensor_runtime_device=cuda", "was removed"),
        ("training.inference_slot_capacity=17", r"allowed: 1\.\.16"),
        ("training.inference_slot_capacity=0", r"allowed: 1\.\.16"),
        ("training.replay_ingress_depth=17", r"allowed: 1\.\.16"),
        ("training.replay_ingress_slot_rows=3", "must divide algo.num_envs=2048"),
        ("training.replay_ingress_slot_rows=0", "positive integer"),
        ("training.collector_metrics_interval=10001", r"allowed: 1\.\.10000"),
        ("training.cuda_process_sharing=nccl", "allowed: null, mps"),
        ("training.no_play=maybe", "true or false"),
        ("training.learner_device=tpu", "allowed: auto, cpu, cuda, mps"),
        ("algo.num_envs=lots", "must be an integer"),
        ("log_dir=relative/dir", "must be an absolute path"),
        ("training.inference_slot_capcity=2", "did you mean 'training.inference_slot_capacity'"),
        ("resolved.replay_ingress_slot_rows=4", "derived by the composer"),
        ("no_equals_sign", "dotted.key=value"),
    ],
)
def test_bad_overrides_fail_closed_with_a_named_reason(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compose("flashsac", "g1_motion_tracking", "mjwarp", [override])


@pytest.mark.parametrize(
    ("algo", "task", "sim", "message"),
    [
        ("ppo", "g1_walk_flat", "mujoco", "--algo"),
        ("sac", "h1_run", "mujoco", "--task"),
        ("sac", "g1_walk_flat", "isaac", "--sim"),
    ],
)
def test_unknown_entrypoint_task_or_backend(algo: str, task: str, sim: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compose(algo, task, sim)


def test_owner_yaml_cannot_invent_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    import soakbench.runtime.config.composition as composition

    root = tmp_path / "conf"
    shutil.copytree(composition.CONF_ROOT, root)
    (root / "sac/task/g1_walk_flat/mujoco.yaml").write_text(
        "training:\n  sim_backend: mujoco\n  turbo: true\n"
    )
    monkeypatch.setattr(composition, "CONF_ROOT", root)
    with pytest.raises(ConfigError, match=r"mujoco\.yaml: unknown key 'training\.turbo'"):
        compose("sac", "g1_walk_flat", "mujoco")


def test_inheritance_cycle_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    import soakbench.runtime.config.composition as composition

    root = tmp_path / "conf"
    shutil.copytree(composition.CONF_ROOT, root)
    (root / "sac/task/g1_walk_flat/mujoco.yaml").write_text("inherits: mjwarp\n")
    monkeypatch.setattr(composition, "CONF_ROOT", root)
    with pytest.raises(ConfigError, match="inheritance cycle"):
        compose("sac", "g1_walk_flat", "mujoco")


@pytest.mark.parametrize(
    ("facts", "overrides", "message"),
    [
        (LINUX_CPU, [], "requires Linux with a CUDA device"),
        (MACOS, [], "requires Linux with CUDA; this host is Darwin"),
        (PlatformFacts("Linux", True, 2, False, False), [], "a single-process run is single-GPU"),
        (PlatformFacts("Linux", True, 1, True, False), [], "HIP/ROCm"),
        (
            LINUX_CPU,
            ["training.mjwarp_device=cpu", "training.cuda_process_sharing=mps"],
            "mps requires Linux with a CUDA",
        ),
        (LINUX_CPU, ["training.mjwarp_device=cpu", "training.learner_device=cuda"], "learner_device=cuda"),
    ],
)
def test_platform_prerequisites_name_the_first_unmet_one(
    facts: PlatformFacts, overrides: list[str], message: str
) -> None:
    cfg = compose("flashsac", "g1_motion_tracking", "mjwarp", overrides)
    assert message in platform_blockers(cfg, facts)[0]


def test_platform_prerequisites_met() -> None:
    assert platform_blockers(compose("flashsac", "g1_motion_tracking", "mjwarp"), LINUX_CUDA) == []
    assert platform_blockers(compose("sac", "g1_walk_flat", "mujoco"), LINUX_CPU) == []
    assert platform_blockers(compose("sac", "g1_walk_flat", "mujoco"), MACOS) == []


def test_cpu_diagnostic_lane_is_explicit() -> None:
    cfg = compose("sac", "g1_walk_flat", "mjwarp", ["training.mjwarp_device=cpu"])
    assert platform_blockers(cfg, LINUX_CPU) == []


def test_learner_device_order_cuda_mps_cpu() -> None:
    cfg = compose("sac", "g1_walk_flat", "mujoco")
    assert resolve_learner_device(cfg, LINUX_CUDA) == "cuda"
    assert resolve_learner_device(cfg, MACOS) == "mps"
    assert resolve_learner_device(cfg, LINUX_CPU) == "cpu"
    explicit = compose("sac", "g1_walk_flat", "mujoco", ["training.learner_device=cpu"])
    assert resolve_learner_device(explicit, LINUX_CUDA) == "cpu"


def test_validate_for_run_checks_log_dir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="log_dir is required"):
        validate_for_run(compose("sac", "g1_walk_flat", "mujoco"), LINUX_CPU)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "old.txt").write_text("x")
    with pytest.raises(ConfigError, match="not an empty directory"):
        validate_for_run(compose("sac", "g1_walk_flat", "mujoco", [f"log_dir={busy}"]), LINUX_CPU)
    cfg = validate_for_run(
        compose("sac", "g1_walk_flat", "mujoco", [f"log_dir={tmp_path / 'new'}"]), LINUX_CPU
    )
    assert cfg.resolved.learner_device == "cpu"
    with pytest.raises(Exception, match="read-only"):
        cfg.resolved.learner_device = "cuda"  # type: ignore[misc]  # the point: frozen at runtime too


def test_mps_sharing_fails_closed_without_a_recorded_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    facts = PlatformFacts("Linux", True, 1, False, False, gpu_uuid="GPU-1a2b")
    cfg = compose(
        "flashsac",
        "g1_motion_tracking",
        "mjwarp",
        ["training.cuda_process_sharing=mps", f"log_dir={tmp_path / 'run'}"],
    )
    with pytest.raises(ConfigError, match="run `cumps start` first"):
        validate_for_run(cfg, facts)
    assert not (tmp_path / "run").exists()


def test_mps_record_is_exported_for_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon found through its cumps record is only used if the run exports its pipe directory."""
    import os
    import socket

    from soakbench.foundation import mps

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    me = os.getpid()  # a live process stands in for the daemon: the record's evidence matches it
    ticks = mps.start_ticks(me)
    assert ticks is not None
    pipe = tmp_path / "pipe"
    mps.write_record(
        mps.DaemonRecord(
            "gpu-1a2b",
            os.getuid(),
            socket.gethostname(),
            me,
            ticks,
            "GPU-1a2b",
            str(pipe),
            str(tmp_path / "log"),
            0.0,
        )
    )
    facts = PlatformFacts("Linux", True, 1, False, False, gpu_uuid="GPU-1a2b")
    overrides = ["training.cuda_process_sharing=mps", f"log_dir={tmp_path / 'run'}"]
    cfg = validate_for_run(compose("flashsac", "g1_motion_tracking", "mjwarp", overrides), facts)
    assert cfg.resolved.cuda_process_sharing.effective == "mps"
    validation = cfg.resolved.cuda_process_sharing.validation
    assert validation is not None and validation.source == "record"
    assert process_sharing_environment(cfg) == {"CUDA_MPS_PIPE_DIRECTORY": str(pipe)}
    plain = validate_for_run(
        compose("sac", "g1_walk_flat", "mujoco", [f"log_dir={tmp_path / 'r2'}"]), LINUX_CPU
    )
    assert process_sharing_environment(plain) == {}


def test_detection_for_mps_does_not_initialize_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    import torch

    seen: list[str | None] = []

    def is_available() -> bool:
        seen.append(os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK"))
        return False

    monkeypatch.setattr(torch.cuda, "is_available", is_available)
    monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    PlatformFacts.detect(initialize_cuda=False)
    PlatformFacts.detect()
    assert seen == ["1", None], "the NVML-based check must be asked for, and only during detection"
    assert "PYTORCH_NVML_BASED_CUDA_CHECK" not in os.environ


def test_unconfigured_sharing_is_recorded_as_null(tmp_path: Path) -> None:
    cfg = validate_for_run(
        compose("sac", "g1_walk_flat", "mujoco", [f"log_dir={tmp_path / 'run'}"]), LINUX_CPU
    )
    assert cfg.resolved.cuda_process_sharing.configured is None
    assert cfg.resolved.cuda_process_sharing.effective is None


@pytest.mark.parametrize(
    ("algo", "override", "message"),
    [
        ("sac", "algo.gamma=1.5", r"allowed: \(0.0, 1.0\)"),
        ("sac", "algo.gamma=1.0", r"algo.gamma=1.0 is out of range; allowed: \(0.0, 1.0\)"),
        ("sac", "algo.batch_size=1", "allowed: >= 2"),
        ("flashsac", "algo.v_max=0.0005", "allowed: > 0.001"),
        ("flashsac", "algo.target_sigma=1e-7", "allowed: > 1e-06"),
        ("sac", "algo.init_alpha=1e-9", "allowed: > 1e-08"),
        ("sac", "algo.gamma=2024-01-01", "algo.gamma must be a number, got '2024-01-01'"),  # text, not a date
        ("sac", "algo.no_such_key=[1,", "unknown setting 'algo.no_such_key'"),  # the key is checked first
        ("sac", "algo.tau=0", r"allowed: \(0.0, 1.0\]"),
        ("sac", "algo.actor_lr=-1", "allowed: > 0.0"),
        ("sac", "algo.batch_size=0", "allowed: >= 2"),
        ("flashsac", "algo.num_bins=2", r"allowed: 3\.\.10001"),
        ("flashsac", "algo.actor_update_period=0", r"allowed: 1\.\.1000"),
        ("flashsac", "task.action_scale=abc", "must be a number"),
        ("sac", "algo.actor_hidden=[0]", r"algo.actor_hidden must be a non-empty list of integers >= 1"),
        ("sac", "algo.critic_hidden=[]", r"algo.critic_hidden must be a non-empty list"),
        ("sac", "algo.critic_hidden=256", r"algo.critic_hidden must be a non-empty list"),
        ("sac", "algo.actor_hidden=[true]", r"algo.actor_hidden must be a non-empty list"),
        ("sac", "algo.max_grad_norm=0", r"allowed: null or > 0.0"),
        ("flashsac", "algo.max_grad_norm=.inf", "must be null or a finite number"),
        ("sac", "algo.target_entropy=low", "must be null or a finite number"),
        ("sac", "algo.obs_normalization=1", "must be true or false"),
        (
            "sac",
            "algo.actor_hidden=[256,",
            r"override 'algo.actor_hidden=\[256,': the value is not valid YAML",
        ),
    ],
)
def test_learner_and_task_ranges(algo: str, override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compose(algo, "g1_walk_flat", "mujoco", [override])


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("algo.max_grad_norm=10", 10),
        ("algo.target_entropy=-5.5", -5.5),
        ("algo.actor_hidden=[64, 32]", [64, 32]),
        ("algo.actor_lr=1e-3", 0.001),  # YAML 1.1 alone would read this as the string "1e-3"
        ("algo.critic_lr=2.5E-4", 0.00025),
        ("algo.target_entropy=-1e1", -10.0),
    ],
)
def test_valid_learner_values_compose(override: str, expected: object) -> None:
    key = override.partition("=")[0]
    cfg = compose("sac", "g1_walk_flat", "mujoco", [override]).to_dict()
    assert cfg["algo"][key.split(".")[1]] == expected


@pytest.mark.parametrize(
    ("algo", "overrides"),
    [
        (
            "sac",
            ["algo.batch_size=2", "algo.gamma=0.9999", "algo.init_alpha=2e-8", "algo.max_grad_norm=1e-6"],
        ),
        (
            "flashsac",
            [
                "algo.batch_size=2",
                "algo.v_max=0.0011",
                "algo.target_sigma=2e-6",
                "algo.init_alpha=2e-8",
                "algo.num_bins=3",
                "algo.actor_blocks=1",
                "algo.bn_momentum=1.0",
            ],
        ),
    ],
)
def test_values_at_the_config_bounds_build_a_learner(algo: str, overrides: list[str]) -> None:
    """The composer is never looser than the learner: what composes also constructs."""
    import torch

    from soakbench.runtime.learners import build_learner

    cfg = compose(algo, "g1_walk_flat", "mujoco", overrides)
    learner = build_learner(cfg.algo, obs_dim=5, action_dim=3, device=torch.device("cpu"))
    assert learner.batch_size == 2
