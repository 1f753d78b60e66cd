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
import json
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.vocab import MonitorFailure
from harness.soak.evidence.live import LiveView, summarize
from harness.soak.host.forensics import Forensics
from harness.soak.host.forks import ForkWatch
from harness.soak.host.gpu_watch import GpuWatch
from harness.soak.host.pressure import HostReader
from harness.soak.host.sampler import JobProgress, LivenessState, Sampler
from harness.soak.host.sampling import make_sampler
from harness.soak.host.shm import ShmSnapshot, TreeEvidence, attribute_orphans
from harness.soak.host.token import RUN_TOKEN_ENV
from harness.soak.loop.leftovers import OwnershipGuard, leftover_problem
from harness.soak.loop.settings import Mode, MonitorSettings, SettingsError
from harness.soak.loop.supervisor import Supervisor
from harness.soak.verdicts.hang import Limits


@dataclass
class MonitorResult:
    """What the loop observed (inputs to evaluation) plus the monitor's own overhead figures."""

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


def _progress_started(mode: Mode, liveness: LivenessState, progress: JobProgress) -> bool:
    """Start-up is over at the first progress record (run mode) or the first file change (monitor)."""
    if mode == "run":
        return progress.last is not None
    return liveness.ever_changed


def watch(settings: MonitorSettings, view: LiveView) -> MonitorResult:
    """Spawn ``settings.command`` and monitor it to the end (steps 1-4 of the module docstring, minus the
    judgement). Settings must already be validated."""
    result = MonitorResult()
    reader = make_sampler(settings.sampler)
    result.sampler = reader.capabilities.describe(reader.name)
    problem = leftover_problem()  # a dead monitor's run still holding the host: refuse, name it
    if problem is not None:
        raise SettingsError(problem)
    try:  # environment prerequisites: refuse before spawning rather than monitor half-blind
        shm_before = reader.snapshot_shm()
        previous_subreaper = reader.set_subreaper(True)
    except OSError as exc:
        raise SettingsError(
            f"the soak monitor needs Linux /dev/shm and prctl(PR_SET_CHILD_SUBREAPER): {exc}"
        ) from exc
    try:
        guard = OwnershipGuard(settings.log_dir, shm_before, reader=reader)
    except OSError as exc:
        reader.set_subreaper(previous_subreaper)
        raise SettingsError(f"the soak monitor cannot write its ownership record: {exc}") from exc
    settings.log_dir.mkdir(parents=True, exist_ok=True)
    supervisor: Supervisor | None = None
    host = HostReader()
    host.start()  # before the spawn: the kernel log from here on
    forks = ForkWatch()
    forks.open()  # before the spawn too: the root's first forks queue until follow()
    t0 = time.monotonic()
    # before the spawn too: NVML delivers only the XID events that happen after registration
    gpu = GpuWatch.begin((os.environ if settings.env is None else settings.env).get("CUDA_VISIBLE_DEVICES"))
    try:
        with _cancellation_flag() as cancelled, open(settings.console_path, "wb") as console:
            env = dict(os.environ if settings.env is None else settings.env)
            env[RUN_TOKEN_ENV] = guard.token
            t0 = gpu.t0 = time.monotonic()
            result.started_at = time.time()
            result.forensics = Forensics.for_command(settings.command, t0, settings.forensics)
            proc = subprocess.Popen(
                guard.wrap(settings.command),
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own session and process group: killpg reaches the whole group
                env=env,
            )
            result.root_pid = proc.pid
            forks.follow(proc.pid)
            guard.await_exec(proc.pid, reader)
            root = reader.stat(proc.pid)
            if root is None:  # cannot happen before we reap it; fail closed rather than guess
                raise RuntimeError(f"spawned process {proc.pid} is not visible in /proc")
            tracker = reader.tracker(os.getpid(), root, {guard.watchdog.pid}, guard.token)
            supervisor = Supervisor(proc, tracker, reader, guard, result.forensics)
            supervisor.refresh()  # the root is known from the start, even if no sample is ever taken
            before = frozenset((name, int(info["inode"])) for name, info in shm_before.items())
            sampler = Sampler(reader, tracker, settings.log_dir, t0, host=host, gpu=gpu, shm_before=before)
            view.note(f"started pid {proc.pid}: {' '.join(settings.command)}")
            result.loop_cpu_s = -time.process_time()
            try:
                _loop(settings, result, supervisor, sampler, view, cancelled)
            except Exception as exc:  # a monitor bug must still stop the run and leave evidence
                result.monitor_failure = "monitor_error"
                result.monitor_error = f"{type(exc).__name__}: {exc}"
            finally:
                sampler.nvml.close()
                result.gpu_health = gpu.finish(time.monotonic(), time.time())  # at once: events near the exit
            result.loop_cpu_s += time.process_time()
            result.loop_wall_s = time.monotonic() - t0
            result.progress_parse_errors = sampler.progress.parse_errors
            result.rank_progress = sampler.progress.final_by_rank()
            _tail_reading(result, supervisor, host, t0)
            if (failure := result.monitor_failure) is not None:
                view.note(f"{result.monitor_failure}: terminating process group {proc.pid}")
                result.killed_by_monitor = supervisor.terminate(settings.termination_grace_s, failure)
            result.duration_s = time.monotonic() - t0
            result.trainer_returncode = proc.poll()  # the loop may stop at the root's zombie: reap it
            view.note(
                f"command exited with {proc.returncode}; post-shutdown grace {settings.post_shutdown_grace_s}s"
            )
            supervisor.wait_quiet(settings.post_shutdown_grace_s, until_all_dead=True)
            _tail_reading(result, supervisor, host, t0)
            result.residual_processes = supervisor.alive()
            if result.residual_processes:
                view.note(f"{len(result.residual_processes)} residual process(es); killing them")
                supervisor.kill_all(min(settings.termination_grace_s, 2.0), "residual_processes")
            result.known_processes = [dict(v) for _, v in sorted(tracker.known.items())]
            result.reaped = dict(supervisor.reaped)
            result.orphaned_shm_segments = _orphaned_segments(settings, shm_before, sampler)
    except BaseException:
        if supervisor is not None and (supervisor.proc.returncode is None or supervisor.alive()):
            supervisor.terminate(settings.termination_grace_s)
        raise
    finally:
        result.kernel_log = {**host.kmsg.status(), "kills": list(host.kmsg.kills)}
        result.fork_events = forks.finish(t0)
        result.exits = forks.exits(t0)
        host.close()
        gpu.close()  # idempotent: finish() closed it unless the run failed before the loop
        guard.close()
        reader.set_subreaper(previous_subreaper)
        view.close()
    return result


def _tail_reading(result: MonitorResult, supervisor: Supervisor, host: HostReader, t0: float) -> None:
    """A host reading after the loop; ``monitor_signalled`` once the monitor has terminated the tree."""
    alive = [(p["pid"], p["start_ticks"]) for p in supervisor.alive()]
    signalled = result.monitor_failure is not None and bool(result.host_tail)
    result.host_tail.append(host.tail(time.monotonic() - t0, alive, monitor_signalled=signalled))


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
    settings: MonitorSettings,
    result: MonitorResult,
    supervisor: Supervisor,
    sampler: Sampler,
    view: LiveView,
    cancelled: threading.Event,
) -> None:
    """Sample until the command exits, a limit is hit or the monitor is cancelled (sets
    ``result.monitor_failure`` for the latter two)."""
    proc = supervisor.proc
    samples = _SampleStep(settings, result, sampler, view)
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
                result.monitor_failure = failure
                return
            next_sample = max(next_sample + settings.sample_interval_s, now + 0.001)
        if proc.poll() is not None:
            return
        if cancelled.is_set():
            result.monitor_failure = "external_cancellation"
            return
        supervisor.reap_adopted()
        time.sleep(min(0.25, max(0.0, next_sample - time.monotonic())))


class _SampleStep:
    """What the loop does with each sample of the live tree: record it, mark the end of start-up,
    update the view with a recent-rate ETA, and check the limits (harness.soak.verdicts.hang)."""

    def __init__(
        self, settings: MonitorSettings, result: MonitorResult, sampler: Sampler, view: LiveView
    ) -> None:
        self.settings = settings
        self.result = result
        self.sampler = sampler
        self.view = view
        self.recent: deque[tuple[float, int]] = deque(maxlen=12)  # (t, iteration) of the last samples
        self.limits = Limits.of(settings)

    def record(self, sample: dict[str, Any], now: float) -> MonitorFailure | None:
        """Record ``sample`` (taken at monotonic ``now``); the limit it breaks, or None."""
        settings, result, sampler = self.settings, self.result, self.sampler
        result.samples.append(sample)
        result.sample_ms.append(sample["sample_ms"])
        _append_jsonl(settings.samples_path, sample)
        started = _progress_started(settings.mode, sampler.liveness, sampler.progress)
        if started and result.startup_end_t is None:
            result.startup_end_t = sample["t"]
        self.view.update(
            summarize(
                sample,
                phase="running" if started else "startup",
                max_iterations=settings.max_iterations,
                min_duration_s=settings.min_duration_s,
                iterations_per_s=self._iteration_rate(sample),
            )
        )
        last_change = sampler.liveness.last_change_mono(sampler.t0)
        failure = self.limits.check(sample["progress"], now, sampler.t0, started, last_change)
        result.monitor_detail = self.limits.detail(failure, result.samples)
        return failure

    def _iteration_rate(self, sample: Mapping[str, Any]) -> float | None:
        """Iterations per second over the last samples that reported one, or None."""
        iteration = (sample["progress"] or {}).get("iteration")
        if isinstance(iteration, int):
            self.recent.append((sample["t"], iteration))
        recent = self.recent
        if len(recent) >= 2 and recent[-1][0] > recent[0][0]:
            return (recent[-1][1] - recent[0][1]) / (recent[-1][0] - recent[0][0])
        return None


def _append_jsonl(path: Path, record: Mapping[str, Any]) -> None:
    """Append one JSON line and flush it to the OS, so a monitor crash loses no sample already taken."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, separators=(",", ":")) + "\n")
        fh.flush()


def _strict_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_run_summary(log_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``run_summary.json`` of the run, or None with the reason it is missing or unreadable: absent, a
    directory, a symlink leading out of the log dir, not UTF-8, not strict JSON (truncated, NaN) or not
    an object. Never raises for what the trainer left behind."""
    path = log_dir / "run_summary.json"
    if not path.exists() and not path.is_symlink():
        return None, f"{path} does not exist"
    if path.is_symlink() and not path.resolve().is_relative_to(log_dir.resolve()):
        return None, f"{path} is a symlink outside the log dir (to {path.resolve()})"
    if path.is_dir():
        return None, f"{path} is a directory, not a file"
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=_strict_constant)
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        return None, f"{path} is unreadable: {exc}"
    if not isinstance(data, dict):
        return None, f"{path} is not a JSON object"
    return data, None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100]) or None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def overhead(result: MonitorResult) -> dict[str, Any]:
    """The monitor's own cost during the loop: CPU share of one core and per-sample time."""
    return {
        "loop_cpu_s": round(result.loop_cpu_s, 4),
        "loop_wall_s": round(result.loop_wall_s, 3),
        "cpu_share_of_one_core": round(result.loop_cpu_s / result.loop_wall_s, 5)
        if result.loop_wall_s
        else None,
        "sample_count": len(result.sample_ms),
        "sample_ms_p50": percentile(result.sample_ms, 50),
        "sample_ms_p95": percentile(result.sample_ms, 95),
        "sample_ms_max": max(result.sample_ms) if result.sample_ms else None,
    }
