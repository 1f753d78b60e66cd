"""The typed configuration: one frozen dataclass per section, each field with its docstring, unit and bounds.

``Settings`` is everything a layer or an override may set: ``seed``, ``log_dir``, ``training``, the
learner section of the chosen algorithm (``SacConfig`` | ``FlashSacConfig``, sharing ``LearnerConfig``)
and the task section of the chosen task. ``ComposedConfig`` adds the derived ``owner`` and ``resolved``
sections; ``RunConfig`` is a composed config that passed the host checks of ``validate_for_run`` and is the
only kind ``run_training`` accepts. Unit ``1`` means dimensionless.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, Self

from soakbench.runtime.config.fields import (
    above,
    at_least,
    check_section,
    closed,
    derived,
    left_open,
    open_interval,
    owner_setting,
    section,
    setting,
)


@section
class Section:
    """Base of every section: a plain, JSON-able view."""

    def to_dict(self) -> dict[str, Any]:
        """The section as nested plain dicts and lists (what run_config.json records)."""
        return dataclasses.asdict(self)


@section
class TrainingConfig(Section):
    """``training.*``: the runtime around the learner (the owner YAML picks the backend)."""

    sim_backend: str = owner_setting(
        doc="physics backend identity; set only by the owner YAML, a CLI override is rejected"
    )
    inference_slot_capacity: int = setting(
        default=1, doc="weight-publication slots in the inference ring", unit="slots", bounds=closed(1, 16)
    )
    replay_ingress_depth: int = setting(
        default=2, doc="shared-memory replay-ingress slots", unit="slots", bounds=closed(1, 16)
    )
    replay_ingress_slot_rows: int | None = setting(
        default=None,
        doc="rows per ingress slot; null resolves to algo.num_envs, otherwise it must divide it",
        unit="rows",
        bounds=at_least(1),
    )
    collector_metrics_interval: int = setting(
        default=1,
        doc="iterations between collector progress heartbeats",
        unit="iterations",
        bounds=closed(1, 10000),
    )
    cuda_process_sharing: Literal["mps"] | None = setting(
        default=None,
        doc="mps: learner and collector share the GPU through one MPS server (needs a live `cumps` daemon "
        "or an explicit CUDA_MPS_PIPE_DIRECTORY)",
    )
    no_play: bool = setting(
        default=False, doc="skip the deterministic playback of the final policy (a soak always sets true)"
    )
    learner_device: Literal["auto", "cpu", "cuda", "mps"] = setting(
        default="auto", doc="learner device; auto picks cuda, then mps, then cpu (resolved.learner_device)"
    )
    mjwarp_device: Literal["cuda", "cpu"] = setting(
        default="cuda",
        doc="MJWarp device; cpu is an explicit diagnostic lane, never production or CUDA evidence",
    )
    physics_threads: int | None = setting(
        default=None,
        doc="MuJoCo CPU worker threads; null = all cores (os.cpu_count()), see resolved.physics_threads",
        unit="threads",
        bounds=at_least(1),
    )
    learner_threads: int | None = setting(
        default=None,
        doc="torch intra-op threads of the learner process; null = max(1, cores - busy) capped at 8, "
        "busy = resolved.physics_threads on MuJoCo CPU, else 1 (see resolved.learner_threads)",
        unit="threads",
        bounds=at_least(1),
    )
    torch_compile: bool = setting(
        default=False, doc="optional torch.compile of the learner; forced off on CPU"
    )
    cuda_graphs: bool = setting(default=False, doc="optional learner CUDA graphs; forced off on CPU")
    playback_steps: int = setting(
        default=200,
        doc="control steps of the post-training playback",
        unit="control steps",
        bounds=closed(1, 100000),
    )
    heartbeat_seconds: float = setting(
        default=5.0, doc="progress.jsonl is written at least this often", unit="s", bounds=above(0.0)
    )
    collective_timeout_s: float = setting(
        default=300.0,
        doc="under torchrun: how long a rank waits in one collective (gradient all-reduce) for its peers "
        "before it ends as a peer_failure",
        unit="s",
        bounds=closed(1.0, 86400.0),
    )
    group_exit_deadline_s: float = setting(
        default=30.0,
        doc="under torchrun: how long the ranks' summaries are awaited and the process group's "
        "destruction is allowed at shutdown",
        unit="s",
        bounds=closed(1.0, 3600.0),
    )
    test_fault: Literal["learner_exception"] | None = setting(
        default=None, doc="test-only fault injection; never set in production"
    )
    test_fault_iteration: int = setting(
        default=0, doc="iteration at which training.test_fault fires", unit="iterations", bounds=at_least(0)
    )
    test_fault_rank: int | None = setting(
        default=None,
        doc="test-only: under torchrun, the one rank on which training.test_fault fires; null = every rank "
        "(a fault fires in the first attempt only: an elastic restart runs without it)",
        unit="rank",
        bounds=at_least(0),
    )


@section
class LearnerConfig(Section):
    """``algo.*`` keys every learner has: the run length and the SAC core shared by both algorithms."""

    name: str = owner_setting(doc="learner entry point; chosen with --algo")
    num_envs: int = owner_setting(
        doc="environments (worlds) per collector vector step", unit="envs", bounds=closed(1, 65536)
    )
    max_iterations: int = owner_setting(
        doc="collector vector steps (iterations) to train", unit="iterations", bounds=at_least(1)
    )
    save_interval: int = owner_setting(
        doc="iterations between atomic checkpoints", unit="iterations", bounds=at_least(1)
    )
    prefill_iterations: int = owner_setting(
        doc="random-action vector steps before learning (counted as env steps, whole slots)",
        unit="iterations",
        bounds=at_least(0),
    )
    batch_size: int = owner_setting(doc="rows per gradient update", unit="rows", bounds=at_least(2))
    updates_per_iteration: int = owner_setting(
        doc="gradient updates per iteration", unit="updates", bounds=closed(1, 1024)
    )
    replay_capacity: int = owner_setting(doc="learner-side replay rows", unit="rows", bounds=at_least(1))
    learning_starts: int = owner_setting(
        doc="replay rows required before the first update", unit="rows", bounds=at_least(0)
    )
    # gamma = 1 would mean no discounting and unbounded returns.
    gamma: float = owner_setting(doc="discount per control step", unit="1", bounds=open_interval(0.0, 1.0))
    tau: float = owner_setting(doc="Polyak rate of the target critics", unit="1", bounds=left_open(0.0, 1.0))
    actor_lr: float = owner_setting(doc="actor Adam learning rate", unit="1", bounds=above(0.0))
    critic_lr: float = owner_setting(doc="critic Adam learning rate", unit="1", bounds=above(0.0))
    alpha_lr: float = owner_setting(doc="entropy temperature Adam learning rate", unit="1", bounds=above(0.0))
    init_alpha: float = owner_setting(doc="initial entropy temperature", unit="1", bounds=above(1e-8))
    actor_update_period: int = owner_setting(
        doc="critic updates per actor/temperature update", unit="updates", bounds=closed(1, 1000)
    )
    max_grad_norm: float | None = owner_setting(
        doc="gradient L2-norm clip; null disables", unit="1", bounds=above(0.0)
    )


@section
class SacConfig(LearnerConfig):
    """``algo.*`` of SAC (runtime/learners/sac.py)."""

    target_entropy: float | None = owner_setting(
        doc="SAC target entropy; null means -action_dim", unit="nats"
    )
    actor_hidden: list[int] = owner_setting(
        doc="SAC actor MLP widths", unit="units", bounds=at_least(1), items=(1, None)
    )
    critic_hidden: list[int] = owner_setting(
        doc="SAC critic MLP widths", unit="units", bounds=at_least(1), items=(1, None)
    )
    obs_normalization: bool = owner_setting(
        doc="running observation normalisation carried in the actor's buffers"
    )


@section
class FlashSacConfig(LearnerConfig):
    """``algo.*`` of FlashSAC (runtime/learners/flashsac.py)."""

    target_sigma: float = owner_setting(
        doc="FlashSAC target entropy expressed as a per-dimension Gaussian std",
        unit="action units",
        bounds=above(1e-6),
    )
    actor_hidden_dim: int = owner_setting(doc="FlashSAC actor width", unit="units", bounds=at_least(1))
    actor_blocks: int = owner_setting(
        doc="FlashSAC actor inverted-residual blocks", unit="blocks", bounds=closed(1, 64)
    )
    critic_hidden_dim: int = owner_setting(doc="FlashSAC critic width", unit="units", bounds=at_least(1))
    critic_blocks: int = owner_setting(
        doc="FlashSAC critic inverted-residual blocks", unit="blocks", bounds=closed(1, 64)
    )
    expansion: int = owner_setting(
        doc="inverted-residual width = expansion x hidden width", unit="1", bounds=closed(1, 64)
    )
    num_bins: int = owner_setting(doc="categorical critic atoms", unit="bins", bounds=closed(3, 10001))
    v_max: float = owner_setting(
        doc="categorical support [-v_max, v_max] of the normalised return", unit="1", bounds=above(1e-3)
    )
    bn_momentum: float = owner_setting(
        doc="batch-norm statistics momentum", unit="1", bounds=left_open(0.0, 1.0)
    )


# The tasks' own construction checks (runtime/tasks) use these same upper bounds.
@section
class TaskConfig(Section):
    """``task.*`` keys every task has."""

    name: str = owner_setting(doc="task; chosen with --task")
    semantic_name: str = owner_setting(doc="task class name recorded in artifacts")
    scene: str = owner_setting(doc="MJCF scene under runtime/assets/")
    decimation: int = owner_setting(
        doc="physics substeps (0.005 s each) per control step", unit="substeps", bounds=closed(1, 100)
    )
    episode_length_s: float = owner_setting(
        doc="time-out of an episode (truncation, not termination)", unit="s", bounds=left_open(0.0, 1e6)
    )
    action_scale: float = owner_setting(
        doc="joint-target offset per unit action", unit="rad", bounds=left_open(0.0, 10.0)
    )
    min_base_height: float = owner_setting(
        doc="base height below which the robot has fallen (termination)", unit="m", bounds=left_open(0.0, 2.0)
    )


@section
class G1WalkFlatConfig(TaskConfig):
    """``task.*`` of g1_walk_flat: velocity commands sampled per episode, [low, high] each."""

    command_lin_vel_x: list[float] = owner_setting(
        doc="forward velocity command range [low, high]", unit="m/s", items=(2, 2)
    )
    command_lin_vel_y: list[float] = owner_setting(
        doc="lateral velocity command range [low, high]", unit="m/s", items=(2, 2)
    )
    command_ang_vel_z: list[float] = owner_setting(
        doc="yaw-rate command range [low, high]", unit="rad/s", items=(2, 2)
    )


@section
class G1MotionTrackingConfig(TaskConfig):
    """``task.*`` of g1_motion_tracking."""

    motion: str = owner_setting(doc="reference clip under runtime/assets/")


LEARNER_SECTIONS: dict[str, type[LearnerConfig]] = {"sac": SacConfig, "flashsac": FlashSacConfig}
TASK_SECTIONS: dict[str, type[TaskConfig]] = {
    "g1_walk_flat": G1WalkFlatConfig,
    "g1_motion_tracking": G1MotionTrackingConfig,
}


@section
class OwnerConfig(Section):
    """``owner.*``: which owner YAML chain composed this config."""

    algo: str = derived(doc="--algo of the owner route")
    task: str = derived(doc="--task of the owner route")
    sim: str = derived(doc="--sim of the owner route")
    chain: list[str] = derived(doc="owner files from the root ancestor to the selected owner (inherits)")
    files: list[str] = derived(doc="paths of the chain's owner YAMLs, relative to the repository")


@section
class ResolvedConfig(Section):
    """``resolved.*`` known at compose time (no torch, no device needed)."""

    replay_ingress_slot_rows: int = derived(
        doc="training.replay_ingress_slot_rows, null resolved to algo.num_envs", unit="rows"
    )
    physics_threads: int = derived(
        doc="training.physics_threads, null resolved to the core count", unit="threads"
    )
    learner_threads: int = derived(doc="training.learner_threads after its null rule", unit="threads")
    physics_device: str = derived(
        doc="where the backend's tensors live: cpu for mujoco, training.mjwarp_device for mjwarp"
    )


@section
class MpsValidation(Section):
    """The MPS daemon a run with ``training.cuda_process_sharing=mps`` was validated against."""

    source: Literal["environment", "record"] = derived(
        doc="found through CUDA_MPS_PIPE_DIRECTORY or a cumps record"
    )
    pipe_dir: str = derived(doc="the daemon's pipe directory")
    control_pipe_kind: str = derived(doc="what the daemon serves at <pipe_dir>/control: socket or fifo")
    control_pid: int | None = derived(doc="pid of nvidia-cuda-mps-control, when found", unit="pid")
    gpu_uuid: str | None = derived(doc="the GPU the daemon covers")
    name: str | None = derived(doc="cumps record name (null for an explicit pipe directory)")


@section
class CudaProcessSharing(Section):
    """``resolved.cuda_process_sharing``: configured vs effective sharing."""

    configured: Literal["mps"] | None = derived(doc="training.cuda_process_sharing")
    effective: Literal["mps"] | None = derived(doc="mps once a live daemon was validated, else null")
    validation: MpsValidation | None = derived(doc="the validated daemon, or null")


@section
class HostResolvedConfig(ResolvedConfig):
    """``resolved.*`` after the host checks of ``validate_for_run``."""

    learner_device: str = derived(doc="training.learner_device with auto resolved on this host")
    cuda_process_sharing: CudaProcessSharing = derived(doc="the validated CUDA process sharing")


@section
class Settings(Section):
    """Everything a layer or an override may set."""

    seed: int = setting(
        default=0,
        doc="seed of env resets, commands, exploration and network init",
        unit="1",
        bounds=closed(0, 2**31 - 1),
    )
    log_dir: str | None = setting(
        default=None,
        doc="run directory; absolute; must be new or empty (checked before anything is built)",
        absolute_path=True,
    )
    training: TrainingConfig
    algo: LearnerConfig
    task: TaskConfig


@section
class ComposedConfig(Settings):
    """Settings plus the derived sections; host prerequisites not yet checked."""

    owner: OwnerConfig
    resolved: ResolvedConfig

    def with_num_envs(self, num_envs: int) -> Self:
        """This config for ``num_envs`` worlds with one ingress slot per vector step (playback, evaluation)."""
        algo = dataclasses.replace(self.algo, num_envs=num_envs)
        resolved = dataclasses.replace(self.resolved, replay_ingress_slot_rows=num_envs)
        out = dataclasses.replace(self, algo=algo, resolved=resolved)
        check_section(out)
        return out


@section
class RunConfig(ComposedConfig):
    """A composed config validated for this host: what ``run_training`` takes."""

    resolved: HostResolvedConfig


def shallow_fields(obj: Section) -> dict[str, Any]:
    """``obj``'s fields by name, values not copied (to rebuild it as a subclass)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
