"""`cumps doctor`'s checks, in prerequisite order, each failing one with the command that fixes it.

Read-only except for one thing: the learner-device check imports torch and initializes CUDA in this
process, since only the CUDA runtime can say which physical GPU the learner's ``cuda:0`` is.
"""

from __future__ import annotations

import os
import platform
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from soakbench.foundation import mps
from soakbench.foundation.gpu_health import health_at_start
from soakbench.foundation.nvml import NvmlReader
from soakbench.foundation.vocab import GPU_THROTTLE_REASONS

TORCH_CHECK = (
    '`uv run python -c "import torch; print(torch.version.cuda, torch.cuda.is_available())"` '
    "must print a CUDA version and True: install a CUDA build of torch on a host with an NVIDIA driver"
)


@dataclass(frozen=True)
class Finding:
    """One doctor check: what was observed (``detail``) and, when ``ok`` is False, the ``fix``."""

    check: str
    ok: bool
    detail: str = ""
    fix: str = ""


def finding(check: str, ok: bool, failure: str, fix: str, observed: str = "") -> Finding:
    """A Finding whose detail is ``observed`` when it holds and ``failure`` (with its fix) when not."""
    return Finding(check, True, observed) if ok else Finding(check, False, failure, fix)


class NoCudaDevice(Exception):
    """torch cannot name a CUDA device in this process; the message says why."""


def visible_now() -> tuple[list[mps.Gpu], str | None]:
    """GPUs a CUDA process would see now and, when there are none, the NVML reason."""
    with NvmlReader() as reader:
        snapshot = reader.snapshot()
    if not snapshot["available"]:
        return [], snapshot["reason"]
    return mps.visible_gpus(snapshot, os.environ.get("CUDA_VISIBLE_DEVICES")), None


def torch_cuda_uuids() -> list[str]:
    """NVML-form (``GPU-…``) UUIDs of the CUDA devices torch sees, in torch's order; the learner uses
    the first. Imports torch lazily and initializes CUDA; raises NoCudaDevice when there is none."""
    try:
        import torch
    except ImportError as exc:
        raise NoCudaDevice(f"torch is not importable: {exc}") from None
    if not torch.cuda.is_available():
        raise NoCudaDevice(
            f"torch {torch.__version__} (CUDA build {torch.version.cuda}) sees no CUDA device "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
        )
    try:
        raw = [str(torch.cuda.get_device_properties(i).uuid) for i in range(torch.cuda.device_count())]
    except (RuntimeError, AttributeError) as exc:
        raise NoCudaDevice(f"torch cannot read a CUDA device UUID: {exc}") from None
    return [u if u.upper().startswith(("GPU-", "MIG-")) else f"GPU-{u}" for u in raw]


def learner_device_finding(selected: Sequence[mps.Gpu], query: Callable[[], list[str]]) -> Finding:
    """Whether the learner's CUDA device (torch's first) is the selected GPU by UUID."""
    check = "learner's CUDA device is the selected GPU"
    target = selected[0].uuid
    pin = f"`export CUDA_VISIBLE_DEVICES={target}` (what `uv run cumps env` exports)"
    try:
        seen = query()
    except NoCudaDevice as exc:
        return Finding(check, False, f"cannot be checked: {exc}", TORCH_CHECK)
    wanted = {g.uuid.lower() for g in selected}
    if not seen:
        return Finding(check, False, "cannot be checked: torch lists no CUDA device", TORCH_CHECK)
    if len(seen) > 1:
        detail = f"torch sees {len(seen)} CUDA devices ({', '.join(seen)}); the runtime is single-GPU"
        return Finding(check, False, detail, pin)
    nvml = ", ".join(g.uuid for g in selected)
    return finding(
        check,
        seen[0].lower() in wanted,
        f"torch's cuda:0 is {seen[0]} but NVML names the selected GPU {nvml}",
        pin,
        f"torch's cuda:0 and NVML agree on {seen[0]}",
    )


def _reasons_text(reasons: object) -> tuple[str, list[str]]:
    """A reasons record as text, and the throttle reasons in it."""
    if isinstance(reasons, dict) and "names" in reasons:
        names = list(reasons["names"])
        return ", ".join(names) or "none", [n for n in names if n in GPU_THROTTLE_REASONS]
    why = reasons.get("not_observable") if isinstance(reasons, dict) else None
    return f"not observable ({why})", []


def clocks_finding(selected: Sequence[mps.Gpu], nvml: object | None = None) -> Finding:
    """The selected GPUs' temperature and clock-event reasons now; held down by heat, the power brake or
    a hardware slowdown is unmet (a soak on that GPU would measure the card, not the trainer)."""
    check = "GPU clocks not held down by heat, power brake or hardware slowdown"
    health = health_at_start(nvml, ",".join(g.uuid for g in selected))
    if not health["available"]:
        return Finding(check, True, f"not observable: {health['reason']}")
    seen, throttled = [], []
    for device in health["devices"]:
        text, hits = _reasons_text(device["clock_event_reasons"])
        temperature = device["temperature_c"]
        degrees = (
            f"{temperature} °C"
            if isinstance(temperature, int)
            else f"temperature {_reasons_text(temperature)[0]}"
        )
        seen.append(f"GPU {device['index']}: {degrees}, clock events: {text}")
        throttled += hits
    fix = (
        "`nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER` names the cause; cool the card or lift the power "
        "limit before a soak"
    )
    return finding(check, not throttled, "; ".join(seen), fix, "; ".join(seen))


def restart_command(record: mps.DaemonRecord) -> str:
    """The `cumps start` that recreates ``record``'s daemon with the same name and directories."""
    args = ["--gpus", record.gpu_uuid, "--name", record.name]
    args += ["--pipe-dir", record.pipe_dir, "--log-dir", record.log_dir]
    return "uv run cumps start " + shlex.join(args)


def daemon_answer_finding(record: mps.DaemonRecord, binary: str) -> Finding:
    """Ask the live daemon itself for its server list through the control binary."""
    check = f"daemon {record.name} answers get_server_list"
    pipe = Path(record.pipe_dir)
    fix = (
        f"read {record.log_dir}/control.log; then `kill {record.control_pid}` and "
        f"`{restart_command(record)}` (the dead record is quarantined first)"
    )
    kind = mps.pipe_kind(pipe)
    if kind not in mps.CONTROL_KINDS:
        return Finding(check, False, f"{pipe}/control is {kind}, not a socket or a FIFO", fix)
    try:
        answer = mps.control_command(binary, pipe, "get_server_list", timeout_s=5.0)
    except mps.CumpsError as exc:
        return Finding(check, False, str(exc), fix)
    servers = answer.split()
    shown = (
        f"MPS server PIDs {', '.join(servers)}"
        if servers
        else "no MPS server yet (the first client starts one)"
    )
    return Finding(check, True, f"answered over its control {kind}: {shown}")


def _host_findings(gpus: str | None) -> tuple[list[Finding], list[mps.Gpu]]:
    """Linux, NVML GPUs and the selection; the selected GPUs (empty when none could be chosen)."""
    system = platform.system()
    findings = [
        finding(
            "Linux host",
            system == "Linux",
            f"MPS is Linux-only; this host is {system}",
            "run `uv run cumps doctor` on a Linux host with an NVIDIA GPU; here, train without "
            "training.cuda_process_sharing=mps",
            system,
        )
    ]
    visible, reason = visible_now()
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    findings.append(
        finding(
            "NVIDIA GPU visible through NVML",
            reason is None and bool(visible),
            reason or f"NVML sees GPUs but CUDA_VISIBLE_DEVICES={cvd!r} hides them all",
            "`nvidia-smi` must list the GPU: install or load the NVIDIA driver"
            if reason
            else "`unset CUDA_VISIBLE_DEVICES` or set it to one listed GPU",
            ", ".join(g.uuid for g in visible),
        )
    )
    if reason is not None or not visible:
        return findings, []
    try:
        chosen = mps.select_gpu(gpus, visible, read_only=gpus == "all")
    except mps.CumpsError as exc:
        fix = f"`uv run cumps doctor --gpus {visible[0].index}`"
        findings.append(Finding("one GPU selected", False, str(exc), fix))
        return findings, []
    findings.append(Finding("one GPU selected", True, ", ".join(f"{g.index}={g.uuid}" for g in chosen)))
    return findings, chosen


def _daemon_findings(selector: str, chosen: Sequence[mps.Gpu], binary: str | None) -> list[Finding]:
    """Records readable, none stale, a live daemon for the selection and its answer."""
    try:
        live, stale = mps.live_records()
    except mps.UnreadableRecord as exc:
        return [Finding("ownership records readable", False, str(exc), exc.fix)]
    ours = [(path, why) for path, record, why in stale if mps.ours_here(record)]
    uuids = {g.uuid for g in chosen}
    covering = [r for _, r in live if not uuids or r.gpu_uuid in uuids]
    findings = [
        finding(
            "no stale ownership records",
            not ours,
            "; ".join(f"{path.stem}: {why}" for path, why in ours),
            f"`uv run cumps start{selector}` quarantines them (kept under quarantine/) before it starts",
        ),
        finding(
            "a live cumps daemon" + (" for the selected GPU" if uuids else ""),
            bool(covering),
            "none is recorded" + (f" for {', '.join(sorted(uuids))}" if uuids else ""),
            f"`uv run cumps start{selector}`",
            ", ".join(f"{r.name} (pid {r.control_pid})" for r in covering),
        ),
    ]
    # Asking needs the binary and a daemon; their own findings already report a missing one.
    if binary is not None:
        findings += [daemon_answer_finding(record, binary) for record in covering]
    return findings


def doctor_findings(gpus: str | None) -> list[Finding]:
    """Every check in prerequisite order, each failing one with its fix."""
    selector = f" --gpus {gpus}" if gpus not in (None, "all") else ""
    findings, chosen = _host_findings(gpus)
    binary = mps.find_binary()
    findings.append(
        finding(
            f"{mps.CONTROL_BINARY} on PATH",
            binary is not None,
            "the driver's MPS control utility is missing",
            "install the driver's compute utilities, e.g. "
            "`sudo apt-get install nvidia-compute-utils-<driver-branch>`",
            binary or "",
        )
    )
    findings += _daemon_findings(selector, chosen, binary)
    # Without a selected GPU there is nothing to compare with; the selection finding says why.
    if chosen:
        findings.append(clocks_finding(chosen))
        findings.append(learner_device_finding(chosen, torch_cuda_uuids))
    return findings
