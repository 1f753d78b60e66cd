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
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from runtime.backends.contract import BackendDiagnostics, diagnostics_payload, unavailable_diagnostics
from runtime.manager.signals import WakeSignal

CONTROL_INT_FIELDS: tuple[str, ...] = ("finish", "iterations", "episodes", "actor_version")
CONTROL_FLOAT_FIELDS: tuple[str, ...] = (
    "episode_return_sum",
    "episode_length_sum",
    "env_step_s",
    "inference_s",
    "publish_s",
)
EXIT_REPORTED_ERROR = 3


@dataclass(frozen=True)
class CollectorArgs:
    """Picklable start arguments (signals carry their fds into the spawned child)."""

    config: dict[str, Any]
    device: str
    env_factory: str  # "module:function" building the TaskEnv: f(cfg, *, device, seed)
    policy_module: str  # module with build_actor, actor_state_vector, load_actor_state_vector
    to_learner: WakeSignal
    to_collector: WakeSignal
    parent_pid: int
    torch_threads: int | None = None


class _BackendWorkerError(Exception):
    """Wraps an exception raised inside env construction, reset or stepping."""


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


def backend_diagnostics_payload(env: Any, backend_type: str | None) -> BackendDiagnostics:
    """The manifest payload of ``env.backend`` (``runtime.backends.contract.diagnostics_payload``); an env
    without a readable backend gets the explicit unavailable payload. Never null, never raises."""
    try:
        return diagnostics_payload(env.backend)
    except Exception as exc:
        return unavailable_diagnostics(backend_type, f"diagnostic probe raised {type(exc).__name__}: {exc}")


def collector_main(args: CollectorArgs, conn: Connection) -> None:
    """Spawn target. Exits 0 on a finished or stopped run, 3 after reporting an error."""
    # Ctrl-C and a group-wide SIGTERM (e.g. from the soak monitor) are the trainer's to handle: it stops
    # the collector through the stop protocol and classifies external_cancellation. A collector that
    # died of the same signal first would be misread as collector_failure. The parent-death signal
    # below still ends the collector if the trainer itself is killed.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _set_parent_death_signal()
    try:
        _run(args, conn)
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
    from omegaconf import OmegaConf

    from runtime.manager.ingress import ReplayIngress
    from runtime.manager.ring import InferenceRing
    from runtime.manager.shm import SharedCounters

    if args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    cfg = OmegaConf.create(args.config)
    OmegaConf.set_readonly(cfg, True)
    device = torch.device(args.device)
    parent_gone = lambda: os.getppid() != args.parent_pid  # noqa: E731 - tiny predicate

    try:
        env = resolve(args.env_factory)(cfg, device=device, seed=int(cfg.seed))
    except Exception as exc:
        raise _BackendWorkerError(str(exc)) from exc
    policy = resolve(args.policy_module)
    ingress = ring = control = None
    try:
        actor = policy.build_actor(cfg.algo, env.obs_dim, env.action_dim).to(device)
        actor.eval()
        state = policy.actor_state_vector(actor).to(device)
        backend = getattr(env, "backend", None)
        conn.send(
            {
                "kind": "hello",
                "obs_dim": int(env.obs_dim),
                "action_dim": int(env.action_dim),
                "backend_type": getattr(backend, "backend_type", cfg.training.sim_backend),
                "data_plane": getattr(backend, "data_plane", None),
                "device": str(device),
                "semantic_name": getattr(env, "semantic_name", None),
                "actor_state_size": int(state.numel()),
                "backend_diagnostics": backend_diagnostics_payload(env, cfg.training.sim_backend),
                "pid": os.getpid(),
            }
        )
        msg = _await_attach(conn, parent_gone)
        if msg is None:
            return
        ingress = ReplayIngress.attach(msg["ingress"], args.to_learner, args.to_collector)
        ring = InferenceRing.attach(msg["ring"], args.to_collector)
        control = SharedCounters.attach(msg["control"])
        _loop(env, actor, policy, state, ingress, ring, control, msg, args, conn, parent_gone)
    finally:
        for part in (ingress, ring, control):
            if part is not None:
                part.close()
        try:
            env.close()
        except Exception as exc:
            raise _BackendWorkerError(f"env.close failed: {exc}") from exc


def _await_attach(conn: Connection, parent_gone: Any) -> dict[str, Any] | None:
    while not conn.poll(0.25):
        if parent_gone():
            return None
    msg = conn.recv()
    if msg.get("kind") != "attach":
        return None  # the trainer aborted the start-up
    return msg


def _loop(
    env: Any,
    actor: Any,
    policy: Any,
    state: Any,
    ingress: Any,
    ring: Any,
    control: Any,
    msg: dict[str, Any],
    args: CollectorArgs,
    conn: Connection,
    parent_gone: Any,
) -> None:
    import torch

    total, prefill = int(msg["total_iterations"]), int(msg["prefill_iterations"])
    rows = ingress.layout.slot_rows
    halted = lambda: bool(ingress.counters.get("stop_requested") or ingress.counters.get("closed"))  # noqa: E731

    def adopt() -> None:
        version = ring.consume_latest(state)
        if version is not None:
            policy.load_actor_state_vector(actor, state)
            control.set("actor_version", version)

    try:
        obs = env.reset()
    except Exception as exc:
        raise _BackendWorkerError(str(exc)) from exc
    adopt()
    done = 0
    for it in range(total):
        if halted() or parent_gone():
            return
        t0 = time.perf_counter()
        adopt()
        with torch.inference_mode():
            if it < prefill:
                actions = torch.rand((env.num_envs, env.action_dim), device=obs.device) * 2.0 - 1.0
            else:
                actions = actor.act(obs, deterministic=False)
        t1 = time.perf_counter()
        try:
            out = env.step(actions)
        except Exception as exc:
            raise _BackendWorkerError(str(exc)) from exc
        t2 = time.perf_counter()
        for start in range(0, env.num_envs, rows):
            sl = slice(start, start + rows)
            ok = ingress.put(
                obs[sl], actions[sl], out.reward[sl], out.next_obs[sl], out.terminated[sl], abort=parent_gone
            )
            if not ok:
                return  # stop/close: the pending batch is dropped and counted
        t3 = time.perf_counter()
        obs = out.obs
        n_done = int(out.episode_returns.numel())
        if n_done:
            control.add("episodes", n_done)
            control.addf("episode_return_sum", float(out.episode_returns.sum()))
            control.addf("episode_length_sum", float(out.episode_lengths.float().sum()))
        control.addf("inference_s", t1 - t0)
        control.addf("env_step_s", t2 - t1)
        control.addf("publish_s", t3 - t2)
        done = it + 1
        control.set("iterations", done)
    # All steps published: wait for the final weights, adopt them, say goodbye.
    while not control.get("finish"):
        if halted() or parent_gone():
            return
        args.to_collector.wait(0.25)
    adopt()
    conn.send({"kind": "done", "iterations": done})
