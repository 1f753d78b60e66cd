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

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, ParamSpec, TypeVar

import soakbench.runtime.artifacts as artifacts
from soakbench.foundation.vocab import RunPhase
from soakbench.runtime.config import RunConfig
from soakbench.runtime.distributed import RankIdentity
from soakbench.runtime.learners.collective import CollectiveError
from soakbench.runtime.manager import reporting
from soakbench.runtime.manager.collector import CollectorArgs
from soakbench.runtime.manager.diagnostics import ambient_mps_facts, learner_diagnostics_payload
from soakbench.runtime.manager.heartbeat import Heartbeat
from soakbench.runtime.manager.hooks import TrainerHooks
from soakbench.runtime.manager.inputs_record import record_inputs
from soakbench.runtime.manager.job_summary import rank_block
from soakbench.runtime.manager.link import CollectorLink, describe_exitcode, failure_from_report
from soakbench.runtime.manager.plan import RunPlan
from soakbench.runtime.manager.process_group import ProcessGroupCollective, backend_for, join_group, leave_job
from soakbench.runtime.manager.resources import (
    Arenas,
    ArenaStats,
    Doorbells,
    Hello,
    SessionResources,
    StartupState,
    build_learner,
)
from soakbench.runtime.manager.shutdown import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    RunFailure,
    ShutdownRecord,
    exit_code,
)
from soakbench.runtime.manager.teardown import teardown
from soakbench.runtime.manager.telemetry import LearnerCounters, Telemetry
from soakbench.runtime.metrics_schema import MetricsWriter

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "TrainerHooks", "TrainingSession", "run_training"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


def run_training(cfg: RunConfig, hooks: TrainerHooks | None = None, ranks: RankIdentity | None = None) -> int:
    """Train with ``cfg`` (``runtime.config.validate_for_run``'s result); returns the process exit code.
    ``ranks``: this process is one rank of a torchrun job (``cfg`` is already that rank's own).

    0 normal completion; 2 unusable log_dir (nothing written); 128+signum on SIGINT/SIGTERM; 1 on
    any other classified failure. run_summary.json is written on every path past log_dir creation.
    A config that did not pass the host checks is refused with TypeError before anything is written."""
    if not isinstance(cfg, RunConfig):
        raise TypeError(
            f"run_training needs a host-validated RunConfig, got {type(cfg).__name__}: pass the composed "
            "config through runtime.config.validate_for_run(cfg, PlatformFacts.detect()) first"
        )
    try:
        log_dir = artifacts.prepare_log_dir(cfg.log_dir)
    except artifacts.ArtifactError as exc:
        print(f"train: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return TrainingSession(cfg, log_dir, hooks or TrainerHooks(), ranks).run()


class TrainingSession:
    """One run; :meth:`run` is the only entry point.

    ``parts`` holds what start-up has created so far (what the cleanup releases); ``resources`` is the
    same set, typed and complete, from the end of start-up on.
    """

    def __init__(
        self, cfg: RunConfig, log_dir: Path, hooks: TrainerHooks, ranks: RankIdentity | None = None
    ) -> None:
        self.cfg, self.log_dir, self.hooks, self.ranks = cfg, log_dir, hooks, ranks
        self.leads = ranks is None or ranks.rank == 0  # writes TensorBoard, checkpoints, the playback
        self.group: ProcessGroupCollective | None = None
        self.params_checksum: str | None = None
        self.plan = RunPlan.from_config(cfg)
        self.started_mono = time.monotonic()
        self.bells = Doorbells.create()
        self.counters = LearnerCounters()
        self.telemetry = Telemetry(self.started_mono, hooks.tb_min_interval_s)
        self.heartbeat = Heartbeat(self.plan.heartbeat_s, self._write_progress)
        self.phase: RunPhase = "startup"
        self.cancel_signum: int | None = None
        self.parts = StartupState()
        self.resources: SessionResources | None = None
        self.final_stats: ArenaStats | None = None
        self.collector_exitcode: int | None = None
        self.playback: dict[str, Any] | None = None
        self.loop_s = 0.0  # seconds inside the ingest/update loop (throughput denominator)

    @property
    def res(self) -> SessionResources:
        if self.resources is None:
            raise RuntimeError("the session's resources are used before start-up completed")
        return self.resources

    # -- top level ------------------------------------------------------------------------------
    def run(self) -> int:
        """Drive the run and write its artifacts. SIGINT and SIGTERM stay handled until the last one (a
        job's summary included) is written: a launcher sends its closing SIGTERM to a rank as soon as a
        peer exits, often while that rank is still writing, and the default action would cut it off."""
        old_handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            return self._run_and_report()
        finally:
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)

    def _run_and_report(self) -> int:
        started_wall, started = time.time(), time.monotonic()
        record = ShutdownRecord()
        try:
            record = self._drive()
        finally:
            teardown(self, record)
        code = exit_code(record, self.cancel_signum)
        summary = reporting.build_summary(
            self._report(code, started_wall, time.monotonic() - started), record
        )
        if self.ranks is not None:
            summary["distributed"] = rank_block(
                self.ranks, backend_for(self.plan.learner_device), self.params_checksum
            )
        code, written = self._write_summary(summary, code)
        record_inputs(self.log_dir, "trainer" if self.ranks is None else f"rank-{self.ranks.rank}")
        if record.classification != "normal_completion":
            print(f"train: {record.classification}: {record.reason}", file=sys.stderr)
        if self.ranks is not None:
            job_dir = self.ranks.job_directory(self.log_dir)
            if not leave_job(self.ranks, job_dir, written, self.cfg.training.group_exit_deadline_s):
                code = EXIT_FAILED
        return code

    def _drive(self) -> ShutdownRecord:
        """Every phase in order; how the run ended, classified."""
        try:
            self._startup()
            self._train()
            self._finalize()
            if not self.cfg.training.no_play and self.leads:
                self._playback()
            return ShutdownRecord("normal_completion", self.phase)
        except RunFailure as failure:
            return ShutdownRecord.from_failure(failure, self.phase)
        except KeyboardInterrupt as exc:
            interrupted = RunFailure("external_cancellation", "interrupted", cause=exc)
            return ShutdownRecord.from_failure(interrupted, self.phase)
        except (ConnectionError, EOFError) as exc:  # the collector's end of a pipe is gone
            return self._broken_pipe_record(exc)
        except Exception as exc:
            unknown = RunFailure("unknown_failure", f"{type(exc).__name__}: {exc}", cause=exc)
            return ShutdownRecord.from_failure(unknown, self.phase)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self.cancel_signum is None:
            self.cancel_signum = signum
        self.bells.to_learner.set()  # wake any wait so the loop notices promptly

    def _write_summary(self, summary: dict[str, Any], code: int) -> tuple[int, dict[str, Any]]:
        """The exit code and the summary as written (a schema failure writes a failed one instead)."""
        try:
            artifacts.write_run_summary(self.log_dir, summary)
        except artifacts.ArtifactError as exc:  # our own bug; still leave a readable failed summary
            failed = reporting.schema_failure_summary(summary, str(exc))
            artifacts.write_run_summary(self.log_dir, failed)
            return EXIT_FAILED, failed
        return code, summary

    # -- startup --------------------------------------------------------------------------------
    def _startup(self) -> None:
        artifacts.write_run_config(self.log_dir, artifacts.build_run_config(self.cfg.to_dict()))
        self.parts.progress = artifacts.ProgressLog(self.log_dir / "progress.jsonl")
        # Opened before anything can fail so every run leaves a schema-versioned event file.
        self.parts.writer = MetricsWriter(self.log_dir) if self.leads else None
        self.heartbeat.start()
        if self.ranks is not None:
            self.group = self._join_group(self.ranks)
        self.parts.link = link = CollectorLink.spawn(self._collector_args())
        timeout = self.hooks.startup_timeout_s
        reason = f"collector did not finish start-up within {timeout:.0f} s"
        self.parts.hello = hello = Hello.from_message(self._await_message(link, "hello", timeout, reason))
        self.parts.learner = learner = build_learner(self.cfg, self.hooks, self.plan, hello)
        if self.group is not None:
            self._learner_call(learner.join, self.group)  # every rank starts from rank 0's networks
        self.parts.arenas = Arenas.create(self.plan, hello, self.bells)
        self.resources = self.parts.complete()
        self._publish_weights()  # version 1: the collector starts from the learner's initial actor
        link.conn.send(self.res.arenas.attach_message(self.plan))
        self.counters.last_slot_mono = time.monotonic()

    def _collector_args(self) -> CollectorArgs:
        return CollectorArgs(
            config=self.cfg,
            device=self.plan.physics_device,
            env_factory=self.hooks.env_factory,
            policy_module=self.hooks.policy_module,
            to_learner=self.bells.to_learner,
            to_collector=self.bells.to_collector,
            parent_pid=os.getpid(),
            torch_threads=self.hooks.collector_torch_threads,
        )

    def _join_group(self, ranks: RankIdentity) -> ProcessGroupCollective:
        timeout = self.cfg.training.collective_timeout_s
        try:
            return join_group(ranks, self.plan.learner_device, timeout)
        except (RuntimeError, ValueError) as exc:  # the rendezvous store timed out or refused
            raise RunFailure("peer_failure", f"the process group did not form: {exc}", cause=exc) from exc

    def _await_message(self, link: CollectorLink, kind: str, timeout_s: float, reason: str) -> dict[str, Any]:
        """Wait for the collector's ``kind`` message, watching for cancellation, its death and the
        timeout (a ``timeout/stale_tick`` failure with ``reason``)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_cancel()
            if link.conn.poll(self.hooks.poll_s):
                msg = self._recv(link)
                if msg.get("kind") == kind:
                    return msg
            self._check_collector_alive(link)
            if time.monotonic() > deadline:
                raise RunFailure("timeout/stale_tick", reason)
            self.heartbeat.beat_if_due()

    # -- training loop --------------------------------------------------------------------------
    def _train(self) -> None:
        start = time.monotonic()
        try:
            self._train_loop()
        finally:
            self.loop_s = time.monotonic() - start

    def _train_loop(self) -> None:
        res, plan = self.res, self.plan
        self.phase = "prefill" if plan.prefill > 0 else "train"
        while self.counters.iterations < plan.total_iterations:
            self._check_cancel()
            if not self._ingest_slot(res):
                self._check_collector(res.link)
                self._check_stale()
                self.heartbeat.beat_if_due()
            elif self.counters.slots % plan.slots_per_iteration == 0:
                self._complete_iteration(res)

    def _ingest_slot(self, res: SessionResources) -> bool:
        """Copy the oldest published slot into the learner and release it; False if none came."""
        t0 = time.perf_counter()
        batch = res.arenas.ingress.peek(self.hooks.poll_s)
        self.counters.learner_wait_s += time.perf_counter() - t0
        if batch is None:
            return False
        self._learner_call(
            res.learner.add_transitions,
            batch.obs,
            batch.action,
            batch.reward,
            batch.next_obs,
            batch.terminated,
        )
        del batch  # drop the views into the slot before handing it back
        res.arenas.ingress.release()
        self.counters.slots += 1
        self.counters.last_slot_mono = time.monotonic()
        return True

    def _complete_iteration(self, res: SessionResources) -> None:
        """A whole vector step is ingested: update, report and checkpoint as due."""
        self.counters.iterations += 1
        it, plan = self.counters.iterations, self.plan
        self.phase = "prefill" if it <= plan.prefill else "train"
        if plan.fault_at is not None and it >= plan.fault_at:
            raise RunFailure(
                "learner_failure",
                f"injected learner exception at iteration {it} (training.test_fault=learner_exception)",
                exc_type="InjectedLearnerFault",
            )
        if it > plan.prefill and self._learner_call(res.learner.ready):
            self.counters.metrics = self._learner_call(res.learner.update)
            self.counters.learner_updates += int(res.learner.updates_per_iteration)
            self._publish_weights()
        if it % plan.metrics_interval == 0 or it == plan.total_iterations:
            self._write_metrics(force=it == plan.total_iterations)
            self.heartbeat.beat()
        else:
            self.heartbeat.beat_if_due()
        if it % plan.save_interval == 0:
            self._checkpoint(f"ckpt_{it:08d}.pt")
        self._check_collector(res.link)

    def _finalize(self) -> None:
        res = self.res
        self.phase = "finalize"
        self._publish_weights()
        res.arenas.control.request_finish()
        self.bells.to_collector.set()
        reason = "collector did not acknowledge the final weights in time"
        self._await_message(res.link, "done", max(30.0, self.hooks.shutdown_deadline_s), reason)
        self._await_collector_exit(res.link)
        if self.group is not None:
            self._learner_call(res.learner.synchronize)
            self.params_checksum = self._learner_call(res.learner.checksum)
        self.snapshot_shared()
        self._checkpoint("final.pt")
        self._write_metrics(force=True)
        self.heartbeat.beat()

    def _await_collector_exit(self, link: CollectorLink) -> None:
        timeout = self.hooks.finalize_exit_timeout_s
        exit_deadline = time.monotonic() + timeout
        while link.proc.exitcode is None and time.monotonic() < exit_deadline:
            self._check_cancel()  # a loaded host can take seconds to tear down torch + physics threads
            link.proc.join(self.hooks.poll_s)
        self.collector_exitcode = link.proc.exitcode
        if link.proc.exitcode != 0:
            raise RunFailure(
                "collector_failure",
                "collector did not exit cleanly after its final acknowledgement "
                f"({describe_exitcode(link.proc.exitcode)} after up to {timeout:.0f} s)",
            )

    def _playback(self) -> None:
        from soakbench.runtime.manager.playback import run_playback

        self.phase = "playback"
        self.playback = run_playback(
            self.cfg, self.res.learner.actor, self.hooks.env_factory, self.plan.physics_device
        )

    # -- helpers --------------------------------------------------------------------------------
    def _learner_call(self, fn: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return fn(*args, **kwargs)
        except RunFailure:
            raise
        except CollectiveError as exc:  # the peer's failure, not this rank's
            raise RunFailure("peer_failure", str(exc), cause=exc) from exc
        except Exception as exc:
            raise RunFailure("learner_failure", f"{type(exc).__name__}: {exc}", cause=exc) from exc

    def _publish_weights(self) -> None:
        from soakbench.runtime.learners import actor_state_vector

        res = self.res
        vec = self._learner_call(lambda: actor_state_vector(res.learner.actor).to(self.plan.physics_device))
        res.arenas.ring.publish(vec)

    def _recv(self, link: CollectorLink) -> dict[str, Any]:
        try:
            msg: dict[str, Any] = link.conn.recv()
        except (EOFError, OSError):
            self._collector_died(link, wait_s=2.0)
        if msg.get("kind") == "error":
            raise failure_from_report(msg)
        return msg

    def _check_cancel(self) -> None:
        if self.cancel_signum is not None:
            name = signal.Signals(self.cancel_signum).name
            raise RunFailure("external_cancellation", f"received {name}", exc_type=name)

    def _check_collector(self, link: CollectorLink) -> None:
        if link.conn.poll(0):
            self._recv(link)
        self._check_collector_alive(link)

    def _check_collector_alive(self, link: CollectorLink) -> None:
        if not link.alive():
            self._collector_died(link, wait_s=0.0)

    def _collector_died(self, link: CollectorLink, wait_s: float) -> NoReturn:
        """Classify a collector that is gone: its error report if it sent one, else its exit code."""
        failure = link.death_failure(wait_s)
        self.collector_exitcode = link.proc.exitcode
        self._check_cancel()  # a signal to the whole process group also kills the collector
        raise failure

    def _broken_pipe_record(self, exc: BaseException) -> ShutdownRecord:
        """A broken pipe to the collector, at any phase, means the collector died (or is dying): classify
        it by the collector's fate, as the liveness check would have, not as an unknown failure."""
        link = self.parts.link
        try:
            if link is not None:
                link.proc.join(2.0)
                if not link.alive():
                    self._collector_died(link, wait_s=0.0)
        except RunFailure as failure:
            return ShutdownRecord.from_failure(failure, self.phase)
        unknown = RunFailure("unknown_failure", f"{type(exc).__name__}: {exc}", cause=exc)
        return ShutdownRecord.from_failure(unknown, self.phase)

    def _check_stale(self) -> None:
        idle = time.monotonic() - self.counters.last_slot_mono
        if idle > self.hooks.stale_tick_timeout_s:
            raise RunFailure("timeout/stale_tick", f"no replay slot published for {idle:.0f} s")

    def _checkpoint(self, name: str) -> None:
        if not self.leads:
            return
        state = self._learner_call(self.res.learner.state_dict)
        payload = {
            "iteration": self.counters.iterations,
            "total_env_steps": self.counters.iterations * self.plan.num_envs,
            "learner": state,
            "config": self.cfg.to_dict(),
        }
        artifacts.save_checkpoint(self.log_dir / "checkpoints", self.counters.iterations, payload, name=name)

    # -- reporting (the builders are pure; the writing happens here) -----------------------------
    def arena_stats(self) -> ArenaStats:
        """The final snapshot once taken, else the live counters, else the counters of no arenas."""
        if self.final_stats is not None:
            return self.final_stats
        live = self.parts.arenas.stats() if self.parts.arenas is not None else None
        return live if live is not None else ArenaStats.empty(self.plan)

    def snapshot_shared(self) -> None:
        """Keep the arenas' counters for the summary (they are read before the segments go away)."""
        stats = self.parts.arenas.stats() if self.parts.arenas is not None else None
        self.final_stats = stats if stats is not None else self.final_stats

    def write_final_progress(self) -> None:
        self._write_progress(final=True)

    def _write_progress(self, final: bool = False) -> None:
        progress = self.parts.progress
        if progress is None:
            return
        now = time.monotonic()
        snap = self.counters.snapshot(self.plan.num_envs)
        rate = self.telemetry.progress_rate(snap.total_env_steps, now)
        elapsed = now - self.started_mono
        record = reporting.progress_record(snap, self.arena_stats(), self.phase, elapsed, rate, final)
        if self.hooks.extra_progress is not None:
            record.update(self.hooks.extra_progress())
        progress.write(record)

    def _write_metrics(self, force: bool = False) -> None:
        writer = self.parts.writer
        if writer is None:
            return
        snap = self.counters.snapshot(self.plan.num_envs)
        stats = self.arena_stats()
        episodes = reporting.episode_totals(stats.control)
        window = self.telemetry.tb_window(snap, episodes, time.monotonic(), force=force)
        if window is not None:
            scalars = reporting.tb_scalars(snap, window, self.counters.metrics, stats)
            writer.write(snap.total_env_steps, scalars)

    def _report(self, code: int, started_wall: float, duration_s: float) -> reporting.RunReport:
        link = self.parts.link
        return reporting.RunReport(
            plan=self.plan,
            hooks=self.hooks,
            counters=self.counters.snapshot(self.plan.num_envs),
            stats=self.arena_stats(),
            hello=self.parts.hello,
            memory_budgeted=self.parts.arenas is not None,
            learner_diagnostics=learner_diagnostics_payload(self.parts.learner),
            signalling_kind=self.bells.to_learner.kind,
            cuda_process_sharing=reporting.cuda_process_sharing(
                self.plan.sharing_resolved,
                self.plan.sharing_configured,
                self.plan,
                ambient_mps_facts() if reporting.on_cuda(self.plan) else None,
            ),
            collector_pid=link.pid if link is not None else None,
            collector_exitcode=self.collector_exitcode,
            loop_s=self.loop_s,
            playback=self.playback,
            started_unix_s=started_wall,
            finished_unix_s=time.time(),
            duration_s=duration_s,
            exit_code=code,
        )
