"""The probe's run: one worker process per backend and process index, interleaved across backends, with
the acceptance checks around each; what the workers measured, assembled into the artifact.

``run_probe`` measures and returns (artifact, exit code); writing the artifact is the CLI's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from soakbench.foundation.gpu_health import health_at_start as read_health
from soakbench.foundation.nvml import NvmlReader
from soakbench.harness.context import REPO_ROOT
from soakbench.harness.inputs import collection_inputs, run_manifest
from soakbench.harness.probe.artifact import SCHEMA_REL, AcceptanceOutcome, build_artifact
from soakbench.harness.probe.host import contention_block, sample_host, wait_for_idle
from soakbench.harness.probe.samples import backend_entry
from soakbench.harness.probe.settings import (
    ALGO,
    ProbeFailure,
    ProbeInputError,
    ProbeSettings,
    config_overrides,
)
from soakbench.harness.probe.spec import WorkerSpec

console = Console(stderr=True)


def run_worker_process(settings: ProbeSettings, backend: str, workdir: Path) -> dict[str, Any]:
    """Run one backend in a fresh ``python -m harness.probe.worker`` process; return its result block
    with the PID observed here (``launcher_observed_pid``). Raises ProbeFailure/ProbeInputError."""
    spec = WorkerSpec(
        backend=backend,
        algo=ALGO,
        task=settings.task,
        overrides=tuple(config_overrides(settings, backend)),
        warmup=settings.warmup,
        iters=settings.iters,
        seed=settings.seed,
        torch_threads=settings.torch_threads,
        rounds=settings.rounds,
        step_sleep_ms=settings.test_step_sleep_ms,
    )
    spec_path, out_path, log_path = (
        workdir / f"{backend}.{kind}" for kind in ("spec.json", "out.json", "log")
    )
    spec_path.write_text(json.dumps(spec.to_json()))
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "soakbench.harness.probe.worker", str(spec_path), str(out_path)],
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            returncode = proc.wait(timeout=settings.worker_timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise ProbeFailure(
                f"{backend} worker (pid {proc.pid}) exceeded --worker-timeout-s {settings.worker_timeout_s}"
            ) from None
    tail = log_path.read_text(errors="replace")[-4000:]
    if not out_path.exists():
        raise ProbeFailure(f"{backend} worker (pid {proc.pid}) exited {returncode} without a result:\n{tail}")
    payload = json.loads(out_path.read_text())
    if not payload["ok"]:
        error = payload["error"]
        message = f"{backend} worker (pid {proc.pid}) failed: {error['type']}: {error['message']}"
        if error.get("config_error"):
            raise ProbeInputError(message)
        raise ProbeFailure(f"{message}\n{error['traceback']}\n--- worker output tail ---\n{tail}")
    if returncode != 0:
        raise ProbeFailure(f"{backend} worker (pid {proc.pid}) exited {returncode} after a result:\n{tail}")
    result: dict[str, Any] = payload["result"]
    result["launcher_observed_pid"] = proc.pid
    return result


def run_probe(
    settings: ProbeSettings, argv: list[str], nvml: Any | None = None
) -> tuple[dict[str, Any], int]:
    """Measure every backend in ``settings.processes`` processes each, interleaved across backends
    (acceptance checks around each process); return (artifact, exit code)."""
    started, host_start = time.time(), sample_host()
    # the cards' state before the measurement, not after minutes of load
    health = read_health(nvml, os.environ.get("CUDA_VISIBLE_DEVICES"))
    results: dict[str, list[dict[str, Any]]] = {backend: [] for backend in settings.backends}
    checks: list[dict[str, Any]] = []
    with NvmlReader(nvml) as reader, tempfile.TemporaryDirectory(prefix="soakbench-probe-") as tmp:
        accepted = _measure_all(settings, reader, Path(tmp), results, checks)
        gpu = reader.snapshot()
        manifest, problem = run_manifest(Path(tmp), collection_inputs("probe", schemas=(SCHEMA_REL,)))
    contention = contention_block(host_start, sample_host(), os.cpu_count(), gpu)
    entries = {backend: backend_entry(blocks) for backend, blocks in results.items() if blocks}
    verdict = AcceptanceOutcome(checks=checks, accepted=accepted)
    artifact = build_artifact(settings, argv, entries, verdict, (started, time.time()), health)
    artifact["contention"] = contention
    if manifest is None:  # then judged by the whole-tree freshness rule
        console.print(f"probe: no input manifest: {problem}")
    artifact.update({"inputs": manifest} if manifest is not None else {})
    return artifact, 0 if accepted else 1


def _measure_all(
    settings: ProbeSettings,
    reader: NvmlReader,
    tmp: Path,
    results: dict[str, list[dict[str, Any]]],
    checks: list[dict[str, Any]],
) -> bool:
    """Run every (process, backend) pair in interleaved order into ``results``; False once an
    acceptance check fails (nothing more runs)."""
    for index in range(settings.processes):
        for backend in settings.backends:
            if settings.acceptance and not _idle_check(settings, reader, checks, backend, "before"):
                return False
            console.print(
                f"probe: measuring {backend} ({settings.num_envs} envs), process "
                f"{index + 1}/{settings.processes} ..."
            )
            workdir = tmp / f"process-{index}"
            workdir.mkdir(exist_ok=True)
            results[backend].append(run_worker_process(settings, backend, workdir))
            if settings.acceptance and not _idle_check(settings, reader, checks, backend, "after"):
                return False
    return True


def _idle_check(
    settings: ProbeSettings, reader: NvmlReader, checks: list[dict[str, Any]], backend: str, when: str
) -> bool:
    check = wait_for_idle(reader, settings.idle_memory_threshold_bytes, settings.idle_wait_s)
    checks.append({"backend": backend, "when": when, **check})
    if not check["idle"]:
        console.print(f"[red]acceptance: GPU not idle {when} {backend}: {check['reasons']}")
    return bool(check["idle"])
