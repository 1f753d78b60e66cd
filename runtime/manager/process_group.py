"""The rank's torch.distributed process group: joining it, the learner's collective over it, leaving it."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist

# dist.TCPStore and friends are these very classes; imported from their module, mypy sees their types
from torch._C._distributed_c10d import PrefixStore, Store, TCPStore

import soakbench.runtime.artifacts as artifacts
from soakbench.runtime.distributed import RankIdentity
from soakbench.runtime.learners.collective import CollectiveError

Backend = Literal["gloo", "nccl"]


def backend_for(learner_device: str) -> Backend:
    """NCCL between CUDA learners, gloo between CPU learners."""
    return "nccl" if learner_device == "cuda" else "gloo"


class ProcessGroupCollective:
    """The default torch.distributed process group as a learner's :class:`Collective`."""

    def __init__(self, identity: RankIdentity, backend: Backend, timeout_s: float) -> None:
        self.identity, self.backend, self.timeout_s = identity, backend, timeout_s

    @property
    def world_size(self) -> int:
        return self.identity.world_size

    def mean(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """One all_reduce per dtype over the tensors packed end to end (as DDP's buckets do)."""
        if any(not t.is_floating_point() for t in tensors):
            raise TypeError("mean() averages floating-point tensors only (an integer mean would round)")
        out: list[torch.Tensor] = list(tensors)
        for dtype in dict.fromkeys(t.dtype for t in tensors):
            picked = [i for i, t in enumerate(tensors) if t.dtype == dtype]
            flat = torch.cat([tensors[i].detach().reshape(-1) for i in picked])
            self._call("all_reduce", flat)
            flat = flat / self.world_size
            for i, part in zip(picked, torch.split(flat, [tensors[i].numel() for i in picked]), strict=True):
                out[i] = part.view_as(tensors[i])
        return out

    def broadcast(self, tensors: Sequence[torch.Tensor], src: int) -> None:
        for tensor in tensors:
            self._call("broadcast", tensor, src)

    def _call(self, name: str, *args: object) -> None:
        try:
            getattr(dist, name)(*args)
        except RuntimeError as exc:  # DistBackendError and gloo's own errors are RuntimeErrors
            raise CollectiveError(
                f"{name} across {self.world_size} ranks failed (a peer left the group, or the call passed "
                f"training.collective_timeout_s={self.timeout_s:g}): {exc}"
            ) from exc


def join_group(identity: RankIdentity, learner_device: str, timeout_s: float) -> ProcessGroupCollective:
    """Initialise the default process group from torchrun's environment (``env://``)."""
    backend = backend_for(learner_device)
    if backend == "nccl":
        torch.cuda.set_device(0)  # the rank's one visible device (rank_device_mask)
    timeout = timedelta(seconds=timeout_s)
    store = _attempt_store(identity, timeout)
    dist.init_process_group(
        backend, store=store, rank=identity.rank, world_size=identity.world_size, timeout=timeout
    )
    return ProcessGroupCollective(identity, backend, timeout_s)


def _attempt_store(identity: RankIdentity, timeout: timedelta) -> Store | None:
    """For an attempt after an elastic restart, the agent's store under a prefix of its own: the
    attempt before left its rendezvous keys there, and a rank that reads a peer's stale address cannot
    connect (seen with gloo under torchrun: 2 restarts in 3 failed to form the group). None: env://."""
    if identity.restart_count == 0 or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    base = TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=timeout
    )
    return PrefixStore(f"attempt-{identity.restart_count}", base)


def leave_group(deadline_s: float) -> str | None:
    """Destroy the process group, waiting at most ``deadline_s``; None when it returned in time, else
    why not. A destroy that hangs (its peer gone mid-call) is left to the process's exit."""
    if not dist.is_initialized():
        return None
    errors: list[str] = []

    def destroy() -> None:
        try:
            dist.destroy_process_group()
        except Exception as exc:  # the group is being left anyway; the reason is recorded
            errors.append(f"{type(exc).__name__}: {exc}")

    worker = threading.Thread(target=destroy, name="leave-process-group", daemon=True)
    worker.start()
    worker.join(deadline_s)
    if worker.is_alive():
        return f"destroy_process_group did not return within {deadline_s:g} s"
    return errors[0] if errors else None


def leave_job(ranks: RankIdentity, job_dir: Path, summary: dict[str, Any], deadline_s: float) -> bool:
    """Leave the process group within the deadline; rank 0 then writes the job's summary (in ``job_dir``,
    the job's log_dir) from this attempt's rank summaries (``runtime.manager.job_summary``), waiting for
    them up to the same deadline. False when the job summary could not be written (said on stderr)."""
    from soakbench.runtime.manager.job_summary import job_summary, read_rank_summaries

    stuck = leave_group(deadline_s)
    if stuck is not None:
        print(f"train: rank {ranks.rank}: leaving the process group: {stuck}", file=sys.stderr)
    if ranks.rank != 0:
        return True
    attempt = ranks.attempt_directory(job_dir)
    by_rank = read_rank_summaries(attempt, ranks.world_size, deadline_s, own={0: summary})
    folder = attempt.relative_to(job_dir).as_posix()
    try:
        artifacts.write_run_summary(
            job_dir, job_summary(summary, by_rank, "" if folder == "." else f"{folder}/")
        )
    except (artifacts.ArtifactError, OSError) as exc:
        print(f"train: rank 0: the job summary was not written: {exc}", file=sys.stderr)
        return False
    return True
