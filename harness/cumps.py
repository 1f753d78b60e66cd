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
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from harness import mps
from harness.nvml import NvmlReader

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
        for path, reason in stale:
            if path.stem == name:
                raise mps.CumpsError(
                    f"the record for {name!r} is stale ({reason}); run `cumps start` to replace it"
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
        for path, why in stale:
            if path.stem == name:
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
    launched = subprocess.run([binary, "-d"], env=env, capture_output=True, text=True, timeout=30)
    if launched.returncode != 0:
        raise _refuse(f"{binary} -d failed (exit {launched.returncode}): {launched.stderr.strip()}")
    pid = _wait_for_daemon(pipe)
    if pid is None:
        raise _refuse(f"the daemon did not open {pipe}/control within 10 s; see {logs}/control.log")
    ticks = mps.start_ticks(pid)
    assert ticks is not None
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
    live, stale = mps.live_records()
    for _, record in live:
        out.print(
            f"daemon {record.name}: live pid {record.control_pid}, gpu {record.gpu_uuid}, pipe {record.pipe_dir}"
        )
    for path, why in stale:
        out.print(f"daemon {path.stem}: STALE ({why}); the next `cumps start` quarantines it")
    if not live and not stale:
        out.print("daemons: none recorded")
    out.print(f"CUDA_MPS_PIPE_DIRECTORY={os.environ.get('CUDA_MPS_PIPE_DIRECTORY', '<unset>')}")
    if reason is not None:
        raise typer.Exit(EXIT_UNMET)


def doctor_findings(gpus: str | None) -> list[tuple[str, bool, str]]:
    """(check, ok, detail-or-fix) in prerequisite order; read-only."""
    findings: list[tuple[str, bool, str]] = []
    findings.append(("Linux host", platform.system() == "Linux", "MPS is Linux-only"))
    visible, reason = _visible()
    findings.append(
        (
            "NVIDIA GPU visible through NVML",
            reason is None and bool(visible),
            reason or "install the NVIDIA driver; check `CUDA_VISIBLE_DEVICES`",
        )
    )
    if reason is None and visible:
        try:
            mps.select_gpu(gpus, visible, read_only=gpus == "all")
            findings.append(("one GPU selected", True, ""))
        except mps.CumpsError as exc:
            findings.append(("one GPU selected", False, f"{exc}; e.g. `cumps doctor --gpus 0`"))
    has_binary = mps.shutil.which(mps.CONTROL_BINARY) is not None
    findings.append((f"{mps.CONTROL_BINARY} on PATH", has_binary, "install the driver's MPS utilities"))
    live, stale = mps.live_records()
    findings.append(
        (
            "no stale ownership records",
            not stale,
            "; ".join(f"{p.stem}: {why}" for p, why in stale) + " -> `cumps start` quarantines them",
        )
    )
    findings.append(("a live cumps daemon", bool(live), "run `cumps start`"))
    return findings


@app.command()
def doctor(gpus: GpusOpt = None) -> None:
    """Read-only: name the first unmet prerequisite and the command that fixes it."""
    findings = doctor_findings(gpus)
    for check, ok, detail in findings:
        out.print(
            f"[{'green' if ok else 'red'}]{'ok  ' if ok else 'FAIL'}[/] {check}"
            + ("" if ok else f": {detail}")
        )
    first = next(((c, d) for c, ok, d in findings if not ok), None)
    if first is not None:
        out.print(f"first unmet prerequisite: {first[0]} -> {first[1]}")
        raise typer.Exit(EXIT_UNMET)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="cumps")
