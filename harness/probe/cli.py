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

import os
import sys

import typer
from rich.console import Console

from soakbench.foundation.nvml import NvmlReader
from soakbench.harness.probe.artifact import write_artifact
from soakbench.harness.probe.bmf import BmfPathError, bmf_output, write_probe_bmf
from soakbench.harness.probe.history_io import history
from soakbench.harness.probe.run import run_probe
from soakbench.harness.probe.settings import (
    COLLECTOR_TORCH_THREADS,
    DEFAULT_PROCESSES,
    DEFAULT_ROUNDS,
    ProbeFailure,
    ProbeInputError,
    check_preconditions,
    validate_settings,
)
from soakbench.harness.probe.tables import print_summary
from soakbench.harness.probe.two_probes import compare

console = Console(stderr=True)


app = typer.Typer(
    add_completion=False,
    help="Phase-local backend probe (one process per backend); `probe compare` and `probe history` "
    "judge and chart what it wrote.",
)


@app.callback(invoke_without_command=True)
def probe(  # noqa: PLR0913 — a typer command declares one parameter per CLI option
    ctx: typer.Context,
    output: str | None = typer.Option(
        None, "--output", help="absolute path of the JSON artifact to write (required to measure)"
    ),
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
    if ctx.invoked_subcommand is not None:
        _refuse_probe_options(ctx)
        return
    if output is None:
        console.print("[red]probe: --output is required to measure (an absolute path of a .json file)")
        raise typer.Exit(2)
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
        from soakbench.runtime.config import PlatformFacts

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


def _refuse_probe_options(ctx: typer.Context) -> None:
    """Options of the measurement given before a subcommand: refused (exit 2), not silently dropped."""
    sources = {name: ctx.get_parameter_source(name) for name in ctx.params}
    given = [name for name, source in sources.items() if source is not None and source.name != "DEFAULT"]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        console.print(
            f"[red]probe {ctx.invoked_subcommand}: {flags} belong(s) to the measurement, not to this subcommand"
        )
        raise typer.Exit(2)


app.command("compare")(compare)
app.command("history")(history)


def main() -> None:
    """Console-script entry point: `probe [OPTIONS]` measures; `probe compare` and `probe history`."""
    app(prog_name="probe")


if __name__ == "__main__":
    main()
