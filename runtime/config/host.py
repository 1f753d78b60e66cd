"""Host facts and the checks a real run needs beyond composition: platform prerequisites, the learner
device and threads, CUDA process sharing and the run directory.

``validate_for_run(cfg, facts)`` turns a ``ComposedConfig`` into the ``RunConfig`` that ``run_training``
takes; ``PlatformFacts`` are passed explicitly so validation can run "as if" on another platform.
"""

from __future__ import annotations

import os
import platform as platform_module
from dataclasses import dataclass
from pathlib import Path

from soakbench.runtime.config.fields import ConfigError
from soakbench.runtime.config.sections import (
    ComposedConfig,
    CudaProcessSharing,
    HostResolvedConfig,
    MpsValidation,
    RunConfig,
    shallow_fields,
)

_NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"
# torch intra-op threads beyond this do not speed up the learner's small-MLP updates measurably.
LEARNER_THREADS_CAP = 8


@dataclass(frozen=True)
class PlatformFacts:
    """What the host offers, passed explicitly so validation can be run 'as if' on another platform."""

    system: str  # platform.system(): Linux, Darwin, ...
    cuda_available: bool
    cuda_device_count: int
    hip_build: bool
    mps_available: bool
    gpu_uuid: str | None = None  # the physical GPU a CUDA run would use, when NVML can tell

    @classmethod
    def detect(cls, *, initialize_cuda: bool = True) -> PlatformFacts:
        """Read the facts of this host from torch (imported lazily: composing imports no torch).

        ``initialize_cuda=False`` asks torch for an NVML-based count instead of ``cuInit`` (torch falls
        back to ``cuInit`` only when NVML fails): a CUDA client binds to an MPS daemon when CUDA is
        initialized, so an MPS run must export its pipe directory before that happens.
        """
        import torch

        saved = os.environ.get(_NVML_CHECK)
        if not initialize_cuda:
            os.environ[_NVML_CHECK] = "1"
        try:
            cuda = bool(torch.cuda.is_available())
            count = int(torch.cuda.device_count()) if cuda else 0
        finally:
            if saved is None:
                os.environ.pop(_NVML_CHECK, None)
            else:
                os.environ[_NVML_CHECK] = saved
        return cls(
            system=platform_module.system(),
            cuda_available=cuda,
            cuda_device_count=count,
            hip_build=getattr(torch.version, "hip", None) is not None,
            mps_available=bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()),
            gpu_uuid=_visible_gpu_uuid() if cuda else None,
        )


def _visible_gpu_uuid() -> str | None:
    """UUID of the single visible GPU through NVML (honouring CUDA_VISIBLE_DEVICES), else None."""
    from soakbench.foundation.mps import visible_gpus
    from soakbench.foundation.nvml import NvmlReader

    with NvmlReader() as reader:
        snapshot = reader.snapshot()
    visible = visible_gpus(snapshot, os.environ.get("CUDA_VISIBLE_DEVICES")) if snapshot["available"] else []
    return visible[0].uuid if len(visible) == 1 else None


def resolve_learner_threads(configured: int | None, sim_backend: str | None, physics: int, cores: int) -> int:
    """torch intra-op threads for the learner (main) process.

    An explicit ``training.learner_threads`` wins. null leaves the learner the cores the collector does
    not use: ``max(1, cores - busy)`` capped at LEARNER_THREADS_CAP, where ``busy`` is the MuJoCo CPU
    backend's ``physics`` worker threads, or 1 (the collector's own thread) for any other backend.
    torch's default (one thread per core) made the learner fight the collector: on 2 cores an isolated
    SAC learner ran 2.3 updates/s with 2 threads vs 47.7 with 1 (docs/learners.md).
    """
    if configured is not None:
        return int(configured)
    busy = physics if sim_backend == "mujoco" else 1
    return max(1, min(LEARNER_THREADS_CAP, cores - busy))


def platform_blockers(cfg: ComposedConfig, facts: PlatformFacts, as_rank: bool = False) -> list[str]:
    """Unmet host prerequisites for ``cfg`` on ``facts``, first one first (empty when runnable).

    ``as_rank``: the process is a torchrun rank, which sees every device of its node and is given one of
    them (``runtime.distributed.check_placement`` and ``rank_device_mask``); a single process must see one."""
    problems: list[str] = []
    training = cfg.training
    if facts.hip_build:
        problems.append("this torch build targets HIP/ROCm; only NVIDIA CUDA or CPU builds are supported")
    if facts.cuda_device_count > 1 and not as_rank:
        problems.append(
            f"{facts.cuda_device_count} CUDA devices are visible; a single-process run is single-GPU. "
            "Set CUDA_VISIBLE_DEVICES=<one index or UUID>, or run one rank per GPU under torchrun "
            "(--nproc-per-node N)"
        )
    if cfg.resolved.physics_device == "cuda":
        if facts.system != "Linux":
            problems.append(f"--sim mjwarp requires Linux with CUDA; this host is {facts.system}")
        elif not facts.cuda_available:
            problems.append(
                "--sim mjwarp requires Linux with a CUDA device and none is available; use --sim mujoco on "
                "a CPU host (training.mjwarp_device=cpu is a diagnostic lane, never production evidence)"
            )
    if training.cuda_process_sharing == "mps" and not (facts.system == "Linux" and facts.cuda_available):
        problems.append("training.cuda_process_sharing=mps requires Linux with a CUDA device")
    wanted = training.learner_device
    if wanted == "cuda" and not facts.cuda_available:
        problems.append("training.learner_device=cuda but no CUDA device is available")
    if wanted == "mps" and not facts.mps_available:
        problems.append("training.learner_device=mps but the MPS backend is not available")
    return problems


def resolve_learner_device(cfg: ComposedConfig, facts: PlatformFacts) -> str:
    """The learner device: explicit setting, else cuda, then mps, then cpu."""
    wanted = cfg.training.learner_device
    if wanted != "auto":
        return wanted
    if facts.cuda_available:
        return "cuda"
    if facts.mps_available:
        return "mps"
    return "cpu"


def validate_for_run(cfg: ComposedConfig, facts: PlatformFacts, as_rank: bool = False) -> RunConfig:
    """Check everything a real run needs beyond composition and return the ``RunConfig`` with
    ``resolved.learner_device`` and ``resolved.cuda_process_sharing`` filled in; raises ConfigError on
    the first unmet prerequisite, before anything is written. ``as_rank``: see ``platform_blockers``."""
    problems = platform_blockers(cfg, facts, as_rank)
    if problems:
        raise ConfigError(problems[0])
    if cfg.log_dir is None:
        raise ConfigError("log_dir is required: pass log_dir=/absolute/path/of/a/new/run/dir", "log_dir")
    log_dir = Path(cfg.log_dir)
    if log_dir.exists() and (not log_dir.is_dir() or any(log_dir.iterdir())):
        raise ConfigError(
            f"log_dir {log_dir} exists and is not an empty directory; choose a new path", "log_dir"
        )
    resolved = HostResolvedConfig(
        **shallow_fields(cfg.resolved),
        learner_device=resolve_learner_device(cfg, facts),
        cuda_process_sharing=_process_sharing(cfg, facts),
    )
    return RunConfig(**{**shallow_fields(cfg), "resolved": resolved})


def _process_sharing(cfg: ComposedConfig, facts: PlatformFacts) -> CudaProcessSharing:
    configured = cfg.training.cuda_process_sharing
    if configured != "mps":
        return CudaProcessSharing(configured=configured, effective=None, validation=None)
    from soakbench.foundation.mps import CumpsError, resolve_for_training

    try:
        found = resolve_for_training(facts.gpu_uuid, os.environ)
    except CumpsError as exc:
        raise ConfigError(str(exc), "training.cuda_process_sharing") from None
    return CudaProcessSharing(configured="mps", effective="mps", validation=MpsValidation(**found))


def process_sharing_environment(cfg: RunConfig) -> dict[str, str]:
    """Variables the run must export before CUDA initializes so its processes use the validated MPS
    daemon: a daemon found through its cumps record is reached only if its pipe directory is in the
    environment (an explicit ``CUDA_MPS_PIPE_DIRECTORY`` is already there). Empty without MPS."""
    validation = cfg.resolved.cuda_process_sharing.validation
    if validation is None or validation.source != "record":
        return {}
    return {"CUDA_MPS_PIPE_DIRECTORY": validation.pipe_dir}
