"""One rank of a torchrun job: who it is, what it refuses before anything is built, its process group.

torchrun (``torch.distributed.run``, the elastic agent) starts the ranks and exports ``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``. A job of one
rank (no ``WORLD_SIZE``, or ``WORLD_SIZE=1``) is the single-process run, unchanged: no group, no
``rank-<R>`` folder. Everything here is pure and imports no torch; the process group itself is
``runtime.manager.process_group``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from soakbench.runtime.config import ConfigError

if TYPE_CHECKING:
    from soakbench.runtime.config import ComposedConfig, PlatformFacts

LAUNCH_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
LAUNCH_HINT = "launch with torchrun --nproc-per-node N -m runtime.cli ..., or unset them for one process"


@dataclass(frozen=True)
class RankIdentity:
    """This process's place in the job, as torchrun exported it."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    run_id: str | None  # TORCHELASTIC_RUN_ID
    restart_count: int  # TORCHELASTIC_RESTART_COUNT: attempts before this one

    def attempt_directory(self, log_dir: Path) -> Path:
        """The folder of this attempt's rank folders: ``log_dir`` itself for the first attempt, and
        ``log_dir/attempt-<N>`` after the N-th elastic restart (the earlier attempts' folders stay)."""
        return log_dir if self.restart_count == 0 else log_dir / f"attempt-{self.restart_count}"

    def directory(self, log_dir: Path) -> Path:
        """This rank's own run folder inside the job's ``log_dir``."""
        return self.attempt_directory(log_dir) / f"rank-{self.rank}"

    def job_directory(self, rank_dir: Path) -> Path:
        """The job's ``log_dir`` from this rank's own folder (the inverse of :meth:`directory`)."""
        return rank_dir.parent if self.restart_count == 0 else rank_dir.parent.parent


def rank_identity(env: Mapping[str, str]) -> RankIdentity | None:
    """The rank described by ``env``; None for a single process. ConfigError on a partial or
    inconsistent set of launch variables, naming them."""
    # MASTER_ADDR/MASTER_PORT alone are often exported host-wide; only a rank variable makes a rank.
    if not any(name in env for name in RANK_VARIABLES):
        return None
    present = [name for name in LAUNCH_VARIABLES if name in env]
    missing = [name for name in LAUNCH_VARIABLES if name not in env]
    if missing:
        raise ConfigError(
            f"{', '.join(present)} set without {', '.join(missing)}: a rank needs all of "
            f"{', '.join(LAUNCH_VARIABLES)}; {LAUNCH_HINT}",
            missing[0],
        )
    values = {name: _count(env, name) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")}
    world, local_world = values["WORLD_SIZE"], values["LOCAL_WORLD_SIZE"]
    if world < 1 or not 0 <= values["RANK"] < world:
        raise ConfigError(f"RANK={values['RANK']} is not in [0, WORLD_SIZE={world}); {LAUNCH_HINT}", "RANK")
    if not 1 <= local_world <= world or not 0 <= values["LOCAL_RANK"] < local_world:
        raise ConfigError(
            f"LOCAL_RANK={values['LOCAL_RANK']} / LOCAL_WORLD_SIZE={local_world} do not fit WORLD_SIZE={world}",
            "LOCAL_RANK",
        )
    if not 1 <= _count(env, "MASTER_PORT") <= 65535:
        raise ConfigError(f"MASTER_PORT={env['MASTER_PORT']!r} is not a TCP port (1-65535)", "MASTER_PORT")
    if world == 1:
        return None
    return RankIdentity(
        rank=values["RANK"],
        local_rank=values["LOCAL_RANK"],
        world_size=world,
        local_world_size=local_world,
        run_id=env.get("TORCHELASTIC_RUN_ID"),
        restart_count=_count(env, "TORCHELASTIC_RESTART_COUNT", default="0"),
    )


def _count(env: Mapping[str, str], name: str, default: str | None = None) -> int:
    """A launch variable that must be a whole number >= 0."""
    text = str(env.get(name, default)).strip()
    if not text.isdigit():
        raise ConfigError(f"{name}={text!r} is not a whole number >= 0; {LAUNCH_HINT}", name)
    return int(text)


def rank_overrides(identity: RankIdentity, cfg: ComposedConfig, cores: int) -> list[str]:
    """The settings that make ``cfg`` this rank's: its own folder, its own seed, its share of the cores
    (only where the user left the thread counts unset)."""
    if cfg.log_dir is None:
        raise ConfigError("log_dir is required: pass log_dir=/absolute/path/of/a/new/run/dir", "log_dir")
    share = max(1, cores // identity.local_world_size)
    out = [f"log_dir={identity.directory(Path(cfg.log_dir))}", f"seed={cfg.seed + identity.rank}"]
    if cfg.training.physics_threads is None:
        out.append(f"training.physics_threads={share}")
    if cfg.training.learner_threads is None:
        out.append(f"training.learner_threads={share}")
    fault_rank = cfg.training.test_fault_rank
    if fault_rank is not None and fault_rank != identity.rank:
        out.append("training.test_fault=null")  # the injected fault is another rank's
    elif cfg.training.test_fault is not None and identity.restart_count > 0:
        out.append("training.test_fault=null")  # a test fault models a crash the restart recovers from
    return out


def check_job_dir(log_dir: Path, restart_count: int) -> None:
    """The job's folder may hold only the ranks' folders (they appear as the ranks start), and after an
    elastic restart also the earlier attempts' folders and their job summary."""
    if log_dir.exists() and not log_dir.is_dir():
        raise ConfigError(f"log_dir {log_dir} exists and is not a directory; choose a new path", "log_dir")
    try:
        names = [p.name for p in log_dir.iterdir()] if log_dir.exists() else []
    except OSError as exc:
        raise ConfigError(f"log_dir {log_dir} cannot be listed: {exc}", "log_dir") from None
    strays = sorted(n for n in names if not _is_job_entry(n, restart_count))
    if strays:
        raise ConfigError(
            f"log_dir {log_dir} already holds {', '.join(strays[:3])}: a job's log_dir must be new or "
            "hold only rank-<R> folders; choose a new path",
            "log_dir",
        )


def _is_job_entry(name: str, restart_count: int) -> bool:
    prefix, _, number = name.partition("-")
    if prefix == "rank" and number.isdigit():
        return True
    return restart_count > 0 and ((prefix == "attempt" and number.isdigit()) or name == "run_summary.json")


def check_placement(identity: RankIdentity, device: str, sharing: str | None, facts: PlatformFacts) -> None:
    """Refuse a job whose ranks cannot each have their own device, before anything is built. ``device``:
    where a rank computes, ``cuda`` when its learner or its physics is on CUDA."""
    if device != "cuda":
        return
    if identity.local_world_size > facts.cuda_device_count:
        raise ConfigError(
            f"{identity.local_world_size} ranks on this node (LOCAL_WORLD_SIZE) but {facts.cuda_device_count} "
            "visible CUDA device(s): a rank on CUDA needs a device of its own; lower --nproc-per-node or "
            "make more devices visible (CUDA_VISIBLE_DEVICES)",
            "LOCAL_WORLD_SIZE",
        )
    if sharing == "mps":
        from soakbench.foundation.mps import MULTI_GPU_GATE, TOPOLOGY_MODES

        reason = TOPOLOGY_MODES["single_task_multi_gpu"]
        raise ConfigError(
            f"training.cuda_process_sharing=mps with {identity.world_size} ranks: MPS over several GPUs is the "
            f"single_task_multi_gpu topology, which is parsed but not supported: {reason}; {MULTI_GPU_GATE}. "
            "Drop training.cuda_process_sharing, or run one rank",
            "training.cuda_process_sharing",
        )


def rank_device_mask(identity: RankIdentity, env: Mapping[str, str]) -> str:
    """``CUDA_VISIBLE_DEVICES`` for this rank and its collector: its own device of the node's visible
    ones, set before CUDA initializes so that ``cuda`` means that device in both processes."""
    visible = [v.strip() for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return visible[identity.local_rank] if visible else str(identity.local_rank)
