"""``run_training(cfg)``: the main process is the learner and the manager of one collector process.

Lifecycle (phase names as recorded in the manifest):

    startup   log_dir + run_config.json; spawn the collector; it builds env + actor and says hello;
              build the learner; create ingress, ring and control header; attach; publish weights v1
    prefill   first ``algo.prefill_iterations`` vector steps (random actions), ingested, no updates
    train     ingest each vector step's slots, then ``learner.update()`` and publish the new weights
    finalize  publish the final weights, set ``finish``, receive ``done``, join the collector
    playback  optional deterministic playback of the final policy (``training.no_play=false``)

Whatever happens, ``finally`` runs the one-deadline cleanup and writes run_summary.json.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from omegaconf import DictConfig, OmegaConf

from runtime import artifacts
from runtime.manager import reporting
from runtime.manager.collector import CONTROL_FLOAT_FIELDS, CONTROL_INT_FIELDS, CollectorArgs, collector_main
from runtime.manager.hooks import TrainerHooks, _Counters
from runtime.manager.shutdown import Cleanup, Deadline, Phase, RunFailure, ShutdownRecord, stop_process
from runtime.manager.signals import WakeSignal

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def run_training(cfg: DictConfig, hooks: TrainerHooks | None = None) -> int:
    """Train with ``cfg`` (validated by runtime.config); returns the process exit code.

    0 normal completion; 2 unusable log_dir (nothing written); 128+signum on SIGINT/SIGTERM; 1 on
    any other classified failure. run_summary.json is written on every path past log_dir creation."""
    try:
        log_dir = artifacts.prepare_log_dir(cfg.log_dir)
    except artifacts.ArtifactError as exc:
        print(f"train: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return TrainingSession(cfg, log_dir, hooks or TrainerHooks()).run()


class TrainingSession:
    """One run's state; :meth:`run` is the only entry point."""

    def __init__(self, cfg: DictConfig, log_dir: Path, hooks: TrainerHooks) -> None:
        self.cfg, self.log_dir, self.hooks = cfg, log_dir, hooks
        self.phase: Phase = "startup"
        self.c = _Counters()
        self.cancel_signum: int | None = None
        self.proc: Any = None
        self.collector_pid: int | None = None
        self.conn: Any = None
        self.hello: dict[str, Any] | None = None
        self.learner: Any = None
        self.ingress: Any = None
        self.ring: Any = None
        self.control: Any = None
        self.progress: artifacts.ProgressLog | None = None
        self.writer: Any = None
        self.final_ingress: dict[str, Any] | None = None
        self.final_ring: dict[str, Any] | None = None
        self.final_control: dict[str, Any] | None = None
        self.playback: dict[str, Any] | None = None
        self.collector_exitcode: int | None = None
        self.num_envs = int(cfg.algo.num_envs)
        self.slot_rows = int(cfg.resolved.replay_ingress_slot_rows)
        self.slots_per_iteration = self.num_envs // self.slot_rows
        self.total_iterations = int(cfg.algo.max_iterations)
        self.prefill = int(cfg.algo.prefill_iterations)
        self.learner_device = reporting.learner_device(cfg)
        self.collector_device = reporting.collector_device(cfg)
        self.to_learner = WakeSignal()
        self.to_collector = WakeSignal()
        self.started_mono = time.monotonic()
        self._last_tb_mono = float("-inf")
        self._progress_lock = threading.Lock()
        self._heartbeat_stop = threading.Event()
        self._heartbeat_thread: threading.Thread | None = None
        self._heartbeat_errors: list[str] = []
        self.cleanup_extra_errors: list[str] = []
        self.loop_s = 0.0  # seconds inside the ingest/update loop (throughput denominator)

    # -- top level ------------------------------------------------------------------------------
    def run(self) -> int:
        started_wall, started = time.time(), time.monotonic()
        old_handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        record = ShutdownRecord()
        try:
            self._startup()
            self._train()
            self._finalize()
            if not self.cfg.training.no_play:
                self.phase = "playback"
                self.playback = reporting.run_playback(self.cfg, self.learner, self.hooks.env_factory)
            record = ShutdownRecord("normal_completion", self.phase)
        except RunFailure as failure:
            record = ShutdownRecord.from_failure(failure, self.phase)
        except KeyboardInterrupt as exc:
            record = ShutdownRecord.from_failure(
                RunFailure("external_cancellation", "interrupted", cause=exc), self.phase
            )
        except (ConnectionError, EOFError) as exc:  # the collector's end of a pipe is gone
            record = self._broken_pipe_record(exc)
        except Exception as exc:
            record = ShutdownRecord.from_failure(
                RunFailure("unknown_failure", f"{type(exc).__name__}: {exc}", cause=exc), self.phase
            )
        finally:
            self._cleanup(record)
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)
        code = EXIT_OK if record.classification == "normal_completion" else EXIT_FAILED
        if record.classification == "external_cancellation" and self.cancel_signum is not None:
            code = 128 + self.cancel_signum
        summary = reporting.build_summary(self, record, started_wall, time.monotonic() - started, code)
        try:
            artifacts.write_run_summary(self.log_dir, summary)
        except artifacts.ArtifactError as exc:  # our own bug; still leave a readable failed summary
            summary = reporting.schema_failure_summary(summary, str(exc))
            artifacts.write_run_summary(self.log_dir, summary)
            code = EXIT_FAILED
        if record.classification != "normal_completion":
            print(f"train: {record.classification}: {record.reason}", file=sys.stderr)
        return code

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.cancel_signum is None:
            self.cancel_signum = signum
        self.to_learner.set()  # wake any wait so the loop notices promptly

    # -- startup --------------------------------------------------------------------------------
    def _startup(self) -> None:
        config = OmegaConf.to_container(self.cfg, resolve=True)
        assert isinstance(config, dict)
        artifacts.write_run_config(self.log_dir, artifacts.build_run_config(config))  # type: ignore[arg-type]
        self.progress = artifacts.ProgressLog(self.log_dir / "progress.jsonl")
        # Opened before anything can fail so every run leaves a schema-versioned event file.
        self.writer = reporting.open_metrics_writer(self.log_dir)
        self._heartbeat_thread = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        self._heartbeat_thread.start()
        ctx = mp.get_context("spawn")
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        self.conn = parent_conn
        args = CollectorArgs(
            config=config,  # type: ignore[arg-type]
            device=self.collector_device,
            env_factory=self.hooks.env_factory,
            policy_module=self.hooks.policy_module,
            to_learner=self.to_learner,
            to_collector=self.to_collector,
            parent_pid=os.getpid(),
            torch_threads=self.hooks.collector_torch_threads,
        )
        self.proc = ctx.Process(target=collector_main, args=(args, child_conn), name="soakbench-collector")
        self.proc.start()
        self.collector_pid = self.proc.pid
        child_conn.close()
        self.hello = self._await_hello()
        self._build_learner_and_arenas()

    def _await_hello(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.hooks.startup_timeout_s
        while True:
            self._check_cancel()
            if self.conn.poll(self.hooks.poll_s):
                msg = self._recv()
                if msg.get("kind") == "hello":
                    return msg
                continue
            self._check_collector_alive()
            if time.monotonic() > deadline:
                raise RunFailure(
                    "timeout/stale_tick",
                    f"collector did not finish start-up within {self.hooks.startup_timeout_s:.0f} s",
                )
            self._heartbeat_if_due()

    def _build_learner_and_arenas(self) -> None:
        import torch

        from runtime.manager.ingress import IngressLayout, ReplayIngress
        from runtime.manager.ring import InferenceRing
        from runtime.manager.shm import SharedCounters

        assert self.hello is not None
        obs_dim, action_dim = int(self.hello["obs_dim"]), int(self.hello["action_dim"])
        device = torch.device(self.learner_device)
        # torch's default (one thread per core) makes the learner fight the collector's physics threads.
        torch.set_num_threads(int(self.cfg.resolved.learner_threads))
        try:
            if self.hooks.learner_factory is not None:
                self.learner = self.hooks.learner_factory(self.cfg, obs_dim, action_dim, device)
            else:
                from runtime.learners import build_learner

                self.learner = build_learner(
                    self.cfg.algo,
                    obs_dim,
                    action_dim,
                    device,
                    seed=int(self.cfg.seed),
                    torch_compile=bool(self.cfg.training.torch_compile),
                    cuda_graphs=bool(self.cfg.training.cuda_graphs),
                )
        except Exception as exc:
            raise RunFailure("learner_failure", f"building the learner failed: {exc}", cause=exc) from exc
        layout = IngressLayout(
            int(self.cfg.training.replay_ingress_depth), self.slot_rows, obs_dim, action_dim
        )
        self.ingress = ReplayIngress.create(layout, self.collector_device, self.to_learner, self.to_collector)
        self.ring = InferenceRing.create(
            int(self.cfg.training.inference_slot_capacity),
            int(self.hello["actor_state_size"]),
            self.collector_device,
            self.to_collector,
        )
        self.control = SharedCounters.create("control", CONTROL_INT_FIELDS, CONTROL_FLOAT_FIELDS)
        self._publish_weights()  # version 1: the collector starts from the learner's initial actor
        self.conn.send(
            {
                "kind": "attach",
                "ingress": self.ingress.spec,
                "ring": self.ring.spec,
                "control": self.control.spec,
                "total_iterations": self.total_iterations,
                "prefill_iterations": self.prefill,
            }
        )
        self.c.last_slot_mono = time.monotonic()

    # -- training loop --------------------------------------------------------------------------
    def _train(self) -> None:
        start = time.monotonic()
        try:
            self._train_loop()
        finally:
            self.loop_s = time.monotonic() - start

    def _train_loop(self) -> None:
        self.phase = "prefill" if self.prefill > 0 else "train"
        fault_at = (
            int(self.cfg.training.test_fault_iteration)
            if self.cfg.training.test_fault == "learner_exception"
            else None
        )
        interval = int(self.cfg.training.collector_metrics_interval)
        save_interval = int(self.cfg.algo.save_interval)
        while self.c.iterations < self.total_iterations:
            self._check_cancel()
            t0 = time.perf_counter()
            batch = self.ingress.peek(self.hooks.poll_s)
            self.c.learner_wait_s += time.perf_counter() - t0
            if batch is None:
                self._check_collector()
                self._check_stale()
                self._heartbeat_if_due()
                continue
            self._learner_call(
                self.learner.add_transitions,
                batch.obs,
                batch.action,
                batch.reward,
                batch.next_obs,
                batch.terminated,
            )
            del batch  # drop the views into the slot before handing it back
            self.ingress.release()
            self.c.slots += 1
            self.c.last_slot_mono = time.monotonic()
            if self.c.slots % self.slots_per_iteration:
                continue
            self.c.iterations += 1
            it = self.c.iterations
            self.phase = "prefill" if it <= self.prefill else "train"
            if fault_at is not None and it >= fault_at:
                raise RunFailure(
                    "learner_failure",
                    f"injected learner exception at iteration {it} (training.test_fault=learner_exception)",
                    exc_type="InjectedLearnerFault",
                )
            if it > self.prefill and self._learner_call(self.learner.ready):
                t1 = time.perf_counter()
                self.c.metrics = self._learner_call(self.learner.update)
                self.c.update_s += time.perf_counter() - t1
                self.c.learner_updates += int(self.learner.updates_per_iteration)
                self._publish_weights()
            if it % interval == 0 or it == self.total_iterations:
                self._write_metrics(force=it == self.total_iterations)
                self._heartbeat()
            else:
                self._heartbeat_if_due()
            if it % save_interval == 0:
                self._checkpoint(f"ckpt_{it:08d}.pt")
            self._check_collector()

    def _finalize(self) -> None:
        self.phase = "finalize"
        self._publish_weights()
        self.control.set("finish", 1)
        self.to_collector.set()
        deadline = time.monotonic() + max(30.0, self.hooks.shutdown_deadline_s)
        while True:
            self._check_cancel()
            if self.conn.poll(self.hooks.poll_s):
                msg = self._recv()
                if msg.get("kind") == "done":
                    break
            self._check_collector_alive()
            if time.monotonic() > deadline:
                raise RunFailure(
                    "timeout/stale_tick", "collector did not acknowledge the final weights in time"
                )
        exit_deadline = time.monotonic() + self.hooks.finalize_exit_timeout_s
        while self.proc.exitcode is None and time.monotonic() < exit_deadline:
            self._check_cancel()  # a loaded host can take seconds to tear down torch + physics threads
            self.proc.join(self.hooks.poll_s)
        self.collector_exitcode = self.proc.exitcode
        if self.proc.exitcode != 0:
            raise RunFailure(
                "collector_failure",
                "collector did not exit cleanly after its final acknowledgement "
                f"({reporting.describe_exitcode(self.proc.exitcode)} after up to "
                f"{self.hooks.finalize_exit_timeout_s:.0f} s)",
            )
        self._snapshot_shared()
        self._checkpoint("final.pt")
        self._write_metrics(force=True)
        self._heartbeat()

    # -- helpers --------------------------------------------------------------------------------
    def _learner_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except RunFailure:
            raise
        except Exception as exc:
            raise RunFailure("learner_failure", f"{type(exc).__name__}: {exc}", cause=exc) from exc

    def _publish_weights(self) -> None:
        from runtime.learners import actor_state_vector

        vec = self._learner_call(lambda: actor_state_vector(self.learner.actor).to(self.collector_device))
        self.ring.publish(vec)

    def _recv(self) -> dict[str, Any]:
        try:
            msg = self.conn.recv()
        except (EOFError, OSError):
            self._collector_died(wait_s=2.0)
        if msg.get("kind") == "error":
            raise reporting.failure_from_report(msg)
        return msg

    def _check_cancel(self) -> None:
        if self.cancel_signum is not None:
            name = signal.Signals(self.cancel_signum).name
            raise RunFailure("external_cancellation", f"received {name}", exc_type=name)

    def _check_collector(self) -> None:
        if self.conn.poll(0):
            self._recv()
        self._check_collector_alive()

    def _broken_pipe_record(self, exc: BaseException) -> ShutdownRecord:
        """A broken pipe to the collector, at any phase, means the collector died (or is dying): classify
        it by the collector's fate, as the liveness check would have, not as an unknown failure."""
        try:
            if self.proc is not None:
                self.proc.join(2.0)
                if not self.proc.is_alive():
                    self._collector_died(wait_s=0.0)
        except RunFailure as failure:
            return ShutdownRecord.from_failure(failure, self.phase)
        unknown = RunFailure("unknown_failure", f"{type(exc).__name__}: {exc}", cause=exc)
        return ShutdownRecord.from_failure(unknown, self.phase)

    def _check_collector_alive(self) -> None:
        if self.proc is not None and not self.proc.is_alive():
            self._collector_died(wait_s=0.0)

    def _collector_died(self, wait_s: float) -> NoReturn:
        """Classify a collector that is gone: its error report if it sent one, else its exit code."""
        if self.proc is not None:
            self.proc.join(wait_s)
            self.collector_exitcode = self.proc.exitcode
        report = None
        try:
            while report is None and self.conn.poll(0):
                msg = self.conn.recv()
                report = msg if msg.get("kind") == "error" else None
        except (EOFError, OSError):
            pass
        self._check_cancel()  # a signal to the whole process group also kills the collector
        if report is not None:
            raise reporting.failure_from_report(report)
        code = self.proc.exitcode if self.proc is not None else None
        raise RunFailure(
            "collector_failure",
            f"collector process exited unexpectedly with {reporting.describe_exitcode(code)}",
        )

    def _check_stale(self) -> None:
        idle = time.monotonic() - self.c.last_slot_mono
        if idle > self.hooks.stale_tick_timeout_s:
            raise RunFailure("timeout/stale_tick", f"no replay slot published for {idle:.0f} s")

    def _heartbeat_if_due(self) -> None:
        if time.monotonic() - self.c.last_progress_mono >= float(self.cfg.training.heartbeat_seconds):
            self._heartbeat()

    def _heartbeat(self) -> None:
        with self._progress_lock:
            if self.progress is None or self._heartbeat_stop.is_set():
                return
            self.c.last_progress_mono = time.monotonic()
            self.progress.write(reporting.progress_record(self))

    def _heartbeat_loop(self) -> None:
        """Keeps progress.jsonl at least every heartbeat_seconds while the main thread is busy (a long
        learner update or env start-up); the main thread's own records reset the clock."""
        period = float(self.cfg.training.heartbeat_seconds)
        while not self._heartbeat_stop.wait(min(1.0, period / 4)):
            try:
                self._heartbeat_if_due()
            except Exception as exc:  # reported at cleanup, never kills the run
                self._heartbeat_errors.append(f"heartbeat: {type(exc).__name__}: {exc}")
                return

    def _stop_heartbeat(self) -> None:
        self._heartbeat_stop.set()
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.join(5.0)
            if self._heartbeat_thread.is_alive():
                raise RuntimeError("heartbeat thread did not stop within 5 s")
        self.cleanup_extra_errors.extend(self._heartbeat_errors)

    def _write_metrics(self, force: bool = False) -> None:
        """A TensorBoard window, at most one per ``hooks.tb_min_interval_s`` unless ``force``: at one
        iteration per few ms (MuJoCo owner, interval 1) a window per iteration costs more CPU than the
        physics it reports on; progress.jsonl keeps the per-interval heartbeat."""
        if self.writer is None:
            return
        now = time.monotonic()
        if force or now - self._last_tb_mono >= self.hooks.tb_min_interval_s:
            self._last_tb_mono = now
            reporting.write_tb(self)

    def _checkpoint(self, name: str) -> None:
        state = self._learner_call(self.learner.state_dict)
        payload = {
            "iteration": self.c.iterations,
            "total_env_steps": self.c.iterations * self.num_envs,
            "learner": state,
            "config": OmegaConf.to_container(self.cfg, resolve=True),
        }
        artifacts.save_checkpoint(self.log_dir / "checkpoints", self.c.iterations, payload, name=name)

    def _snapshot_shared(self) -> None:
        if self.ingress is not None and not self.ingress._closed_local:
            self.final_ingress = self.ingress.stats()
        if self.ring is not None and not self.ring._closed:
            self.final_ring = self.ring.stats()
        if self.control is not None and not self.control.segment._closed:
            self.final_control = self.control.snapshot()

    # -- cleanup --------------------------------------------------------------------------------
    def _cleanup(self, record: ShutdownRecord) -> None:
        """Stop the collector, release every segment and fd; one deadline; errors recorded."""
        deadline = Deadline(self.hooks.shutdown_deadline_s)
        cleanup = Cleanup()

        def stop_collector() -> None:
            if self.ingress is not None:
                if record.classification != "normal_completion":
                    self.ingress.request_stop()
                self.ingress.mark_closed()
            elif self.conn is not None and self.proc is not None and self.proc.is_alive():
                with contextlib.suppress(OSError):  # still in start-up: do not wait for an attach
                    self.conn.send({"kind": "abort"})
            self.to_collector.set()
            if self.proc is None:
                record.collector_stop = "not_started"
                return
            record.collector_stop = stop_process(self.proc, deadline)
            self.collector_exitcode = self.proc.exitcode
            if record.collector_stop == "lost":
                raise RuntimeError(f"collector pid {self.proc.pid} survived SIGKILL")

        def final_progress() -> None:  # one last record carrying the final counters
            if self.progress is not None:
                self.progress.write(reporting.progress_record(self, final=True))

        cleanup.add("stop_heartbeat", self._stop_heartbeat)
        cleanup.add("stop_collector", stop_collector)
        cleanup.add("snapshot_counters", self._snapshot_shared)
        cleanup.add("final_progress", final_progress)
        for name in (
            "ingress",
            "ring",
            "control",
            "conn",
            "to_learner",
            "to_collector",
            "writer",
            "progress",
        ):
            cleanup.add(f"close_{name}", functools.partial(_close_attr, self, name))
        cleanup.add("close_process", functools.partial(_close_process, self.proc))
        record.cleanup_errors = cleanup.run() + self.cleanup_extra_errors
        record.cleanup_duration_s = time.monotonic() - deadline.start


def _close_attr(owner: object, name: str) -> None:
    part = getattr(owner, name)
    if part is not None:
        part.close()


def _close_process(proc: Any) -> None:
    if proc is not None and proc.exitcode is not None:
        proc.close()  # release the sentinel fd
