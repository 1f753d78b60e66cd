"""run_training end to end in-process with the fake env and the null learner: artifacts, counters,
classification of backend-worker, learner and start-up failures, and nothing left behind."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import psutil
import pytest

from soakbench.runtime.artifacts import RUN_CONFIG_SCHEMA, read_run_summary, validate
from soakbench.runtime.config import PlatformFacts, RunConfig, compose, validate_for_run
from soakbench.runtime.manager.null_learner import null_learner_factory
from soakbench.runtime.manager.shm import list_segments
from soakbench.runtime.manager.trainer import TrainerHooks, run_training

# whole training runs (trainer, collector process, shared memory): not the inner-loop lane
pytestmark = pytest.mark.slow


def _cfg(log_dir: Path, *extra: str) -> RunConfig:
    composed = compose(
        "sac",
        "g1_walk_flat",
        "mujoco",
        [
            f"log_dir={log_dir}",
            "algo.num_envs=8",
            "algo.max_iterations=12",
            "algo.prefill_iterations=2",
            "algo.save_interval=5",
            "training.no_play=true",
            *extra,
        ],
    )
    return validate_for_run(composed, PlatformFacts.detect())


def _hooks(env: str = "make_env") -> TrainerHooks:
    return TrainerHooks(
        env_factory=f"tests.runtime.manager.manager_fakes:{env}",
        learner_factory=null_learner_factory,
        shutdown_deadline_s=5.0,
    )


@pytest.fixture
def clean_host() -> Any:
    """After the run: no child process but multiprocessing's resource tracker, no segment of ours."""
    import os

    yield
    children = psutil.Process().children(recursive=True)
    assert [p.pid for p in children if "resource_tracker" not in " ".join(p.cmdline())] == []
    assert list_segments(f"soakbench_{os.getpid()}_") == []


@pytest.mark.parametrize("slot_rows", ["null", "2"])
def test_normal_completion_artifacts_and_counters(tmp_path: Path, clean_host: None, slot_rows: str) -> None:
    log_dir = tmp_path / "run"
    rc = run_training(_cfg(log_dir, f"training.replay_ingress_slot_rows={slot_rows}"), _hooks())
    assert rc == 0
    summary = read_run_summary(log_dir / "run_summary.json")  # schema-validated
    m = summary["runtime_manifest"]
    rows = 8 if slot_rows == "null" else 2
    assert summary["status"] == "completed"
    assert summary["failure_reason"] is None and summary["failure_classification"] is None
    assert summary["iterations"] == 12 and summary["total_env_steps"] == 96
    ri = m["replay_ingress"]
    assert ri["published_sequence"] == ri["release_sequence"] == 96 // rows
    assert ri["final_occupancy"] == 0 and ri["early_returns"] == ri["dropped_batches"] == 0
    assert ri["high_water_occupancy"] <= ri["depth"]
    inf = m["inference_flight"]
    assert inf["final_queue_depth"] == inf["final_publication_lag"] == 0
    assert inf["published_version"] == inf["consumed_version"] == 2  # initial + final weights
    sd = m["shutdown"]
    assert sd["classification"] == "normal_completion" and sd["exception"] is None
    assert sd["cleanup"]["errors"] == [] and sd["cleanup"]["collector_stop"] == "joined"
    assert m["collector"]["exitcode"] == 0
    assert m["backend_diagnostics"] == {
        "available": True,
        "backend_type": "fake",
        "diagnostics": {
            "batched_step": {"requested": True, "enabled": False, "disable_reason": "fake backend"}
        },
    }
    assert m["learner_diagnostics"] == {
        "available": True,
        "learner": "NullLearner",
        "diagnostics": {
            name: {
                "requested": False,
                "enabled": False,
                "disable_reason": "null learner: it takes no gradient steps",
            }
            for name in ("torch_compile", "cuda_graphs")
        },
    }
    validate(json.loads((log_dir / "run_config.json").read_text()), RUN_CONFIG_SCHEMA)
    lines = [json.loads(x) for x in (log_dir / "progress.jsonl").read_text().splitlines()]
    iterations = [r["iteration"] for r in lines]
    assert set(range(1, 13)) <= set(iterations) and iterations == sorted(iterations)  # interval 1
    assert lines[-1]["final"] and lines[-1]["replay"]["occupancy"] == 0
    assert {
        "schema",
        "time",
        "elapsed_s",
        "total_env_steps",
        "env_steps_per_s",
        "learner_updates",
        "phase",
    } <= set(lines[0])
    assert sorted(p.name for p in (log_dir / "checkpoints").iterdir()) == [
        "ckpt_00000005.pt",
        "ckpt_00000010.pt",
        "final.pt",
    ]
    assert list(log_dir.glob("events.out.tfevents.*"))
    # a single process is no job of ranks: no rank folders, no job section, the layout of before torchrun
    # (plus the input records of the processes that ran, foundation/inputs.py)
    assert "distributed" not in summary and "distributed" not in m
    assert sorted(p.name for p in log_dir.iterdir() if p.is_dir()) == ["checkpoints", "inputs"]


def test_backend_worker_exception_is_classified(tmp_path: Path, clean_host: None) -> None:
    log_dir = tmp_path / "run"
    rc = run_training(_cfg(log_dir), _hooks("make_failing_env"))
    assert rc == 1
    summary = read_run_summary(log_dir / "run_summary.json")
    sd = summary["runtime_manifest"]["shutdown"]
    assert summary["status"] == "failed"
    assert summary["failure_classification"] == sd["classification"] == "backend_worker_failure"
    assert sd["owner"] == "backend_worker"
    assert sd["exception"]["type"] == "FloatingPointError"
    assert "diverged" in summary["failure_reason"]
    assert sd["cleanup"]["errors"] == []


def test_env_construction_failure_is_backend_worker_failure(tmp_path: Path, clean_host: None) -> None:
    log_dir = tmp_path / "run"
    assert run_training(_cfg(log_dir), _hooks("make_broken_env")) == 1
    summary = read_run_summary(log_dir / "run_summary.json")
    m = summary["runtime_manifest"]
    assert m["shutdown"]["classification"] == "backend_worker_failure"
    assert m["shutdown"]["phase"] == "startup"
    assert m["backend_diagnostics"]["available"] is False
    assert m["learner_diagnostics"]["available"] is False and m["learner_diagnostics"]["unavailable_reason"]


def test_injected_learner_exception(tmp_path: Path, clean_host: None) -> None:
    log_dir = tmp_path / "run"
    cfg = _cfg(log_dir, "training.test_fault=learner_exception", "training.test_fault_iteration=4")
    assert run_training(cfg, _hooks()) == 1
    summary = read_run_summary(log_dir / "run_summary.json")
    sd = summary["runtime_manifest"]["shutdown"]
    assert sd["classification"] == "learner_failure" and sd["owner"] == "learner"
    assert sd["exception"]["type"] == "InjectedLearnerFault"
    assert summary["iterations"] == 4
    ri = summary["runtime_manifest"]["replay_ingress"]
    assert ri["early_returns"] == ri["dropped_batches"] == ri["closed_returns"] + ri["stop_returns"]
    assert sd["cleanup"]["errors"] == []


def test_cpu_run_records_the_forced_off_learner_optimizations(tmp_path: Path, clean_host: None) -> None:
    """The real SAC learner on CPU with torch.compile and CUDA graphs requested: both are forced off,
    and run_summary.json says so with the reason instead of silently training without them."""
    log_dir = tmp_path / "run"
    cfg = _cfg(
        log_dir,
        "algo.max_iterations=3",
        "algo.actor_hidden=[8]",
        "algo.critic_hidden=[8]",
        "training.learner_device=cpu",
        "training.torch_compile=true",
        "training.cuda_graphs=true",
    )
    hooks = _hooks()
    hooks.learner_factory = None  # the configured learner, as `train` builds it
    assert run_training(cfg, hooks) == 0
    summary = json.loads((log_dir / "run_summary.json").read_text())
    learner = summary["runtime_manifest"]["learner_diagnostics"]
    assert learner["available"] is True and learner["learner"] == "SACLearner"
    for name in ("torch_compile", "cuda_graphs"):
        entry = learner["diagnostics"][name]
        assert entry["requested"] is True and entry["enabled"] is False
        assert isinstance(entry["disable_reason"], str) and entry["disable_reason"].strip()
    assert "cpu" in learner["diagnostics"]["torch_compile"]["disable_reason"]
    read_run_summary(log_dir / "run_summary.json")  # and the summary is schema-valid


def test_non_empty_log_dir_is_rejected_without_writing(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)  # validated while empty: the trainer checks log_dir again when it starts
    (tmp_path / "keep.txt").write_text("x")
    assert run_training(cfg, _hooks()) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_heartbeat_continues_during_a_long_update(tmp_path: Path, clean_host: None) -> None:
    from tests.runtime.manager.manager_fakes import SlowLearner

    log_dir = tmp_path / "run"
    cfg = _cfg(
        log_dir,
        "algo.max_iterations=4",
        "algo.prefill_iterations=2",
        "training.heartbeat_seconds=0.3",
        "training.collector_metrics_interval=1000",
    )
    hooks = _hooks()
    hooks.learner_factory = functools.partial(SlowLearner, update_s=1.5)
    assert run_training(cfg, hooks) == 0
    lines = [json.loads(x) for x in (log_dir / "progress.jsonl").read_text().splitlines()]
    # Two 1.5 s updates with a 0.3 s heartbeat: ~10 time-driven records. The main thread alone could
    # write at most 3 here (one due check per iteration plus the last iteration).
    during_updates = [r for r in lines if r["iteration"] in (2, 3, 4) and not r.get("final")]
    assert len(during_updates) >= 5


def test_stalled_collector_is_stale_tick(
    tmp_path: Path, clean_host: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ENV_SLEEP_S", "4")  # inherited by the spawned collector
    log_dir = tmp_path / "run"
    hooks = _hooks()
    hooks.stale_tick_timeout_s = 1.0
    assert run_training(_cfg(log_dir), hooks) == 1
    summary = read_run_summary(log_dir / "run_summary.json")
    sd = summary["runtime_manifest"]["shutdown"]
    assert summary["failure_classification"] == sd["classification"] == "timeout/stale_tick"
    assert sd["cleanup"]["errors"] == []


def test_sigint_is_external_cancellation(
    tmp_path: Path, clean_host: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal
    import threading

    monkeypatch.setenv("FAKE_ENV_SLEEP_S", "0.02")
    log_dir = tmp_path / "run"
    # What the trainer must restore: Python's handler, or SIG_IGN where this process was started in the
    # background by a shell without job control (POSIX has such jobs ignore SIGINT).
    before = signal.getsignal(signal.SIGINT)

    def interrupt_when_training() -> None:
        progress = log_dir / "progress.jsonl"
        for _ in range(600):
            if progress.exists() and '"iteration": 3' in progress.read_text():
                break
            threading.Event().wait(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_when_training, daemon=True).start()
    rc = run_training(_cfg(log_dir, "algo.max_iterations=100000"), _hooks())
    assert rc == 128 + signal.SIGINT
    summary = read_run_summary(log_dir / "run_summary.json")
    sd = summary["runtime_manifest"]["shutdown"]
    assert summary["status"] == "cancelled" and sd["classification"] == "external_cancellation"
    assert sd["exception"] == {"type": "SIGINT", "message": "received SIGINT"}
    assert summary["runtime_manifest"]["collector"]["exitcode"] == 0  # stopped through the ingress
    assert sd["cleanup"]["errors"] == []
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored


def _kill_collector_then_build(*args: Any) -> Any:
    """A learner factory that SIGKILLs the collector first: the trainer's next message to it (the attach
    handshake) meets a broken pipe."""
    import os
    import signal
    import time

    (collector,) = [p for p in psutil.Process().children() if "resource_tracker" not in " ".join(p.cmdline())]
    os.kill(collector.pid, signal.SIGKILL)
    while collector.status() != psutil.STATUS_ZOMBIE:  # dead but not reaped: the trainer reaps its child
        time.sleep(0.01)
    return null_learner_factory(*args)


def test_broken_pipe_to_a_dead_collector_is_collector_failure(tmp_path: Path, clean_host: None) -> None:
    log_dir = tmp_path / "run"
    hooks = _hooks()
    hooks.learner_factory = _kill_collector_then_build
    assert run_training(_cfg(log_dir), hooks) == 1
    summary = read_run_summary(log_dir / "run_summary.json")
    sd = summary["runtime_manifest"]["shutdown"]
    assert summary["failure_classification"] == sd["classification"] == "collector_failure"
    assert "SIGKILL" in summary["failure_reason"]
    assert list(log_dir.glob("events.out.tfevents.*")), "every run leaves a versioned event file"
