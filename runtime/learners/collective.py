"""What a learner needs from its peers when it trains as one rank of several: a mean and a broadcast.

The learners see only this protocol; ``runtime.distributed`` implements it over a torch.distributed
process group. ``SOLO`` is the single-process case: every call returns its input, so a run of one rank
does exactly the arithmetic it did before ranks existed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import torch

Params = dict[str, torch.Tensor]
# The temperature's gradient travels beside the actor's, under a key no module parameter can have.
ALPHA_GRAD = "<log_alpha>"


class CollectiveError(RuntimeError):
    """A collective call failed: a peer left the group, or the call ran past its timeout."""


class Collective(Protocol):
    """The peers of a data-parallel learner (every rank makes the same calls in the same order)."""

    @property
    def world_size(self) -> int: ...

    def mean(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The element-wise mean of each tensor over the ranks; identical bits on every rank."""
        ...

    def broadcast(self, tensors: Sequence[torch.Tensor], src: int) -> None:
        """Overwrite each tensor, in place, with rank ``src``'s."""
        ...


class Solo:
    """One rank alone: the mean of one is itself, and there is nobody to broadcast to."""

    world_size = 1

    def mean(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return list(tensors)

    def broadcast(self, tensors: Sequence[torch.Tensor], src: int) -> None:
        return None


SOLO = Solo()


def mean_params(collective: Collective, params: Mapping[str, torch.Tensor]) -> Params:
    """``params`` averaged over the ranks, keyed as given (a no-op for one rank)."""
    if collective.world_size == 1:
        return dict(params)
    keys = list(params)
    return dict(zip(keys, collective.mean([params[k] for k in keys]), strict=True))
