"""``probe``: phase-local backend probe. Each backend is measured in its own process; one JSON artifact.

    probe --backends mjwarp,mujoco --num-envs 2048 --warmup 20 --iters 100 [--processes 3] [--acceptance]
          [--mjwarp-device cpu] [--task g1_motion_tracking] --output /abs/probe.json [--bmf /abs/bmf.json]
    probe compare BASE.json NEW.json [--threshold 0.05] [--fail-on-regression] [--json] [--json-file OUT]
                  [--bmf OUT]

Exit codes: 0 measured (and, with ``--acceptance``, accepted); 1 a worker failed, the artifact or the
``--bmf`` document could not be written (schema violation, I/O error), or acceptance evidence failed (an
acceptance artifact is still written, with ``acceptance.passed=false``, and no BMF); 2 bad input or an
unmet precondition (a bad ``--output`` or ``--bmf`` path included), nothing written. See docs/probe.md for phases, schema fields and acceptance rules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from foundation.gpu_health import health_at_start as read_health
from foundation.nvml import NvmlReader
from harness.context import REPO_ROOT, collect_context
from harness.inputs import collection_inputs, run_manifest
from harness.probe.artifact import EXCLUSIONS, SCHEMA_REL, SCHEMA_VERSION, AcceptanceOutcome, write_artifact
from harness.probe.bmf import BmfPathError, bmf_output, write_probe_bmf
from harness.probe.host import contention_block, sample_host, wait_for_idle
from harness.probe.samples import backend_entry
from harness.probe.settings import (
    ALGO,
    COLLECTOR_TORCH_THREADS,
    DEFAULT_PROCESSES,
    DEFAULT_ROUNDS,
    ProbeFailure,
    ProbeInputError,
    ProbeSettings,
    check_preconditions,
    config_overrides,
    validate_settings,
)
from harness.probe.spec import WorkerSpec
from harness.probe.stats import (
    PROFILER_ENV_EXACT,
    PROFILER_ENV_PREFIXES,
)
from harness.probe.tables import print_summary

if TYPE_CHECKING:
    pass

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
            [sys.executable, "-m", "harness.probe.worker", str(spec_path), str(out_path)],
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


def build_artifact(
    settings: ProbeSettings,
    argv: list[str],
    results: dict[str, dict[str, Any]],
    acceptance: AcceptanceOutcome,
    span: tuple[float, float],
    health_at_start: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble the probe artifact (schema ``probe-0.4.0``, ``contention`` added by the caller);
    ``span`` is (started, finished) in Unix s; ``health_at_start`` the GPUs' state read before measuring
    (None: read now)."""
    started, finished = span
    checks, accepted = acceptance.checks, acceptance.accepted
    settings_block = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(settings).items()}
    settings_block["backends"] = list(settings.backends)
    settings_block["algo"] = ALGO
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "soakbench.probe",
        "created_unix_s": finished,
        "duration_s": finished - started,
        "command": argv,
        "probe_pid": os.getpid(),
        "settings": settings_block,
        "exclusions": [dict(e) for e in EXCLUSIONS],
        "comparison_note": (
            "compare backends by throughput_env_control_steps_per_s and phases.iteration_ms; phase "
            "boundaries are device-synchronized but families differ in what each phase contains"
        ),
        "context": collect_context(health_at_start=health_at_start),
        "backends": results,
        "acceptance": {
            "requested": settings.acceptance,
            "passed": accepted if settings.acceptance else None,
            "idle_memory_threshold_bytes": settings.idle_memory_threshold_bytes,
            "profiler_env_rejected": {
                "exact": list(PROFILER_ENV_EXACT),
                "prefixes": list(PROFILER_ENV_PREFIXES),
            },
            "checks": checks,
        },
    }


app = typer.Typer(add_completion=False, help="Phase-local backend probe (one process per backend).")


@app.command()
def probe(  # noqa: PLR0913 — a typer command declares one parameter per CLI option
    output: str = typer.Option(..., "--output", help="absolute path of the JSON artifact to write"),
    backends: str = typer.Option("mjwarp,mujoco", "--backends", help="comma-separated backends"),
    num_envs: int = typer.Option(2048, "--num-envs"),
    warmup: int = typer.Option(20, "--warmup", help="untimed iterations before measuring"),
    iters: int = typer.Option(100, "--iters", help="measured iterations per loop (phased and throughput)"),
    task: str = typer.Option("g1_motion_tracking", "--task"),
    seed: int = typer.Option(0, "--seed"),
    mjwarp_device: str | None = typer.Option(
        None, "--mjwarp-device", help="cuda (default) or cpu: Warp's CPU device, a diagnostic lane"
    ),
    physics_threads: int | None = typer.Option(None, "--physics-threads", help="MuJoCo CPU threads"),
    rounds: int = typer.Option(
        DEFAULT_ROUNDS, "--rounds", help="interleaved limit/env rounds of the throughput loop (<= iters)"
    ),
    processes: int = typer.Option(
        DEFAULT_PROCESSES, "--processes", help="independent worker processes per backend, interleaved"
    ),
    test_step_sleep_ms: float = typer.Option(
        0.0, "--test-step-sleep-ms", hidden=True, help="test only: sleep inside every timed env step"
    ),
    torch_threads: int = typer.Option(
        COLLECTOR_TORCH_THREADS,
        "--torch-threads",
        help="torch intra-op threads in each worker (as the collector)",
    ),
    acceptance: bool = typer.Option(False, "--acceptance", help="require NVML idle-GPU evidence"),
    idle_memory_threshold_mib: int = typer.Option(1024, "--idle-memory-threshold-mib"),
    idle_wait_s: float = typer.Option(15.0, "--idle-wait-s"),
    worker_timeout_s: float = typer.Option(1800.0, "--worker-timeout-s"),
    bmf: str | None = typer.Option(None, "--bmf", help="Bencher Metric Format JSON to write"),
) -> None:
    """Measure each backend in isolation and write a schema-valid artifact."""
    try:
        bmf_path = bmf_output(bmf)
        settings = validate_settings(
            backends=backends,
            task=task,
            num_envs=num_envs,
            warmup=warmup,
            iters=iters,
            seed=seed,
            mjwarp_device=mjwarp_device,
            physics_threads=physics_threads,
            acceptance=acceptance,
            idle_memory_threshold_mib=idle_memory_threshold_mib,
            idle_wait_s=idle_wait_s,
            worker_timeout_s=worker_timeout_s,
            output=output,
            torch_threads=torch_threads,
            rounds=rounds,
            processes=processes,
            test_step_sleep_ms=test_step_sleep_ms,
        )
        from runtime.config import PlatformFacts

        with NvmlReader() as reader:
            check_preconditions(settings, os.environ, reader.snapshot, PlatformFacts.detect)
        artifact, code = run_probe(settings, ["probe", *sys.argv[1:]])
    except (ProbeInputError, BmfPathError) as exc:
        console.print(f"[red]probe: {exc}")
        raise typer.Exit(2) from None
    except ProbeFailure as exc:
        console.print(f"[red]probe: {exc}")
        raise typer.Exit(1) from None
    try:
        write_artifact(settings.output, artifact)
    except (ValueError, OSError) as exc:  # a schema violation is our bug; say so, write nothing
        console.print(f"[red]probe: artifact not written: {exc}")
        raise typer.Exit(1) from None
    print_summary(artifact, console)
    console.print(f"probe: wrote {settings.output}")
    if code:
        console.print("[red]probe: acceptance FAILED (see acceptance.checks in the artifact)")
    elif bmf_path is not None:
        problem = write_probe_bmf(bmf_path, artifact)
        console.print(f"[red]probe: {problem}" if problem else f"probe: wrote {bmf_path}")
        code = 1 if problem else 0
    raise typer.Exit(code)


def main() -> None:
    """Console-script entry point: ``probe compare|history ...`` run those commands, anything else probes."""
    if sys.argv[1:2] in (["compare"], ["history"]):
        from harness.probe.compare import compare_app
        from harness.probe.history_io import history_app

        (compare_app if sys.argv[1] == "compare" else history_app)(sys.argv[2:], f"probe {sys.argv[1]}")
        return
    app()


if __name__ == "__main__":
    main()
