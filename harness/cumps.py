"""`cumps start | stop | status | doctor | env`: a user-owned CUDA MPS daemon for one physical GPU.

Exit codes: 0 success / healthy; 1 a prerequisite is unmet (status and doctor report it, e.g. no GPU);
2 invalid input or a refused action (nothing is changed).
"""

from __future__ import annotations

import os
import platform
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from foundation import mps
from foundation.nvml import NvmlReader

EXIT_UNMET = 1
EXIT_REFUSED = 2

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

GpusOpt = Annotated[str | None, typer.Option("--gpus", help="GPU index or UUID (required with several GPUs)")]
NameOpt = Annotated[str | None, typer.Option("--name", help="daemon name [default: gpu-<uuid>]")]
PipeOpt = Annotated[str | None, typer.Option("--pipe-dir", help="absolute pipe directory")]
LogOpt = Annotated[str | None, typer.Option("--log-dir", help="absolute log directory")]
TopologyOpt = Annotated[
    str, typer.Option("--topology", help="single_gpu | single_task_multi_gpu | task_per_gpu")
]


def _visible() -> tuple[list[mps.Gpu], str | None]:
    """Visible GPUs and, when there are none, the NVML reason."""
    with NvmlReader() as reader:
        snapshot = reader.snapshot()
    if not snapshot["available"]:
        return [], snapshot["reason"]
    return mps.visible_gpus(snapshot, os.environ.get("CUDA_VISIBLE_DEVICES")), None


def _refuse(message: str) -> typer.Exit:
    err.print(f"[bold red]cumps: refused:[/] {message}")
    return typer.Exit(EXIT_REFUSED)


def _pick_record(name: str | None) -> tuple[Path, mps.DaemonRecord]:
    live, stale = mps.live_records()
    if name is not None:
        mps.check_name(name)
        for path, record in live:
            if record.name == name:
                return path, record
        for path, _record, reason in stale:
            if path.stem == name:
                raise mps.CumpsError(
                    f"the record for {name!r} is stale ({reason}); run `cumps start --name {name}` to "
                    "quarantine it and start anew"
                )
        raise mps.CumpsError(f"no live daemon named {name!r} was started by cumps for this user on this host")
    if len(live) == 1:
        return live[0]
    if not live:
        raise mps.CumpsError("no live cumps-recorded daemon; run `cumps start`")
    names = ", ".join(r.name for _, r in live)
    raise mps.CumpsError(f"several live daemons ({names}); pass --name")


@app.command()
def start(
    gpus: GpusOpt = None,
    name: NameOpt = None,
    pipe_dir: PipeOpt = None,
    log_dir: LogOpt = None,
    topology: TopologyOpt = "single_gpu",
) -> None:
    """Start an MPS control daemon for one GPU and record its ownership."""
    try:
        mps.check_topology(topology)
        pipe = mps.check_abs_path(pipe_dir, "--pipe-dir") if pipe_dir else None
        logs = mps.check_abs_path(log_dir, "--log-dir") if log_dir else None
        if name is not None:
            mps.check_name(name)
        visible, reason = _visible()
        if reason is not None:
            raise mps.CumpsError(f"no GPU evidence: {reason}")
        gpu = mps.select_gpu(gpus, visible)[0]
        name = name or mps.default_name(gpu.uuid)
        pipe = pipe or mps.DEFAULT_ROOT / name / "pipe"
        logs = logs or mps.DEFAULT_ROOT / name / "log"
        binary = mps.resolve_binary()
        live, stale = mps.live_records()
        if any(r.name == name for _, r in live):
            raise mps.CumpsError(f"daemon {name!r} is already running; `cumps status` shows it")
        # Every record this host can prove stale is set aside (kept, with its reason), not only this
        # name's, so `status` and `doctor` stop reporting it; other hosts' records are left alone.
        for path, record, why in stale:
            if mps.ours_here(record):
                moved = mps.quarantine(path, why)
                out.print(f"quarantined stale record {path} -> {moved} ({why})")
        if mps.pipe_kind(pipe) != "missing":
            raise mps.CumpsError(
                f"{pipe}/control already exists and is not ours; refusing to reuse an unmanaged pipe"
            )
        # The shared default root and the per-daemon folder must be private too, not just the leaves.
        uses_default = (mps.DEFAULT_ROOT / name) in (pipe.parent, logs.parent)
        defaults = [mps.DEFAULT_ROOT, mps.DEFAULT_ROOT / name] if uses_default else []
        for directory in [*defaults, pipe, logs]:
            mps.ensure_private_dir(directory)
    except mps.CumpsError as exc:
        raise _refuse(str(exc)) from None
    env = {
        **os.environ,
        "CUDA_MPS_PIPE_DIRECTORY": str(pipe),
        "CUDA_MPS_LOG_DIRECTORY": str(logs),
        "CUDA_VISIBLE_DEVICES": gpu.uuid,
    }
    try:
        launched = subprocess.run([binary, "-d"], env=env, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _refuse(f"{binary} -d: {exc}; see {logs}/control.log") from None
    if launched.returncode != 0:
        raise _refuse(f"{binary} -d failed (exit {launched.returncode}): {launched.stderr.strip()}")
    pid = _wait_for_daemon(pipe)
    ticks = mps.start_ticks(pid) if pid is not None else None
    if pid is None or ticks is None:
        raise _refuse(
            f"the daemon did not stay up serving {pipe}/control within 10 s; see {logs}/control.log"
        )
    record = mps.DaemonRecord(
        name=name,
        uid=os.getuid(),
        host=socket.gethostname(),
        control_pid=pid,
        control_start_ticks=ticks,
        gpu_uuid=gpu.uuid,
        pipe_dir=str(pipe),
        log_dir=str(logs),
        started_unix=time.time(),
    )
    path = mps.write_record(record)
    out.print(f"started MPS daemon {name} (pid {pid}) for {gpu.uuid}; record {path}")


def _wait_for_daemon(pipe: Path, timeout_s: float = 10.0) -> int | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if mps.pipe_kind(pipe) == "fifo":
            pid = mps.find_control_pid(pipe)
            if pid is not None:
                return pid
        time.sleep(0.1)
    return None


@app.command()
def stop(name: NameOpt = None) -> None:
    """Send `quit` to a daemon this user started with cumps (ownership evidence checked); logs are kept."""
    try:
        path, record = _pick_record(name)
        binary = mps.resolve_binary()
        mps.control_command(binary, Path(record.pipe_dir), "quit")
    except mps.CumpsError as exc:
        raise _refuse(str(exc)) from None
    deadline = time.monotonic() + 10.0
    while mps.start_ticks(record.control_pid) == record.control_start_ticks and time.monotonic() < deadline:
        time.sleep(0.1)
    if mps.start_ticks(record.control_pid) == record.control_start_ticks:
        raise _refuse(f"daemon {record.name} (pid {record.control_pid}) did not exit within 10 s after quit")
    path.unlink()
    out.print(f"stopped MPS daemon {record.name}; logs kept in {record.log_dir}")


@app.command()
def env(name: NameOpt = None) -> None:
    """Print shell exports for a launcher or `eval "$(cumps env)"`; changes no environment itself."""
    try:
        _path, record = _pick_record(name)
    except mps.CumpsError as exc:
        raise _refuse(str(exc)) from None
    for key, value in (
        ("CUDA_MPS_PIPE_DIRECTORY", record.pipe_dir),
        ("CUDA_MPS_LOG_DIRECTORY", record.log_dir),
        ("CUDA_VISIBLE_DEVICES", record.gpu_uuid),
    ):
        print(f"export {key}={shlex.quote(value)}")


@app.command()
def status(gpus: GpusOpt = "all") -> None:
    """Read-only: visible GPUs, recorded daemons and their liveness."""
    visible, reason = _visible()
    if reason is not None:
        out.print(f"GPU: none visible ({reason})")
    else:
        try:
            chosen = mps.select_gpu(gpus, visible, read_only=True)
        except mps.CumpsError as exc:
            raise _refuse(str(exc)) from None
        for gpu in chosen:
            out.print(f"GPU {gpu.index}: {gpu.uuid} {gpu.name}")
    try:
        live, stale = mps.live_records()
    except mps.CumpsError as exc:
        raise _refuse(str(exc)) from None
    for _, record in live:
        out.print(
            f"daemon {record.name}: live pid {record.control_pid}, gpu {record.gpu_uuid}, pipe {record.pipe_dir}"
        )
    for path, record, why in stale:
        action = "the next `cumps start` quarantines it" if mps.ours_here(record) else "left to its host"
        out.print(f"daemon {path.stem}: STALE ({why}); {action}")
    if not live and not stale:
        out.print("daemons: none recorded")
    out.print(f"CUDA_MPS_PIPE_DIRECTORY={os.environ.get('CUDA_MPS_PIPE_DIRECTORY', '<unset>')}")
    if reason is not None:
        raise typer.Exit(EXIT_UNMET)


@dataclass(frozen=True)
class Finding:
    """One doctor check: ``fix`` names the command (or action) that meets it when ``ok`` is False."""

    check: str
    ok: bool
    detail: str = ""
    fix: str = ""


def doctor_findings(gpus: str | None) -> list[Finding]:
    """Every check in prerequisite order, each failing one with its fix; read-only."""
    selector = f" --gpus {gpus}" if gpus not in (None, "all") else ""
    system = platform.system()
    findings = [
        Finding(
            "Linux host",
            system == "Linux",
            f"MPS is Linux-only; this host is {system}",
            "run `uv run cumps doctor` on a Linux host with an NVIDIA GPU; here, train without "
            "training.cuda_process_sharing=mps",
        )
    ]
    visible, reason = _visible()
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    findings.append(
        Finding(
            "NVIDIA GPU visible through NVML",
            reason is None and bool(visible),
            reason or f"NVML sees GPUs but CUDA_VISIBLE_DEVICES={cvd!r} hides them all",
            "`nvidia-smi` must list the GPU: install or load the NVIDIA driver"
            if reason
            else "`unset CUDA_VISIBLE_DEVICES` or set it to one listed GPU",
        )
    )
    chosen: list[mps.Gpu] = []
    if reason is None and visible:
        try:
            chosen = mps.select_gpu(gpus, visible, read_only=gpus == "all")
            findings.append(Finding("one GPU selected", True))
        except mps.CumpsError as exc:
            first = visible[0].index
            findings.append(
                Finding("one GPU selected", False, str(exc), f"`uv run cumps doctor --gpus {first}`")
            )
    findings.append(
        Finding(
            f"{mps.CONTROL_BINARY} on PATH",
            mps.find_binary() is not None,
            "the driver's MPS control utility is missing",
            "install the driver's compute utilities, e.g. "
            "`sudo apt-get install nvidia-compute-utils-<driver-branch>`",
        )
    )
    try:
        live, stale = mps.live_records()
    except mps.UnreadableRecord as exc:
        findings.append(Finding("ownership records readable", False, str(exc), exc.fix))
        return findings
    ours = [(path, why) for path, record, why in stale if mps.ours_here(record)]
    findings.append(
        Finding(
            "no stale ownership records",
            not ours,
            "; ".join(f"{path.stem}: {why}" for path, why in ours),
            f"`uv run cumps start{selector}` quarantines them (kept under quarantine/) before it starts",
        )
    )
    uuids = {g.uuid for g in chosen}
    covering = [r for _, r in live if not uuids or r.gpu_uuid in uuids]
    findings.append(
        Finding(
            "a live cumps daemon" + (" for the selected GPU" if uuids else ""),
            bool(covering),
            "none is recorded" + (f" for {', '.join(sorted(uuids))}" if uuids else ""),
            f"`uv run cumps start{selector}`",
        )
    )
    return findings


@app.command()
def doctor(gpus: GpusOpt = None) -> None:
    """Read-only: name the first unmet prerequisite and the command that fixes it."""
    findings = doctor_findings(gpus)
    for f in findings:
        tail = "" if f.ok else f": {f.detail}; fix: {f.fix}"
        out.print(f"[{'green' if f.ok else 'red'}]{'ok  ' if f.ok else 'FAIL'}[/] {f.check}{tail}")
    first = next((f for f in findings if not f.ok), None)
    if first is not None:
        out.print(f"first unmet prerequisite: {first.check} -> fix: {first.fix}")
        raise typer.Exit(EXIT_UNMET)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="cumps")
