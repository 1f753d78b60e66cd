"""The soak monitor loop: spawn a command, watch its process tree until it exits, then judge what is left.

Edges live here (processes, signals, clocks, files); the judgement is pure code elsewhere (trends,
evaluation, artifact). Never imports torch: the monitor must not become a CUDA owner.

Life of one monitored run:

1. validate settings (``SettingsError`` -> exit 2, nothing written), refuse while a dead monitor's run is
   still there (harness.soak.loop.leftovers), snapshot ``/dev/shm``, become a child subreaper, write the
   ownership record and start the watchdog, spawn the command through the parent-death exec wrapper
   (harness.soak.loop.exec_wrapper) in its own session/process group with stdout+stderr to
   ``<artifact stem>.console.log``;
2. every ``sample_interval_s``: sample the tree (``Sampler``), append the sample to
   ``<artifact stem>.samples.jsonl`` (flushed per sample), check start-up / stale limits;
3. on a limit (harness.soak.verdicts.hang), SIGINT/SIGTERM to the monitor, or a monitor error: stacks (forensics),
   SIGTERM the group, SIGKILL it after ``termination_grace_s``, then every other tracked process alive;
4. after the command exits: wait ``post_shutdown_grace_s`` (reaping adopted orphans), list residual
   processes (every identity ever seen still alive: PID + start ticks), capture and kill them, list orphaned
   ``/dev/shm`` segments (harness.soak.host.shm rule), then leak verdicts, evaluation, artifact, HTML report.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from soakbench.foundation.vocab import MonitorFailure
from soakbench.harness.soak.evidence.live import LiveView
from soakbench.harness.soak.host.forensics import Forensics
from soakbench.harness.soak.host.forks import ForkWatch
from soakbench.harness.soak.host.gpu_watch import GpuWatch
from soakbench.harness.soak.host.pressure import HostReader
from soakbench.harness.soak.host.sampler import Sampler
from soakbench.harness.soak.host.sampling import ProcessSampler, make_sampler
from soakbench.harness.soak.host.shm import ShmSnapshot, TreeEvidence, attribute_orphans
from soakbench.harness.soak.host.token import RUN_TOKEN_ENV
from soakbench.harness.soak.loop.decide import UntilDecided
from soakbench.harness.soak.loop.leftovers import OwnershipGuard, leftover_problem
from soakbench.harness.soak.loop.sample_step import LoopState, SampleStep
from soakbench.harness.soak.loop.settings import MonitorSettings, SettingsError
from soakbench.harness.soak.loop.spawn_limits import domain_files, limits_at_spawn
from soakbench.harness.soak.loop.supervisor import Supervisor
from soakbench.harness.soak.verdicts.looks import MonitorStop


@dataclass(frozen=True)
class MonitorResult:
    """What the monitor observed of one run (the judgement's inputs) and its own overhead figures,
    assembled once from the phases of ``watch``."""

    monitor_failure: MonitorFailure | None = None
    monitor_error: str | None = None
    monitor_detail: str | None = None  # the failure reason's clause on the limit (harness.soak.verdicts.hang)
    forensics: Forensics | None = None  # the stacks taken before a kill
    trainer_returncode: int | None = None
    duration_s: float = 0.0
    startup_end_t: float | None = None
    samples: list[dict[str, Any]] = field(default_factory=list)
    residual_processes: list[dict[str, Any]] = field(default_factory=list)
    orphaned_shm_segments: list[dict[str, Any]] = field(default_factory=list)
    killed_by_monitor: list[dict[str, Any]] = field(default_factory=list)
    known_processes: list[dict[str, Any]] = field(default_factory=list)
    progress_parse_errors: int = 0
    rank_progress: dict[int, dict[str, Any]] = field(default_factory=dict)  # each rank's last record
    loop_cpu_s: float = 0.0
    loop_wall_s: float = 0.0
    sample_ms: list[float] = field(default_factory=list)
    root_pid: int | None = None
    started_at: float = 0.0  # unix s at spawn
    host_tail: list[dict[str, Any]] = field(default_factory=list)  # host readings after the loop
    kernel_log: dict[str, Any] = field(default_factory=dict)  # KmsgTail.status() and the OOM kills it logged
    reaped: dict[tuple[int, int], int] = field(default_factory=dict)  # adopted orphans' exit statuses
    fork_events: dict[str, Any] = field(default_factory=dict)  # ForkWatch.finish(): SIGKILLed descendants
    exits: dict[int, tuple[int, float]] = field(default_factory=dict)  # ForkWatch.exits(): pid -> (rc, t)
    sampler: dict[str, Any] = field(default_factory=dict)  # the artifact's `sampler` section
    gpu_health: dict[str, Any] | None = None  # GpuWatch.finish(): the run's GPUs, start to end
    limits: dict[str, Any] | None = None  # HostLimits.to_json(): read right after the spawn
    stop: MonitorStop | None = None  # --until-decided stopped the run (not a failure)


@dataclass(frozen=True)
class _Hold:
    """What the monitor holds on the host from before the spawn to the end: the ``/dev/shm`` snapshot, the
    ownership record, and the readers that must see the run from its first instant."""

    reader: ProcessSampler
    shm_before: ShmSnapshot
    guard: OwnershipGuard
    host: HostReader
    forks: ForkWatch
    gpu: GpuWatch


@dataclass(frozen=True)
class _Spawned:
    """The running command and what watches it."""

    proc: subprocess.Popen[bytes]
    t0: float  # monotonic s at spawn
    started_at: float  # unix s at spawn
    forensics: Forensics
    supervisor: Supervisor
    sampler: Sampler
    limits: dict[str, Any]


@dataclass(frozen=True)
class _Observed:
    """The observe phase: the samples, the limit a run broke (or the monitor's own error), the GPUs'
    record, and what the loop cost."""

    samples: list[dict[str, Any]]
    sample_ms: list[float]
    startup_end_t: float | None
    monitor_failure: MonitorFailure | None
    monitor_detail: str | None
    monitor_error: str | None
    gpu_health: dict[str, Any]
    loop_cpu_s: float
    loop_wall_s: float
    progress_parse_errors: int
    rank_progress: dict[int, dict[str, Any]]
    stop: MonitorStop | None


@dataclass(frozen=True)
class _Ended:
    """The wind-down phase: how the command ended and what it left behind."""

    killed_by_monitor: list[dict[str, Any]]
    duration_s: float
    trainer_returncode: int | None
    residual_processes: list[dict[str, Any]]
    known_processes: list[dict[str, Any]]
    reaped: dict[tuple[int, int], int]
    orphaned_shm_segments: list[dict[str, Any]]
    host_tail: list[dict[str, Any]]


@contextlib.contextmanager
def _cancellation_flag() -> Iterator[threading.Event]:
    """SIGINT/SIGTERM to the monitor set the flag (main thread only; elsewhere the flag stays unset)."""
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum: int, frame: object) -> None:
        flag.set()

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


def watch(settings: MonitorSettings, view: LiveView) -> MonitorResult:
    """Spawn ``settings.command`` and monitor it to the end (steps 1-4 of the module docstring, minus the
    judgement), in three phases: spawn, observe, wind down. Every resource the monitor takes is released
    by one ``ExitStack``, whatever happens. Settings must already be validated."""
    reader = make_sampler(settings.sampler)
    reader.pace(settings.sample_interval_s)
    problem = leftover_problem()  # a dead monitor's run still holding the host: refuse, name it
    if problem is not None:
        raise SettingsError(problem)
    with contextlib.ExitStack() as stack:
        stack.callback(view.close)
        hold = _hold_host(settings, reader, stack)
        cancelled = stack.enter_context(_cancellation_flag())
        spawned = _spawn(settings, hold, stack)
        observed = _observe(settings, hold, spawned, view, cancelled)
        ended = _wind_down(settings, hold, spawned, observed, view)
        forks = hold.forks.finish(spawned.t0)  # a last drain: the kills and exits up to now
        return MonitorResult(
            monitor_failure=observed.monitor_failure,
            monitor_error=observed.monitor_error,
            monitor_detail=observed.monitor_detail,
            forensics=spawned.forensics,
            trainer_returncode=ended.trainer_returncode,
            duration_s=ended.duration_s,
            startup_end_t=observed.startup_end_t,
            samples=observed.samples,
            residual_processes=ended.residual_processes,
            orphaned_shm_segments=ended.orphaned_shm_segments,
            killed_by_monitor=ended.killed_by_monitor,
            known_processes=ended.known_processes,
            progress_parse_errors=observed.progress_parse_errors,
            rank_progress=observed.rank_progress,
            loop_cpu_s=observed.loop_cpu_s,
            loop_wall_s=observed.loop_wall_s,
            sample_ms=observed.sample_ms,
            root_pid=spawned.proc.pid,
            started_at=spawned.started_at,
            host_tail=ended.host_tail,
            kernel_log={**hold.host.kmsg.status(), "kills": list(hold.host.kmsg.kills)},
            reaped=ended.reaped,
            fork_events=forks,
            exits=hold.forks.exits(spawned.t0),
            sampler=reader.capabilities.describe(reader.name),
            gpu_health=observed.gpu_health,
            limits=spawned.limits,
            stop=observed.stop,
        )
    raise AssertionError("unreachable: the ExitStack returns or raises")  # for type checkers


def _hold_host(settings: MonitorSettings, reader: ProcessSampler, stack: contextlib.ExitStack) -> _Hold:
    """Refuse a host the monitor cannot watch (SettingsError, nothing spawned), then take what it needs
    from before the spawn: the subreaper bit, the ownership record, the kernel log, the process-events
    connector and NVML's XID registration (NVML delivers only the events after it)."""
    try:  # environment prerequisites: refuse before spawning rather than monitor half-blind
        shm_before = reader.snapshot_shm()
        previous_subreaper = reader.set_subreaper(True)
    except OSError as exc:
        raise SettingsError(
            f"the soak monitor needs Linux /dev/shm and prctl(PR_SET_CHILD_SUBREAPER): {exc}"
        ) from exc
    stack.callback(reader.set_subreaper, previous_subreaper)
    try:
        guard = OwnershipGuard(settings.log_dir, shm_before, reader=reader)
    except OSError as exc:
        raise SettingsError(f"the soak monitor cannot write its ownership record: {exc}") from exc
    stack.callback(guard.close)
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    host = HostReader()
    host.start()  # the kernel log from here on
    stack.callback(host.close)
    forks = ForkWatch()
    forks.open()  # the root's first forks queue until follow()
    stack.callback(forks.finish, time.monotonic())  # idempotent: stops its reader on every path
    gpu = GpuWatch.begin((os.environ if settings.env is None else settings.env).get("CUDA_VISIBLE_DEVICES"))
    stack.callback(gpu.close)  # idempotent: finish() closed it unless the run failed before the loop
    return _Hold(reader=reader, shm_before=shm_before, guard=guard, host=host, forks=forks, gpu=gpu)


def _spawn(settings: MonitorSettings, hold: _Hold, stack: contextlib.ExitStack) -> _Spawned:
    """Start the command through the exec wrapper in its own session, output to the console log, and
    take hold of its tree. From here on, an error anywhere stops the tree before it propagates."""
    console = stack.enter_context(open(settings.console_path, "wb"))  # noqa: SIM115 — the stack closes it
    env = dict(os.environ if settings.env is None else settings.env)
    env[RUN_TOKEN_ENV] = hold.guard.token
    t0 = hold.gpu.t0 = time.monotonic()
    started_at = time.time()
    forensics = Forensics.for_command(settings.command, t0, settings.forensics)
    proc = subprocess.Popen(
        hold.guard.wrap(settings.command),
        stdin=subprocess.DEVNULL,
        stdout=console,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # own session and process group: killpg reaches the whole group
        env=env,
    )
    stopper = _StopOnError(proc, settings.termination_grace_s)
    stack.push(stopper)
    hold.forks.follow(proc.pid)
    hold.guard.await_exec(proc.pid, hold.reader)
    root = hold.reader.stat(proc.pid)
    if root is None:  # cannot happen before we reap it; fail closed rather than guess
        raise RuntimeError(f"spawned process {proc.pid} is not visible in /proc")
    tracker = hold.reader.tracker(os.getpid(), root, {hold.guard.watchdog.pid}, hold.guard.token)
    supervisor = Supervisor(proc, tracker, hold.reader, hold.guard, forensics)
    stopper.supervisor = supervisor
    supervisor.refresh()  # the root is known from the start, even if no sample is ever taken
    before = frozenset((name, int(info["inode"])) for name, info in hold.shm_before.items())
    sampler = Sampler(
        hold.reader, tracker, settings.log_dir, t0, host=hold.host, gpu=hold.gpu, shm_before=before,
        watch_paths=settings.watch_paths,
    )  # fmt: skip
    limits = limits_at_spawn(proc.pid, settings, hold.reader, sampler.nvml)
    sampler.domain_files = domain_files(limits)
    return _Spawned(proc=proc, t0=t0, started_at=started_at, forensics=forensics, supervisor=supervisor,
                    sampler=sampler, limits=limits)  # fmt: skip


class _StopOnError:
    """An exit callback: on any exception (a monitor bug, Ctrl-C twice), stop the tree before the error
    propagates; through the supervisor once it exists, else the whole process group."""

    def __init__(self, proc: subprocess.Popen[bytes], grace_s: float) -> None:
        self.proc = proc
        self.grace_s = grace_s
        self.supervisor: Supervisor | None = None

    def __call__(self, kind: type[BaseException] | None, *_: object) -> bool:
        if kind is None:
            return False
        if self.supervisor is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        elif self.supervisor.proc.returncode is None or self.supervisor.alive():
            self.supervisor.terminate(self.grace_s)
        return False  # the error propagates


def _observe(
    settings: MonitorSettings, hold: _Hold, spawned: _Spawned, view: LiveView, cancelled: threading.Event
) -> _Observed:
    """Sample the tree until the command exits, a limit is hit or the monitor is cancelled. A monitor bug
    is recorded, not raised: the run must still be stopped and leave evidence."""
    state, sampler = LoopState(), spawned.sampler
    view.note(f"started pid {spawned.proc.pid}: {' '.join(settings.command)}")
    cpu_before, error = time.process_time(), None
    until = None if settings.until_decided_s is None else UntilDecided(settings, spawned.limits, view)
    try:
        _loop(
            settings, spawned.supervisor, SampleStep(settings, state, sampler, view, until=until), cancelled
        )
    except Exception as exc:
        state.monitor_failure = "monitor_error"
        error = f"{type(exc).__name__}: {exc}"
    finally:
        sampler.nvml.close()
        gpu_health = hold.gpu.finish(time.monotonic(), time.time())  # at once: events near the exit
    return _Observed(
        samples=state.samples,
        sample_ms=state.sample_ms,
        startup_end_t=state.startup_end_t,
        monitor_failure=state.monitor_failure,
        monitor_detail=state.monitor_detail,
        monitor_error=error,
        gpu_health=gpu_health,
        loop_cpu_s=time.process_time() - cpu_before,
        loop_wall_s=time.monotonic() - spawned.t0,
        progress_parse_errors=sampler.progress.parse_errors,
        rank_progress=sampler.progress.final_by_rank(),
        stop=state.stop,
    )


def _wind_down(
    settings: MonitorSettings, hold: _Hold, spawned: _Spawned, observed: _Observed, view: LiveView
) -> _Ended:
    """Stop a run the monitor failed, reap the command, wait out the grace period, then take stock of
    what it left: residual processes (killed), the tree it had, and orphaned ``/dev/shm`` segments."""
    proc, supervisor, t0 = spawned.proc, spawned.supervisor, spawned.t0
    failure = observed.monitor_failure
    tail = [_tail_reading(supervisor, hold.host, t0, signalled=False)]
    killed: list[dict[str, Any]] = []
    if failure is not None:
        view.note(f"{failure}: terminating process group {proc.pid}")
        killed = supervisor.terminate(settings.termination_grace_s, failure)
    elif observed.stop is not None:  # stacks of a run stopped because it fails: what grew, and where
        view.note(f"{observed.stop.reason} ({observed.stop.verdict}): stopping process group {proc.pid}")
        trigger = "survival_fails" if observed.stop.verdict == "fails" else None
        killed = supervisor.terminate(settings.termination_grace_s, trigger)
    duration_s = time.monotonic() - t0
    returncode = proc.poll()  # the loop may stop at the root's zombie: reap it
    view.note(f"command exited with {proc.returncode}; post-shutdown grace {settings.post_shutdown_grace_s}s")
    supervisor.wait_quiet(settings.post_shutdown_grace_s, until_all_dead=True)
    signalled = failure is not None or observed.stop is not None
    tail.append(_tail_reading(supervisor, hold.host, t0, signalled=signalled))
    residual = supervisor.alive()
    if residual:
        view.note(f"{len(residual)} residual process(es); killing them")
        supervisor.kill_all(min(settings.termination_grace_s, 2.0), "residual_processes")
    return _Ended(
        killed_by_monitor=killed,
        duration_s=duration_s,
        trainer_returncode=returncode,
        residual_processes=residual,
        known_processes=[dict(v) for _, v in sorted(spawned.sampler.tracker.known.items())],
        reaped=dict(supervisor.reaped),
        orphaned_shm_segments=_orphaned_segments(settings, hold.shm_before, spawned.sampler),
        host_tail=tail,
    )


def _tail_reading(supervisor: Supervisor, host: HostReader, t0: float, *, signalled: bool) -> dict[str, Any]:
    """A host reading after the loop; ``signalled`` once the monitor has terminated the tree."""
    alive = [(p["pid"], p["start_ticks"]) for p in supervisor.alive()]
    return host.tail(time.monotonic() - t0, alive, monitor_signalled=signalled)


def _orphaned_segments(
    settings: MonitorSettings, before: ShmSnapshot, sampler: Sampler
) -> list[dict[str, Any]]:
    """The ``/dev/shm`` entries new since ``before`` that the harness.soak.host.shm rule attributes to the run
    (none where the sampler cannot list segments: the row is then not_applicable, with the reason)."""
    if sampler.reader.capabilities.shm_root is None:
        return []
    after = sampler.reader.snapshot_shm()
    tree_pids = [pid for pid, _ in sampler.tracker.known]
    new_names = [n for n, info in after.items() if before.get(n, {}).get("inode") != info["inode"]]
    evidence = TreeEvidence(
        seen_open=frozenset(sampler.shm_seen),
        tree_pids=frozenset(tree_pids),
        held_elsewhere=sampler.reader.held_by_processes(new_names, [*tree_pids, os.getpid()]),
    )
    return attribute_orphans(before, after, evidence, os.getuid(), settings.shm_attribution)


def _loop(
    settings: MonitorSettings, supervisor: Supervisor, samples: SampleStep, cancelled: threading.Event
) -> None:
    """Sample until the command exits, a limit is hit, the monitor is cancelled (sets
    ``state.monitor_failure`` for the latter two) or ``--until-decided`` stops the run (sets
    ``state.stop``)."""
    proc, state, sampler = supervisor.proc, samples.state, samples.sampler
    next_sample = sampler.t0
    while True:
        now = time.monotonic()
        if proc.poll() is not None:
            return  # no sample of a tree whose root already exited: that is shutdown, not steady state
        if now >= next_sample:
            sample = sampler.sample(wall=time.time(), now=now)
            if not any(p["pid"] == proc.pid for p in sample["processes"]):
                try:  # reap it here: the exit status must be known before judging
                    proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    raise RuntimeError(f"{sampler.reader.name} sampler lost the live root") from None
                return  # the root exited while we sampled: a shutdown snapshot, not a run sample
            supervisor.publish(sampler.shm_seen)
            failure = samples.record(sample, now)
            if failure is not None:
                state.monitor_failure = failure
                return
            state.stop = samples.stop()
            if state.stop is not None:
                return
            next_sample = max(next_sample + settings.sample_interval_s, now + 0.001)
        if proc.poll() is not None:
            return
        if cancelled.is_set():
            state.monitor_failure = "external_cancellation"
            return
        supervisor.reap_adopted()
        time.sleep(min(0.25, max(0.0, next_sample - time.monotonic())))
