"""Evidence from every live tree process, taken just before the monitor kills a tree it gives up on.

Per process: ``/proc/<pid>/stat`` state, ``wchan``, CPU time, each thread's state, wchan and CPU time
(``/proc/<pid>/task/*``), the kernel stack where ``/proc/<pid>/stack`` is readable, and the Python stack
of all threads from ``py-spy dump --json``, then again with ``--native`` (native frames interleaved) when
time is left; a process that is not Python gets its kernel stack and wchan only, with py-spy's reason.
Processes are captured in parallel, each bounded by ``PER_PROCESS_S`` and all of them by ``TOTAL_S``, so
the kill is late by at most about ``TOTAL_S``; the elapsed time is recorded per process and per capture.

Nothing is skipped silently: ``--no-stacks``, a missing py-spy, ptrace not permitted, a timeout or any
other py-spy failure is a ``stack.status`` of ``skipped``/``failed`` with its ``reason_kind`` and reason.
Schema: the ``forensics`` object of the soak artifact (docs/soak-artifact.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soakbench.harness.soak.host.procs import parse_stat
from soakbench.harness.soak.verdicts.stacks import error_line, failure_kind, parse_dump

# Measured on the 2-core dev VM under load: a Python-only dump takes 15-90 ms; with --native, 50 ms for a
# small script, 1.0-2.9 s for the trainer's torch learner (docs/soak-design.md, "Overhead (measured, not
# asserted)").
PER_PROCESS_S = 5.0  # both py-spy calls of one process
TOTAL_S = 10.0  # every process of one capture together: the kill is late by at most about this
MAX_PARALLEL = 8


@dataclass(frozen=True)
class StackTool:
    """The py-spy executable to use (``path``), or why there is none (``reason``)."""

    path: str | None
    reason: str | None = None


def locate_py_spy(explicit: Path | None = None) -> StackTool:
    """``explicit`` when given (the settings check made sure it is an executable file), else the py-spy
    installed beside the running interpreter (the locked dependency), else the one on PATH."""
    if explicit is not None:
        return StackTool(str(explicit))
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return StackTool(str(beside))
    found = shutil.which("py-spy")
    if found is not None:
        return StackTool(found)
    return StackTool(None, f"py-spy not found beside the interpreter ({beside}) nor on PATH")


@dataclass(frozen=True)
class ForensicsSettings:
    """What the monitor does about a tree it gives up on (``soak run`` / ``soak monitor`` options)."""

    shutdown_timeout_s: float = 120.0  # --shutdown-timeout-seconds (harness.soak.verdicts.hang)
    stacks: bool = True  # False: --no-stacks (the artifact says so)
    py_spy: Path | None = None  # --py-spy; None: beside the interpreter, else on PATH

    def problem(self) -> str | None:
        """The first bad field, named as its option, or None."""
        if not self.shutdown_timeout_s >= 0:
            return f"--shutdown-timeout-seconds: must be >= 0, got {self.shutdown_timeout_s}"
        if self.py_spy is None:
            return None
        if not self.py_spy.is_absolute():
            return f"--py-spy: must be an absolute path, got {str(self.py_spy)!r}"
        if not self.py_spy.is_file() or not os.access(self.py_spy, os.X_OK):
            return f"--py-spy: {self.py_spy} is not an executable file"
        return None


def project_roots(command: Sequence[str], cwd: str) -> tuple[str, ...]:
    """The command's working directory and the directory of each ``.py`` file its argv names."""
    roots = [os.path.normpath(cwd)]
    for arg in command:
        if arg.endswith(".py") and os.path.isfile(os.path.join(cwd, arg)):
            roots.append(os.path.dirname(os.path.normpath(os.path.join(cwd, arg))))
    return tuple(dict.fromkeys(roots))


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _wchan(path: Path) -> str | None:
    text = _read(path)
    return None if text is None or text.strip() in ("", "0") else text.strip()


def _task(task_dir: Path, clock_ticks: int) -> dict[str, Any] | None:
    text = _read(task_dir / "stat")
    if text is None:
        return None
    try:
        st = parse_stat(text)
    except ValueError:
        return None
    return {
        "tid": st.pid,
        "name": st.comm,
        "state": st.state,
        "wchan": _wchan(task_dir / "wchan"),
        "cpu_s": (st.utime_ticks + st.stime_ticks) / clock_ticks,
    }


def read_proc_state(proc_root: Path, pid: int, clock_ticks: int) -> dict[str, Any]:
    """``{state, wchan, cpu_s, threads, kernel_stack, kernel_stack_reason}`` of ``pid`` from /proc
    (``state`` null when the process is gone)."""
    base = proc_root / str(pid)
    main = _task(base, clock_ticks)
    try:
        tids = sorted(int(n) for n in os.listdir(base / "task") if n.isdigit())
    except OSError:
        tids = []
    threads = [t for t in (_task(base / "task" / str(tid), clock_ticks) for tid in tids) if t is not None]
    kernel = _read(base / "stack")
    return {
        "state": main["state"] if main else None,
        "wchan": main["wchan"] if main else None,
        "cpu_s": main["cpu_s"] if main else None,
        "threads": threads,
        "kernel_stack": [line.strip() for line in kernel.splitlines() if line.strip()]
        if kernel is not None
        else None,
        "kernel_stack_reason": None
        if kernel is not None
        else f"{base / 'stack'} is not readable (needs root or CAP_SYS_ADMIN)",
    }


def _not_taken(status: str, kind: str, reason: str, elapsed: float = 0.0) -> dict[str, Any]:
    return {
        "status": status,
        "reason_kind": kind,
        "reason": reason,
        "native": False,
        "native_reason": None,
        "elapsed_s": round(elapsed, 4),
        "threads": [],
    }


@dataclass(frozen=True)
class CaptureConfig:
    """What one capture needs besides its targets."""

    tool: StackTool
    stacks: bool  # False under --no-stacks
    roots: tuple[str, ...]
    excluded: tuple[str, ...]
    proc_root: Path = Path("/proc")
    per_process_s: float = PER_PROCESS_S
    total_s: float = TOTAL_S


def _dump(config: CaptureConfig, tool: str, pid: int, native: bool, timeout: float) -> dict[str, Any]:
    """One ``py-spy dump`` by ``tool``; the ``stack`` record it gives."""
    argv = [tool, "dump", "--pid", str(pid), "--json", *(["--native"] if native else [])]
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return _not_taken("failed", "timeout", f"py-spy took longer than {timeout:.2f} s", timeout)
    except OSError as exc:
        return _not_taken("failed", "tool_error", f"cannot run {argv[0]}: {exc}")
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        kind = failure_kind(done.stderr)
        reason = error_line(done.stderr) or f"py-spy exited {done.returncode}"
        if kind == "ptrace_denied":
            reason = f"ptrace not permitted ({reason}); py-spy needs CAP_SYS_PTRACE or the same uid"
        return _not_taken("failed", kind, reason, elapsed)
    try:
        threads = parse_dump(done.stdout, config.roots, config.excluded)
    except ValueError as exc:
        return _not_taken("failed", "tool_error", f"unreadable py-spy output: {exc}", elapsed)
    return {
        "status": "captured",
        "reason_kind": None,
        "reason": None,
        "native": native,
        "native_reason": None,
        "elapsed_s": round(elapsed, 4),
        "threads": threads,
    }


def python_stack(config: CaptureConfig, pid: int, deadline: float) -> dict[str, Any]:
    """The ``stack`` record of one process within the per-process and total bounds: the Python frames
    first (tens of ms), then the same with native frames when time is left (seconds for a torch
    process: kept only when it succeeds, else ``native_reason`` says why)."""
    if not config.stacks:
        return _not_taken("skipped", "disabled", "--no-stacks given: no stack taken")
    tool = config.tool.path
    if tool is None:
        return _not_taken("skipped", "tool_missing", str(config.tool.reason))
    end = min(time.monotonic() + config.per_process_s, deadline)
    bound = f"time bound reached ({config.per_process_s:g} s per process, {config.total_s:g} s total)"
    if end <= time.monotonic():
        return _not_taken("skipped", "timeout", bound)
    plain = _dump(config, tool, pid, False, end - time.monotonic())
    if plain["status"] != "captured":
        return plain
    remaining = end - time.monotonic()
    if remaining <= 0:
        return {**plain, "native_reason": bound}
    native = _dump(config, tool, pid, True, remaining)
    if native["status"] == "captured":
        return {**native, "elapsed_s": round(plain["elapsed_s"] + native["elapsed_s"], 4)}
    return {
        **plain,
        "native_reason": native["reason"],
        "elapsed_s": round(plain["elapsed_s"] + native["elapsed_s"], 4),
    }


def capture_process(
    config: CaptureConfig, target: Mapping[str, Any], deadline: float, clock_ticks: int
) -> dict[str, Any]:
    """Evidence of one process: identity, /proc state (read before py-spy pauses it), stack."""
    started = time.monotonic()
    pid = int(target["pid"])
    record = {
        "pid": pid,
        "start_ticks": int(target["start_ticks"]),
        "name": str(target.get("name") or ""),
        "cmdline": [str(a) for a in target.get("cmdline") or []],
        **read_proc_state(config.proc_root, pid, clock_ticks),
    }
    record["stack"] = python_stack(config, pid, deadline)
    record["elapsed_s"] = round(time.monotonic() - started, 4)
    return record


def capture(
    config: CaptureConfig, trigger: str, targets: Sequence[Mapping[str, Any]], t: float
) -> dict[str, Any]:
    """One capture of ``targets`` (tree identities: pid, start_ticks, name, cmdline) in parallel;
    ``t``: seconds since monitor start."""
    started = time.monotonic()
    deadline = started + config.total_s
    ticks = os.sysconf("SC_CLK_TCK")
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, len(targets)))) as pool:
        processes = list(pool.map(lambda tg: capture_process(config, tg, deadline, ticks), targets))
    return {
        "trigger": trigger,
        "t": round(t, 3),
        "elapsed_s": round(time.monotonic() - started, 4),
        "processes": processes,
    }


@dataclass
class Forensics:
    """The captures of one monitored run and the artifact's ``forensics`` section."""

    config: CaptureConfig
    t0: float  # monotonic spawn time
    captures: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def for_command(cls, command: Sequence[str], t0: float, settings: ForensicsSettings) -> Forensics:
        excluded = tuple(dict.fromkeys((sys.prefix, sys.base_prefix, sys.exec_prefix)))
        roots = project_roots(command, os.getcwd())  # the command runs in the monitor's cwd
        config = CaptureConfig(locate_py_spy(settings.py_spy), settings.stacks, roots, excluded)
        return cls(config, t0)

    def capture(self, trigger: str, targets: Sequence[Mapping[str, Any]]) -> None:
        """Capture every target before the kill ``trigger`` (a monitor failure or residual_processes).
        Never raises: a capture that breaks is recorded with its error and the kill goes ahead."""
        if not targets:
            return
        t = time.monotonic() - self.t0
        try:
            self.captures.append(capture(self.config, trigger, targets, t))
        except Exception as exc:  # evidence is best effort; stopping the run on time is not
            elapsed = time.monotonic() - self.t0 - t
            self.captures.append(
                {
                    "trigger": trigger,
                    "t": round(t, 3),
                    "elapsed_s": round(elapsed, 4),
                    "processes": [],
                    "error": f"{type(exc).__name__}: {exc}",
                }
            )

    def section(self) -> dict[str, Any]:
        """The artifact's ``forensics`` object."""
        tool = self.config.tool
        return {
            "stacks": {
                "enabled": self.config.stacks,
                "reason": None if self.config.stacks else "--no-stacks given",
            },
            "tool": {"name": "py-spy", "path": tool.path, "reason": tool.reason},
            "time_bound_s": {"per_process": self.config.per_process_s, "total": self.config.total_s},
            "project_roots": list(self.config.roots),
            "captures": self.captures,
        }
