"""CUDA MPS daemon lifecycle logic behind the `cumps` CLI and the trainer's MPS validation.

Ownership model: `cumps start` launches ``nvidia-cuda-mps-control -d`` for one physical GPU and writes an
ownership record (uid, host, control PID and its start ticks, GPU UUID, directories, name) under the
user's cache directory. Every later action trusts only a record whose evidence still matches a live
process: same uid, same host, same PID *and* same start ticks (so a recycled PID is not mistaken for our
daemon). A record whose evidence no longer matches is stale and is quarantined (renamed aside), never
deleted; the ``control*`` files its dead daemon left in its own pipe directory are removed then
(``foundation.mps_cleanup``).
`quit` is only ever sent to a daemon proven ours this way.

The control endpoint ``<pipe_dir>/control`` is a Unix socket on current drivers and a FIFO on older
ones; both are accepted and the kind is recorded.

Pure pieces (selection, validation, liveness) take data; the edges read /proc, NVML and the filesystem.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from soakbench.foundation.atomic import write_atomic

CONTROL_BINARY = "nvidia-cuda-mps-control"
RECORD_SCHEMA_VERSION = 1
DEFAULT_ROOT = Path("/tmp/cumps")
CONTROL_KINDS = ("socket", "fifo")  # what a serving daemon leaves at <pipe_dir>/control
SOCKET_PATH_LIMIT = 107  # Linux sun_path holds 108 bytes, the last one the terminating NUL
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
TOPOLOGY_MODES: dict[str, str | None] = {
    "single_gpu": None,  # implemented
    "single_task_multi_gpu": "one rank per GPU needs the multi-GPU gate, which is not open in this release",
    "task_per_gpu": "packing independent tasks one per GPU needs the multi-GPU gate, which is not open",
}
MULTI_GPU_GATE = "MPS over several GPUs is behind the multi-GPU gate (docs/production-guide.md, Multi-GPU gate); this release runs MPS on one GPU"


class CumpsError(Exception):
    """A refusal with a user-facing reason; the CLI prints it and exits 2."""


class UnreadableRecord(CumpsError):
    """An ownership record that cannot be parsed; ``fix`` is the command that sets it aside."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str


@dataclass(frozen=True)
class DaemonRecord:
    """Ownership evidence for one daemon started by `cumps start`."""

    name: str
    uid: int
    host: str
    control_pid: int
    control_start_ticks: int
    gpu_uuid: str
    pipe_dir: str
    log_dir: str
    started_unix: float
    schema_version: int = RECORD_SCHEMA_VERSION
    control_pipe_kind: str | None = None  # socket | fifo; None in records written before it was kept


# ---------------------------------------------------------------- pure validation and selection


def visible_gpus(snapshot: Mapping[str, Any], cuda_visible_devices: str | None) -> list[Gpu]:
    """GPUs a CUDA process would see: NVML devices filtered by ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs)."""
    devices = [
        Gpu(int(d["index"]), str(d["uuid"]), str(d.get("name", ""))) for d in snapshot.get("devices", [])
    ]
    if cuda_visible_devices is None:
        return devices
    picked: list[Gpu] = []
    for token in (t.strip() for t in cuda_visible_devices.split(",")):
        if not token:
            continue
        match = [
            g for g in devices if (token.isdigit() and g.index == int(token)) or g.uuid.startswith(token)
        ]
        if not match:
            break  # CUDA stops at the first invalid entry
        picked.extend(m for m in match[:1] if m not in picked)
    return picked


def select_gpu(selector: str | None, visible: Sequence[Gpu], *, read_only: bool = False) -> list[Gpu]:
    """Resolve ``--gpus`` to physical GPUs; only a single GPU is allowed unless ``read_only``."""
    if selector is not None:
        selector = selector.strip()
        if selector == "all":
            if not read_only:
                raise CumpsError("--gpus all is accepted only by read-only diagnostics (status, doctor)")
            return list(visible)
        if "," in selector:
            raise CumpsError(f"--gpus {selector!r} lists several GPUs; {MULTI_GPU_GATE}")
        if selector.upper().startswith("MIG-"):
            raise CumpsError(
                f"--gpus {selector!r} is a MIG instance UUID; MPS here is managed per physical GPU only"
            )
        if selector.isdigit():
            found = [g for g in visible if g.index == int(selector)]
        else:
            found = [g for g in visible if g.uuid == selector or g.uuid.lower() == f"gpu-{selector}".lower()]
        if not found:
            shown = ", ".join(f"{g.index}={g.uuid}" for g in visible) or "none"
            raise CumpsError(f"--gpus {selector!r} matches no visible GPU; visible: {shown}")
        return found
    if not visible:
        raise CumpsError("no NVIDIA GPU is visible on this host; MPS needs one CUDA GPU")
    if len(visible) > 1 and not read_only:
        raise CumpsError(f"{len(visible)} GPUs are visible; pass --gpus <index-or-uuid> to choose one")
    return list(visible) if read_only else [visible[0]]


def check_topology(mode: str) -> None:
    if mode not in TOPOLOGY_MODES:
        raise CumpsError(f"--topology {mode!r} is unknown; allowed: {', '.join(TOPOLOGY_MODES)}")
    reason = TOPOLOGY_MODES[mode]
    if reason is not None:
        raise CumpsError(f"--topology {mode} is parsed but not supported: {reason}; {MULTI_GPU_GATE}")


def default_name(gpu_uuid: str) -> str:
    """``gpu-<full-uuid>``, the NVML ``GPU-`` prefix folded into the ``gpu-`` prefix."""
    bare = gpu_uuid[4:] if gpu_uuid.upper().startswith("GPU-") else gpu_uuid
    return f"gpu-{bare.lower()}"


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise CumpsError(
            f"--name {name!r} is not allowed; use 1-128 of [A-Za-z0-9_.-], starting alphanumeric"
        )
    return name


def check_abs_path(value: str, flag: str) -> Path:
    if not os.path.isabs(value):
        raise CumpsError(f"{flag} {value!r} must be an absolute path")
    if ".." in Path(value).parts:
        raise CumpsError(f"{flag} {value!r} must not contain '..' components")
    return Path(os.path.normpath(value))


def check_control_path(pipe_dir: Path, source: str, hint: str) -> Path:
    """Refuse a pipe directory whose ``control`` socket path would not fit in ``sun_path``."""
    control = pipe_dir / "control"
    size = len(os.fsencode(str(control)))
    if size > SOCKET_PATH_LIMIT:
        raise CumpsError(
            f"{source} {pipe_dir} is too long: its control socket path {control} is {size} bytes, over "
            f"the {SOCKET_PATH_LIMIT}-byte limit of a Unix socket path (108 with the terminating NUL); {hint}"
        )
    return pipe_dir


def record_is_live(
    record: DaemonRecord, *, uid: int, host: str, start_ticks_of: Callable[[int], int | None]
) -> str | None:
    """None when the record's evidence matches a live process, else why it is stale.

    ``start_ticks_of(pid)`` returns the process's start ticks, or None when it does not exist."""
    if record.uid != uid:
        return f"record belongs to uid {record.uid}, not {uid}"
    if record.host != host:
        return f"record was written on host {record.host!r}, not {host!r}"
    ticks = start_ticks_of(record.control_pid)
    if ticks is None:
        return f"control process {record.control_pid} is gone"
    if ticks != record.control_start_ticks:
        return f"PID {record.control_pid} now belongs to another process (start ticks differ)"
    return None


# ---------------------------------------------------------------- edges: /proc, records, dirs


def start_ticks(pid: int) -> int | None:
    """Start time in clock ticks since boot (/proc/<pid>/stat field 22), or None if no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[19])


def records_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "soakbench" / "cumps"


def load_records(directory: Path | None = None) -> list[tuple[Path, DaemonRecord]]:
    directory = directory or records_dir()
    found: list[tuple[Path, DaemonRecord]] = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            data = json.loads(path.read_text())
            found.append((path, DaemonRecord(**data)))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
            fix = f"`mv {shlex.quote(str(path))} {shlex.quote(str(path))}.unreadable`"
            raise UnreadableRecord(
                f"{path}: unreadable ownership record ({exc}); move it aside to continue: {fix}", fix
            ) from None
    return found


def write_record(record: DaemonRecord, directory: Path | None = None) -> Path:
    directory = directory or records_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{record.name}.json"
    return write_atomic(path, json.dumps(asdict(record), indent=2, sort_keys=True), mode=0o600)


def quarantine(path: Path, reason: str) -> Path:
    """Move a stale record aside (kept for inspection) with the reason next to it."""
    target_dir = path.parent / "quarantine"
    target_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = target_dir / f"{path.stem}.{int(time.time() * 1000)}.json"
    os.replace(path, target)
    write_atomic(target.with_suffix(".reason.txt"), reason + "\n", mode=0o600)
    return target


StaleRecord = tuple[Path, DaemonRecord, str]  # (file, record, why its evidence no longer holds)


def live_records(directory: Path | None = None) -> tuple[list[tuple[Path, DaemonRecord]], list[StaleRecord]]:
    """Split records into live ones and stale ones (with reasons); reads only."""
    uid, host = os.getuid(), socket.gethostname()
    live: list[tuple[Path, DaemonRecord]] = []
    stale: list[StaleRecord] = []
    for path, record in load_records(directory):
        reason = record_is_live(record, uid=uid, host=host, start_ticks_of=start_ticks)
        (stale.append((path, record, reason)) if reason else live.append((path, record)))
    return live, stale


def ours_here(record: DaemonRecord) -> bool:
    """Written by this uid on this host: only then can this host prove the record stale (a cache
    directory shared between hosts holds other hosts' records, which are theirs to judge)."""
    return record.uid == os.getuid() and record.host == socket.gethostname()


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) with mode 0700, or refuse an existing one we do not own
    privately."""
    if path.exists():
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode):
            raise CumpsError(f"{path} exists and is not a directory")
        if info.st_uid != os.getuid():
            raise CumpsError(f"{path} is owned by uid {info.st_uid}, not {os.getuid()}; refusing to use it")
        if stat.S_IMODE(info.st_mode) != 0o700:
            raise CumpsError(
                f"{path} has mode {oct(stat.S_IMODE(info.st_mode))}, expected 0o700; fix or remove it"
            )
        return
    path.mkdir(parents=True, mode=0o700)
    os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask


def find_control_pid(pipe_dir: Path, binary_name: str = CONTROL_BINARY) -> int | None:
    """The PID of the control daemon serving ``pipe_dir``: a process running ``binary_name`` whose
    environment names that pipe directory."""
    wanted = f"CUDA_MPS_PIPE_DIRECTORY={pipe_dir}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not any(os.path.basename(a.decode(errors="replace")) == binary_name for a in argv[:2]):
                continue
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                return int(entry.name)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return None


def control_command(binary: str, pipe_dir: Path, command: str, timeout_s: float = 10.0) -> str:
    """Send one command line to the control daemon at ``pipe_dir`` and return its answer."""
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(pipe_dir)}
    try:
        result = subprocess.run(
            [binary], input=command + "\n", capture_output=True, text=True, env=env, timeout=timeout_s
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CumpsError(f"{binary} {command!r} via {pipe_dir}: {exc}") from None
    if result.returncode != 0:
        raise CumpsError(f"{binary} {command!r} failed (exit {result.returncode}): {result.stderr.strip()}")
    return result.stdout


def find_binary() -> str | None:
    """Path of the MPS control binary on PATH, or None."""
    return shutil.which(CONTROL_BINARY)


def resolve_binary() -> str:
    found = find_binary()
    if found is None:
        raise CumpsError(
            f"{CONTROL_BINARY} is not on PATH; install the NVIDIA driver's MPS utilities on this host"
        )
    return found


def pipe_kind(pipe_dir: Path) -> str:
    """What sits at ``<pipe_dir>/control`` (a symlink is not followed): socket, fifo, other, or missing."""
    try:
        mode = (pipe_dir / "control").lstat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "fifo" if stat.S_ISFIFO(mode) else "other"


def resolve_for_training(
    gpu_uuid: str | None, environ: Mapping[str, str], directory: Path | None = None
) -> dict[str, Any]:
    """Validate ``training.cuda_process_sharing=mps`` before anything is built.

    An explicit ``CUDA_MPS_PIPE_DIRECTORY`` wins; else the sole live recorded daemon covering
    ``gpu_uuid``; else CumpsError pointing to `cumps start`."""
    explicit = environ.get("CUDA_MPS_PIPE_DIRECTORY")
    if explicit:
        pipe_dir = Path(explicit)
        kind = pipe_kind(pipe_dir)
        if kind not in CONTROL_KINDS:
            raise CumpsError(
                f"CUDA_MPS_PIPE_DIRECTORY={explicit} has no control pipe ({pipe_dir / 'control'} is {kind}, "
                "expected a socket or a FIFO); start the daemon with `cumps start` or unset the variable"
            )
        return {
            "source": "environment",
            "pipe_dir": str(pipe_dir),
            "control_pipe_kind": kind,
            "control_pid": find_control_pid(pipe_dir),
            "gpu_uuid": gpu_uuid,
            "name": None,
        }
    live, _stale = live_records(directory)
    covering = [r for _, r in live if gpu_uuid is None or r.gpu_uuid == gpu_uuid]
    if not covering:
        raise CumpsError(
            "training.cuda_process_sharing=mps needs a live MPS daemon for GPU "
            f"{gpu_uuid or '<unknown>'} and none is recorded; run `cumps start` first"
        )
    if len(covering) > 1:
        names = ", ".join(r.name for r in covering)
        raise CumpsError(
            f"several live MPS daemons cover this GPU ({names}); export CUDA_MPS_PIPE_DIRECTORY from `cumps env --name X`"
        )
    record = covering[0]
    return {
        "source": "record",
        "pipe_dir": record.pipe_dir,
        "control_pipe_kind": pipe_kind(Path(record.pipe_dir)),
        "control_pid": record.control_pid,
        "gpu_uuid": record.gpu_uuid,
        "name": record.name,
    }


def ambient_facts(environ: Mapping[str, str]) -> dict[str, Any]:
    """What an unconfigured CUDA run observes about MPS; never raises, unknown facts are None."""
    raw = environ.get("CUDA_MPS_PIPE_DIRECTORY")
    pipe_dir = Path(raw) if raw else Path("/tmp/nvidia-mps")  # the driver's default pipe directory
    kind = pipe_kind(pipe_dir)
    server_pid: int | None = None
    if kind in CONTROL_KINDS:
        binary = find_binary()
        if binary is not None:
            try:
                answer = control_command(binary, pipe_dir, "get_server_list", timeout_s=3.0).split()
                server_pid = int(answer[0]) if answer and answer[0].isdigit() else None
            except CumpsError:
                server_pid = None
    return {
        "raw_cuda_mps_pipe_directory": raw,
        "effective_pipe_dir": str(pipe_dir),
        "control_pipe_kind": kind,
        "server_pid": server_pid,
        "ambient_server": server_pid is not None,
    }
