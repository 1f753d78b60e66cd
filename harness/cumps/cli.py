"""`cumps start | stop | status | doctor | env`: a user-owned CUDA MPS daemon for one physical GPU.

Exit codes: 0 success / healthy; 1 a prerequisite is unmet (status and doctor report it, e.g. no GPU);
2 invalid input or a refused action (nothing is changed). `status`, `doctor` and `env` take ``--json``:
one JSON document on stdout with the same exit code (a refusal still goes to stderr as text).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from soakbench.foundation import mps
from soakbench.foundation.mps_cleanup import ControlCleanup, clear_dead_control
from soakbench.harness.cumps.doctor import Finding, doctor_findings, visible_now

EXIT_UNMET = 1
EXIT_REFUSED = 2
JSON_SCHEMA_VERSION = 1  # of the --json documents; keys are only ever added

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
JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON document (stable keys, no markup)")]


def _refuse(message: str) -> typer.Exit:
    err.print(f"[bold red]cumps: refused:[/] {escape(message)}")
    return typer.Exit(EXIT_REFUSED)


def _say(message: str) -> None:
    """Plain text on stdout; paths and reasons may hold brackets that are not Rich markup."""
    out.print(escape(message))


def _emit_json(document: dict[str, Any]) -> None:
    print(
        json.dumps(
            {"schema_version": JSON_SCHEMA_VERSION, **document}, indent=2, sort_keys=True, allow_nan=False
        )
    )


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


# ---------------------------------------------------------------- start


@dataclass(frozen=True)
class StartPlan:
    """Everything `start` validated before it changes anything."""

    gpu: mps.Gpu
    name: str
    pipe: Path
    logs: Path
    binary: str


def _plan_start(
    gpus: str | None, name: str | None, pipe_dir: str | None, log_dir: str | None, topology: str
) -> StartPlan:
    mps.check_topology(topology)
    pipe = mps.check_abs_path(pipe_dir, "--pipe-dir") if pipe_dir else None
    if pipe is not None:
        mps.check_control_path(pipe, "--pipe-dir", "choose a shorter --pipe-dir")
    logs = mps.check_abs_path(log_dir, "--log-dir") if log_dir else None
    if name is not None:
        mps.check_name(name)
    visible, reason = visible_now()
    if reason is not None:
        raise mps.CumpsError(f"no GPU evidence: {reason}")
    gpu = mps.select_gpu(gpus, visible)[0]
    name = name or mps.default_name(gpu.uuid)
    if pipe is None:
        pipe = mps.check_control_path(
            mps.DEFAULT_ROOT / name / "pipe",
            "the default pipe directory",
            "pass a shorter --name or a short --pipe-dir",
        )
    logs = logs or mps.DEFAULT_ROOT / name / "log"
    return StartPlan(gpu, name, pipe, logs, mps.resolve_binary())


def _report_cleanup(record: mps.DaemonRecord, cleanup: ControlCleanup) -> None:
    for path in cleanup.removed:
        _say(f"removed leftover {path} of the dead daemon {record.name}")
    for entry in cleanup.left:
        _say(f"left {entry} in place")
    if cleanup.skipped is not None:
        _say(f"left {record.pipe_dir} untouched: {cleanup.skipped}")


def _set_aside_stale(stale: Sequence[mps.StaleRecord], live: Sequence[mps.DaemonRecord]) -> None:
    """Quarantine every record this host can prove stale, after clearing its dead daemon's control
    files; other hosts' records are theirs to judge."""
    for path, record, why in stale:
        if not mps.ours_here(record):
            continue
        cleanup = clear_dead_control(record, live)
        _report_cleanup(record, cleanup)
        removed = ", ".join(str(p) for p in cleanup.removed)
        moved = mps.quarantine(path, why + (f"; removed leftover {removed}" if removed else ""))
        _say(f"quarantined stale record {path} -> {moved} ({why})")


def _prepare(plan: StartPlan) -> None:
    """Refuse a running or unmanaged daemon, set stale records aside, create the private dirs."""
    live, stale = mps.live_records()
    if any(r.name == plan.name for _, r in live):
        raise mps.CumpsError(f"daemon {plan.name!r} is already running; `cumps status` shows it")
    # Every provably stale record is set aside, not only this name's, so `status` and `doctor` stop
    # reporting it.
    _set_aside_stale(stale, [r for _, r in live])
    if mps.pipe_kind(plan.pipe) != "missing":
        raise mps.CumpsError(
            f"{plan.pipe}/control already exists and is not ours; refusing to reuse an unmanaged pipe"
        )
    # The shared default root and the per-daemon folder must be private too, not just the leaves.
    own_root = mps.DEFAULT_ROOT / plan.name
    defaults = [mps.DEFAULT_ROOT, own_root] if own_root in (plan.pipe.parent, plan.logs.parent) else []
    for directory in [*defaults, plan.pipe, plan.logs]:
        mps.ensure_private_dir(directory)


def _wait_for_daemon(pipe: Path, timeout_s: float = 10.0) -> tuple[int, str] | None:
    """The control PID and control kind (socket | fifo) once a daemon serves ``pipe``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        kind = mps.pipe_kind(pipe)
        if kind in mps.CONTROL_KINDS:
            pid = mps.find_control_pid(pipe)
            if pid is not None:
                return pid, kind
        time.sleep(0.1)
    return None


def _launch(plan: StartPlan) -> mps.DaemonRecord:
    env = {
        **os.environ,
        "CUDA_MPS_PIPE_DIRECTORY": str(plan.pipe),
        "CUDA_MPS_LOG_DIRECTORY": str(plan.logs),
        "CUDA_VISIBLE_DEVICES": plan.gpu.uuid,
    }
    try:
        launched = subprocess.run([plan.binary, "-d"], env=env, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _refuse(f"{plan.binary} -d: {exc}; see {plan.logs}/control.log") from None
    if launched.returncode != 0:
        raise _refuse(f"{plan.binary} -d failed (exit {launched.returncode}): {launched.stderr.strip()}")
    served = _wait_for_daemon(plan.pipe)
    ticks = mps.start_ticks(served[0]) if served is not None else None
    if served is None or ticks is None:
        raise _refuse(
            f"the daemon did not stay up serving {plan.pipe}/control within 10 s; see {plan.logs}/control.log"
        )
    return mps.DaemonRecord(
        name=plan.name,
        uid=os.getuid(),
        host=socket.gethostname(),
        control_pid=served[0],
        control_start_ticks=ticks,
        gpu_uuid=plan.gpu.uuid,
        pipe_dir=str(plan.pipe),
        log_dir=str(plan.logs),
        started_unix=time.time(),
        control_pipe_kind=served[1],
    )


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
        plan = _plan_start(gpus, name, pipe_dir, log_dir, topology)
        _prepare(plan)
    except mps.CumpsError as exc:
        raise _refuse(str(exc)) from None
    record = _launch(plan)
    path = mps.write_record(record)
    _say(
        f"started MPS daemon {record.name} (pid {record.control_pid}, control {record.control_pipe_kind}) "
        f"for {record.gpu_uuid}; record {path}"
    )


# ---------------------------------------------------------------- stop, env


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
    _say(f"stopped MPS daemon {record.name}; logs kept in {record.log_dir}")


@app.command()
def env(name: NameOpt = None, as_json: JsonOpt = False) -> None:
    """Print shell exports for a launcher or `eval "$(cumps env)"`; changes no environment itself."""
    try:
        _path, record = _pick_record(name)
    except mps.CumpsError as exc:
        raise _refuse(str(exc)) from None
    exports = {
        "CUDA_MPS_PIPE_DIRECTORY": record.pipe_dir,
        "CUDA_MPS_LOG_DIRECTORY": record.log_dir,
        "CUDA_VISIBLE_DEVICES": record.gpu_uuid,
    }
    if as_json:
        _emit_json({"name": record.name, "exports": exports})
        return
    for key, value in exports.items():
        print(f"export {key}={shlex.quote(value)}")


# ---------------------------------------------------------------- status


def _daemon_row(record: mps.DaemonRecord, name: str, stale_reason: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "state": "stale" if stale_reason else "live",
        "stale_reason": stale_reason,
        "quarantined_by_next_start": bool(stale_reason) and mps.ours_here(record),
        "control_pid": record.control_pid,
        "gpu_uuid": record.gpu_uuid,
        "pipe_dir": record.pipe_dir,
        "log_dir": record.log_dir,
        "control_pipe_kind": mps.pipe_kind(Path(record.pipe_dir)),
    }


def status_report(gpus: str | None) -> dict[str, Any]:
    """What `status` shows, as data: the GPUs, every recorded daemon and the ambient pipe directory."""
    visible, reason = visible_now()
    chosen = [] if reason is not None else mps.select_gpu(gpus, visible, read_only=True)
    live, stale = mps.live_records()
    daemons = [_daemon_row(record, record.name, None) for _, record in live]
    daemons += [_daemon_row(record, path.stem, why) for path, record, why in stale]
    return {
        "gpu": {
            "available": reason is None,
            "reason": reason,
            "devices": [{"index": g.index, "uuid": g.uuid, "name": g.name} for g in chosen],
        },
        "daemons": daemons,
        "cuda_mps_pipe_directory": os.environ.get("CUDA_MPS_PIPE_DIRECTORY"),
    }


def _print_status(report: dict[str, Any]) -> None:
    gpu = report["gpu"]
    if not gpu["available"]:
        _say(f"GPU: none visible ({gpu['reason']})")
    for device in gpu["devices"]:
        _say(f"GPU {device['index']}: {device['uuid']} {device['name']}")
    for row in report["daemons"]:
        if row["state"] == "live":
            _say(
                f"daemon {row['name']}: live pid {row['control_pid']}, gpu {row['gpu_uuid']}, "
                f"pipe {row['pipe_dir']}, control {row['control_pipe_kind']}"
            )
        else:
            action = (
                "the next `cumps start` quarantines it"
                if row["quarantined_by_next_start"]
                else "left to its host"
            )
            _say(f"daemon {row['name']}: STALE ({row['stale_reason']}); {action}")
    if not report["daemons"]:
        _say("daemons: none recorded")
    _say(f"CUDA_MPS_PIPE_DIRECTORY={report['cuda_mps_pipe_directory'] or '<unset>'}")


@app.command()
def status(gpus: GpusOpt = "all", as_json: JsonOpt = False) -> None:
    """Read-only: visible GPUs, recorded daemons and their liveness."""
    try:
        report = status_report(gpus)
    except mps.CumpsError as exc:
        raise _refuse(str(exc)) from None
    if as_json:
        _emit_json(report)
    else:
        _print_status(report)
    if not report["gpu"]["available"]:
        raise typer.Exit(EXIT_UNMET)


# ---------------------------------------------------------------- doctor


def _print_findings(findings: Sequence[Finding]) -> None:
    for f in findings:
        if f.ok:
            tail = f": {escape(f.detail)}" if f.detail else ""
            out.print(f"[green]ok  [/] {escape(f.check)}{tail}")
        else:
            out.print(f"[red]FAIL[/] {escape(f.check)}: {escape(f.detail)}; fix: {escape(f.fix)}")


@app.command()
def doctor(gpus: GpusOpt = None, as_json: JsonOpt = False) -> None:
    """Read-only: name the first unmet prerequisite and the command that fixes it."""
    findings = doctor_findings(gpus)
    first = next((f for f in findings if not f.ok), None)
    if as_json:
        _emit_json(
            {
                "ok": first is None,
                "findings": [asdict(f) for f in findings],
                "first_unmet": None if first is None else {"check": first.check, "fix": first.fix},
            }
        )
    else:
        _print_findings(findings)
        if first is not None:
            _say(f"first unmet prerequisite: {first.check} -> fix: {first.fix}")
    if first is not None:
        raise typer.Exit(EXIT_UNMET)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="cumps")


if __name__ == "__main__":
    main()
