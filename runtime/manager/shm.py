"""Named shared-memory segments for the trainer and its collector.

Every segment the trainer creates is named ``soakbench_<trainer pid>_<role>_<n>`` so leftovers are
attributable (the soak monitor looks for that prefix in /dev/shm). The creating process owns a
segment and is the only one that unlinks it; an attaching process only closes its mapping.

Two kinds of content live here:

* :class:`SharedCounters` — a small header of named int64 and float64 fields. Each field has a single
  writer process, so plain aligned 8-byte stores are enough (no torn values on the platforms we run);
  the doorbell syscall that follows every publication orders the data before the counter for the peer.
* :class:`SharedTensor` — a float32 buffer viewed as a torch tensor (``torch.frombuffer``) on CPU, or
  a CUDA tensor shared through CUDA IPC when the collector's device is CUDA.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any

SHM_PREFIX = "soakbench_"
_serial = itertools.count()


def segment_name(role: str, pid: int | None = None) -> str:
    """A fresh segment name ``soakbench_<pid>_<role>_<n>`` (``n`` counts within this process)."""
    return f"{SHM_PREFIX}{pid if pid is not None else os.getpid()}_{role}_{next(_serial)}"


class Segment:
    """One POSIX shared-memory segment, created (owner) or attached (peer)."""

    def __init__(self, name: str, size: int | None = None) -> None:
        self.owner = size is not None
        if size is not None:
            self._shm = shared_memory.SharedMemory(name=name, create=True, size=max(1, size))
        else:
            self._shm = shared_memory.SharedMemory(name=name, create=False)
        self.name = name
        self._closed = False
        self._unlinked = False

    @property
    def closed(self) -> bool:
        """True once this process's mapping is released."""
        return self._closed

    @property
    def buf(self) -> memoryview:
        if self._closed:
            raise RuntimeError(f"shared-memory segment {self.name} is closed")
        assert self._shm.buf is not None
        return self._shm.buf

    def close(self) -> None:
        """Drop this process's mapping; idempotent. All views into ``buf`` must be released first."""
        if not self._closed:
            self._closed = True
            self._shm.close()

    def unlink(self) -> None:
        """Remove the name from the system (owner only); idempotent and tolerant of prior removal."""
        if self.owner and not self._unlinked:
            self._unlinked = True
            with contextlib.suppress(FileNotFoundError):
                self._shm.unlink()


@dataclass(frozen=True)
class CountersSpec:
    """Picklable description of a :class:`SharedCounters` block (sent to the collector)."""

    name: str
    int_fields: tuple[str, ...]
    float_fields: tuple[str, ...]


class SharedCounters:
    """Named int64/float64 fields in one shared segment; attribute-style ``get``/``set``/``add``."""

    def __init__(self, segment: Segment, int_fields: Sequence[str], float_fields: Sequence[str]) -> None:
        self.segment = segment
        self.int_fields = tuple(int_fields)
        self.float_fields = tuple(float_fields)
        ni, nf = len(self.int_fields), len(self.float_fields)
        raw = segment.buf
        self._ints: Any = raw[: 8 * ni].cast("q") if ni else None  # memoryview of int64
        self._floats: Any = raw[8 * ni : 8 * (ni + nf)].cast("d") if nf else None  # memoryview of float64
        self._iidx = {k: i for i, k in enumerate(self.int_fields)}
        self._fidx = {k: i for i, k in enumerate(self.float_fields)}

    @classmethod
    def create(cls, role: str, int_fields: Sequence[str], float_fields: Sequence[str]) -> SharedCounters:
        seg = Segment(segment_name(role), size=8 * (len(int_fields) + len(float_fields)))
        counters = cls(seg, int_fields, float_fields)
        for k in counters.int_fields:
            counters.set(k, 0)
        for k in counters.float_fields:
            counters.setf(k, 0.0)
        return counters

    @classmethod
    def attach(cls, spec: CountersSpec) -> SharedCounters:
        return cls(Segment(spec.name), spec.int_fields, spec.float_fields)

    @property
    def spec(self) -> CountersSpec:
        return CountersSpec(self.segment.name, self.int_fields, self.float_fields)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` released the mapping (no field can be read any more)."""
        return self.segment.closed

    def get(self, key: str) -> int:
        assert self._ints is not None
        return int(self._ints[self._iidx[key]])

    def set(self, key: str, value: int) -> None:
        assert self._ints is not None
        self._ints[self._iidx[key]] = int(value)

    def add(self, key: str, delta: int = 1) -> int:
        """Single-writer increment; returns the new value."""
        assert self._ints is not None
        i = self._iidx[key]
        self._ints[i] = v = self._ints[i] + int(delta)
        return int(v)

    def getf(self, key: str) -> float:
        assert self._floats is not None
        return float(self._floats[self._fidx[key]])

    def setf(self, key: str, value: float) -> None:
        assert self._floats is not None
        self._floats[self._fidx[key]] = float(value)

    def addf(self, key: str, delta: float) -> None:
        assert self._floats is not None
        self._floats[self._fidx[key]] += float(delta)

    def snapshot(self) -> dict[str, int | float]:
        out: dict[str, int | float] = {k: self.get(k) for k in self.int_fields}
        out.update({k: self.getf(k) for k in self.float_fields})
        return out

    def close(self) -> None:
        """Release the views, close the mapping, and unlink if owner; idempotent."""
        for view in (self._ints, self._floats):
            if view is not None:
                view.release()
        self._ints = self._floats = None
        try:
            self.segment.close()
        finally:
            self.segment.unlink()


@dataclass(frozen=True)
class TensorSpec:
    """Picklable description of a :class:`SharedTensor`: a shm name (CPU) or a CUDA tensor (IPC)."""

    shape: tuple[int, ...]
    name: str | None = None
    cuda_tensor: Any = None  # torch.Tensor on CUDA, pickled through torch.multiprocessing reductions


class SharedTensor:
    """A float32 tensor of ``shape`` shared between the trainer and the collector.

    CPU: a shm segment viewed with ``torch.frombuffer``. CUDA: a device tensor allocated by the trainer
    and mapped into the collector via CUDA IPC (both processes bound to the same device); the trainer
    keeps its tensor alive until the collector has exited.
    """

    def __init__(self, tensor: Any, segment: Segment | None, spec: TensorSpec) -> None:
        self.tensor = tensor
        self.segment = segment
        self.spec = spec

    @classmethod
    def create(cls, role: str, shape: Sequence[int], device: Any) -> SharedTensor:
        import torch

        shape_t = tuple(int(s) for s in shape)
        numel = 1
        for s in shape_t:
            numel *= s
        if torch.device(device).type == "cuda":
            import torch.multiprocessing

            tensor = torch.zeros(shape_t, dtype=torch.float32, device=device)
            return cls(tensor, None, TensorSpec(shape_t, cuda_tensor=tensor))
        if torch.device(device).type != "cpu":
            raise ValueError(f"shared tensors live on cpu or cuda, not {device}")
        seg = Segment(segment_name(role), size=4 * numel)
        tensor = torch.frombuffer(seg.buf, dtype=torch.float32, count=numel).view(shape_t)
        tensor.zero_()
        return cls(tensor, seg, TensorSpec(shape_t, name=seg.name))

    @classmethod
    def attach(cls, spec: TensorSpec) -> SharedTensor:
        import torch

        if spec.cuda_tensor is not None:
            return cls(spec.cuda_tensor, None, spec)
        assert spec.name is not None
        seg = Segment(spec.name)
        numel = 1
        for s in spec.shape:
            numel *= s
        tensor = torch.frombuffer(seg.buf, dtype=torch.float32, count=numel).view(spec.shape)
        return cls(tensor, seg, spec)

    def close(self) -> None:
        """Drop the tensor view, close the mapping and unlink if owner; idempotent.

        Callers must not keep views of ``tensor`` (slices) alive past this call."""
        self.tensor = None
        if self.segment is not None:
            try:
                self.segment.close()
            finally:
                self.segment.unlink()


def create_header_and_data(
    role: str, int_fields: Sequence[str], float_fields: Sequence[str], shape: Sequence[int], device: Any
) -> tuple[SharedCounters, SharedTensor]:
    """A counters header ``<role>_hdr`` plus a data tensor ``<role>_data``; no segment survives a failure."""
    counters = SharedCounters.create(f"{role}_hdr", int_fields, float_fields)
    try:
        return counters, SharedTensor.create(f"{role}_data", shape, device)
    except BaseException:
        counters.close()
        raise


def attach_header_and_data(counters: CountersSpec, data: TensorSpec) -> tuple[SharedCounters, SharedTensor]:
    """The attaching side of :func:`create_header_and_data`; closes the header if the data fails."""
    header = SharedCounters.attach(counters)
    try:
        return header, SharedTensor.attach(data)
    except BaseException:
        header.close()
        raise


def list_segments(prefix: str = SHM_PREFIX) -> list[str]:
    """Names in /dev/shm starting with ``prefix`` (empty where /dev/shm does not exist)."""
    try:
        return sorted(n for n in os.listdir("/dev/shm") if n.startswith(prefix))
    except FileNotFoundError:
        return []
