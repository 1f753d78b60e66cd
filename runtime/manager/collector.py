"""The collector process: owns the backend and the task env, runs policy inference, fills the ingress.

Started with the ``spawn`` method by the trainer. Protocol over the control pipe:

    collector -> trainer  {"kind": "hello", obs_dim, action_dim, backend_type, data_plane, device,
                           semantic_name, actor_state_size, backend_diagnostics, pid}
    trainer  -> collector {"kind": "attach", ingress: IngressSpec, ring: RingSpec, control: CountersSpec,
                           total_iterations, prefill_iterations}
    collector -> trainer  {"kind": "error", owner: backend_worker|collector, type, message, traceback}
    collector -> trainer  {"kind": "done", iterations}

After ``total_iterations`` vector steps the collector waits for the trainer's ``finish`` flag (set once the
final weights are published), adopts that final publication (so the ring ends with lag 0) and exits 0.
A stop request makes it abandon the pending batch (an ingress early return) and exit 0. An exception
raised while building or stepping the env is reported with owner ``backend_worker``; anything else
with owner ``collector``; both exit with code 3. If the trainer dies, the collector exits on its own.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soakbench.foundation.roles import mark_process
from soakbench.runtime.manager.control import ControlSegment, StepTiming
from soakbench.runtime.manager.diagnostics import backend_diagnostics_payload
from soakbench.runtime.manager.ingress import IngressBatch, ReplayIngress
from soakbench.runtime.manager.inputs_record import record_inputs
from soakbench.runtime.manager.ring import InferenceRing
from soakbench.runtime.manager.signals import WakeSignal

if TYPE_CHECKING:
    import torch

    from soakbench.runtime.config import RunConfig
    from soakbench.runtime.learners.networks import Actor
    from soakbench.runtime.manager.contracts import CollectorEnv, EnvStep, PolicyModule

EXIT_REPORTED_ERROR = 3


@dataclass(frozen=True)
class CollectorArgs:
    """Picklable start arguments (signals carry their fds into the spawned child)."""

    config: RunConfig
    device: str
    env_factory: str  # "module:function" building the TaskEnv: f(cfg, *, device, seed)
    policy_module: str  # module with build_actor, actor_state_vector, load_actor_state_vector
    to_learner: WakeSignal
    to_collector: WakeSignal
    parent_pid: int
    torch_threads: int | None = None


class _BackendWorkerError(Exception):
    """Wraps an exception raised inside env construction, reset, stepping or closing."""


def resolve(target: str) -> Any:
    """Import ``"module:attr"`` (or a bare module when no colon)."""
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr) if attr else module


def _set_parent_death_signal() -> None:
    """Linux: have the kernel SIGKILL us if the trainer dies (belt and braces with the ppid check)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except OSError:
        pass


def collector_main(args: CollectorArgs, conn: Connection) -> None:
    """Spawn target. Exits 0 on a finished or stopped run, 3 after reporting an error."""
    # Ctrl-C and a group-wide SIGTERM (e.g. from the soak monitor) are the trainer's to handle: it stops
    # the collector through the stop protocol and classifies external_cancellation. A collector that
    # died of the same signal first would be misread as collector_failure. The parent-death signal
    # below still ends the collector if the trainer itself is killed.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _set_parent_death_signal()
    mark_process("collector")  # the soak monitor reads this role from /proc/<pid>/comm
    try:
        _run(args, conn)
        if args.config.log_dir is not None:
            record_inputs(Path(args.config.log_dir), "collector")
    except _BackendWorkerError as exc:
        _report(conn, "backend_worker", exc.__cause__ or exc)
        sys.exit(EXIT_REPORTED_ERROR)
    except (BrokenPipeError, EOFError):
        sys.exit(EXIT_REPORTED_ERROR)  # the trainer is gone; nobody to report to
    except Exception as exc:
        _report(conn, "collector", exc)
        sys.exit(EXIT_REPORTED_ERROR)
    finally:
        conn.close()


def _report(conn: Connection, owner: str, exc: BaseException) -> None:
    with contextlib.suppress(OSError, EOFError):
        conn.send(
            {
                "kind": "error",
                "owner": owner,
                "type": type(exc).__name__,
                "message": str(exc)[:2000],
                "traceback": "".join(traceback.format_exception(exc))[-8000:],
            }
        )


def _run(args: CollectorArgs, conn: Connection) -> None:
    import torch

    if args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    cfg = args.config
    device = torch.device(args.device)
    parent_gone = _parent_check(args.parent_pid)
    env = _build_env(args.env_factory, cfg, device)
    with contextlib.ExitStack() as stack:
        stack.callback(_close_env, env)  # registered first: closed after the segments
        policy: PolicyModule = resolve(args.policy_module)
        actor = policy.build_actor(cfg.algo, env.obs_dim, env.action_dim).to(device)
        actor.eval()
        state = policy.actor_state_vector(actor).to(device)
        conn.send(_hello(env, cfg, device, int(state.numel())))
        msg = _await_attach(conn, parent_gone)
        if msg is None:
            return
        ingress = ReplayIngress.attach(msg["ingress"], args.to_learner, args.to_collector)
        stack.callback(ingress.close)
        ring = InferenceRing.attach(msg["ring"], args.to_collector)
        stack.callback(ring.close)
        control = ControlSegment.attach(msg["control"])
        stack.callback(control.close)
        collector = Collector(
            env=env,
            actor=actor,
            policy=policy,
            state=state,
            ingress=ingress,
            ring=ring,
            control=control,
            conn=conn,
            to_collector=args.to_collector,
            parent_gone=parent_gone,
        )
        collector.run(int(msg["total_iterations"]), int(msg["prefill_iterations"]))


def _parent_check(parent_pid: int) -> Callable[[], bool]:
    return lambda: os.getppid() != parent_pid


def _build_env(env_factory: str, cfg: RunConfig, device: torch.device) -> CollectorEnv:
    try:
        env: CollectorEnv = resolve(env_factory)(cfg, device=device, seed=int(cfg.seed))
    except Exception as exc:
        raise _BackendWorkerError(str(exc)) from exc
    return env


def _close_env(env: CollectorEnv) -> None:
    try:
        env.close()
    except Exception as exc:
        raise _BackendWorkerError(f"env.close failed: {exc}") from exc


def _hello(env: CollectorEnv, cfg: RunConfig, device: torch.device, state_size: int) -> dict[str, Any]:
    backend = getattr(env, "backend", None)
    return {
        "kind": "hello",
        "obs_dim": int(env.obs_dim),
        "action_dim": int(env.action_dim),
        "backend_type": getattr(backend, "backend_type", cfg.training.sim_backend),
        "data_plane": getattr(backend, "data_plane", None),
        "device": str(device),
        "semantic_name": getattr(env, "semantic_name", None),
        "actor_state_size": state_size,
        "backend_diagnostics": backend_diagnostics_payload(env, cfg.training.sim_backend),
        "pid": os.getpid(),
    }


def _await_attach(conn: Connection, parent_gone: Callable[[], bool]) -> dict[str, Any] | None:
    while not conn.poll(0.25):
        if parent_gone():
            return None
    msg: dict[str, Any] = conn.recv()
    if msg.get("kind") != "attach":
        return None  # the trainer aborted the start-up
    return msg


@dataclass(frozen=True)
class Collector:
    """The attached collector: acts, steps the env, publishes each vector step slot by slot, and adopts
    the newest weights before every step."""

    env: CollectorEnv
    actor: Actor
    policy: PolicyModule
    state: torch.Tensor  # the actor state vector buffer the ring copies into
    ingress: ReplayIngress
    ring: InferenceRing
    control: ControlSegment
    conn: Connection
    to_collector: WakeSignal
    parent_gone: Callable[[], bool]

    def run(self, total_iterations: int, prefill_iterations: int) -> None:
        """Step ``total_iterations`` times (random actions for the first ``prefill_iterations``), then
        wait for the final weights and report ``done``; return early on a stop, a close or a dead
        trainer."""
        obs = self._reset()
        self._adopt()
        for it in range(total_iterations):
            if self._stopping():
                return
            obs_next = self._step(obs, random_actions=it < prefill_iterations, iterations_done=it + 1)
            if obs_next is None:
                return  # stop/close: the pending batch is dropped and counted
            obs = obs_next
        if self._await_finish():
            self._adopt()
            self.conn.send({"kind": "done", "iterations": total_iterations})

    def _stopping(self) -> bool:
        return self.ingress.halted() or self.parent_gone()

    def _reset(self) -> torch.Tensor:
        try:
            return self.env.reset()
        except Exception as exc:
            raise _BackendWorkerError(str(exc)) from exc

    def _adopt(self) -> None:
        version = self.ring.consume_latest(self.state)
        if version is not None:
            self.policy.load_actor_state_vector(self.actor, self.state)
            self.control.record_actor_version(version)

    def _step(self, obs: torch.Tensor, *, random_actions: bool, iterations_done: int) -> torch.Tensor | None:
        """One vector step; the next policy input, or None when publication ended early."""
        t0 = time.perf_counter()
        self._adopt()
        actions = self._actions(obs, random_actions)
        t1 = time.perf_counter()
        try:
            out = self.env.step(actions)
        except Exception as exc:
            raise _BackendWorkerError(str(exc)) from exc
        t2 = time.perf_counter()
        if not self._publish(obs, actions, out):
            return None
        self._record_episodes(out)
        self.control.record_step(iterations_done, StepTiming(t1 - t0, t2 - t1, time.perf_counter() - t2))
        return out.obs

    def _actions(self, obs: torch.Tensor, random_actions: bool) -> torch.Tensor:
        import torch

        with torch.inference_mode():
            if random_actions:
                shape = (self.env.num_envs, self.env.action_dim)
                return torch.rand(shape, device=obs.device) * 2.0 - 1.0
            return self.actor.act(obs, deterministic=False)

    def _publish(self, obs: torch.Tensor, actions: torch.Tensor, out: EnvStep) -> bool:
        rows = self.ingress.layout.slot_rows
        for start in range(0, self.env.num_envs, rows):
            sl = slice(start, start + rows)
            batch = IngressBatch(obs[sl], actions[sl], out.reward[sl], out.next_obs[sl], out.terminated[sl])
            if not self.ingress.put(batch, abort=self.parent_gone):
                return False
        return True

    def _record_episodes(self, out: EnvStep) -> None:
        finished = int(out.episode_returns.numel())
        if finished:
            lengths = float(out.episode_lengths.float().sum())
            self.control.record_episodes(finished, float(out.episode_returns.sum()), lengths)

    def _await_finish(self) -> bool:
        """All steps are published: wait for the trainer's finish flag (False: stopped meanwhile)."""
        while not self.control.finish_requested():
            if self._stopping():
                return False
            self.to_collector.wait(0.25)
        return True
