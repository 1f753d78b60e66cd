"""Test builders for the matrix: temporary git repos, schema-valid soak/probe artifacts, JUnit XML.

Artifacts are built to the real shipped schemas (the matrix validates with ``foundation.schema``), so
a schema change upstream shows up here as a failing test.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from soakbench.matrix.declared.runtime_facts import Registry
from soakbench.matrix.model import CellKey
from soakbench.matrix.publishing.render import BEGIN_MARKER, END_MARKER

REPO = Path(__file__).resolve().parents[2]
REGISTRY = Registry(
    algos=frozenset({"sac", "flashsac"}),
    tasks=frozenset({"g1_walk_flat", "g1_motion_tracking"}),
    backends=frozenset({"mujoco", "mjwarp"}),
)
LINUX = "Linux-6.8.0-x86_64-with-glibc2.39"


def configured_ok(key: CellKey) -> str | None:
    """Test double for the runtime's Configured check: mjwarp needs linux-cuda, all else composes."""
    if key.backend == "mjwarp" and key.platform != "linux-cuda":
        return f"not valid on {key.platform}: --sim mjwarp requires Linux with a CUDA device"
    return None


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


INVENTORY = """\
schema_version: 1
canonical_soak: {min_duration_s: 3600, num_envs: 2048, iterations: 1000}
cells:
  - algo: sac
    task: g1_walk_flat
    backend: mujoco
    platform: [linux-cpu, linux-cuda]
    tests: {lane: cpu, min_passed: 1}
    probe_required: true
    soak: {min_duration_s: 60, num_envs: 8, iterations: 100}
  - algo: flashsac
    task: g1_walk_flat
    backend: mujoco
    platform: linux-cpu
    tests: {lane: cpu}
    probe_required: false
    soak: {min_duration_s: 60, num_envs: 8, iterations: 100}
    recommendation: {decision: recommend, date: "2025-01-31", rationale: "the CPU reference path for CI"}
  - algo: sac
    task: g1_walk_flat
    backend: mjwarp
    platform: linux-cpu
    unsupported: {reason: "MJWarp needs a CUDA device; the CPU device is a diagnostic lane only"}
  - algo: sac
    task: g1_motion_tracking
    backend: mjwarp
    platform: macos-mps
    tests: {lane: mps}
    probe_required: true
    soak: {min_duration_s: 60, num_envs: 8, iterations: 100}
"""

# The fixture repo's tests: one bound test per cell the fixture inventory supports (the audit of
# `matrix check` needs them).
BOUND_TESTS = """\
import pytest

import runtime.core  # the bound tests exercise the runtime: a change to it stales their evidence


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="train")
def test_sac_walk_mujoco():
    pass


@pytest.mark.cell("flashsac", "g1_walk_flat", "mujoco", kind="train")
def test_flashsac_walk_mujoco():
    pass


@pytest.mark.cell("sac", "g1_motion_tracking", "mjwarp", kind="smoke")
def test_sac_tracking_mjwarp():
    pass
"""

PAGE = f"# Support matrix\n\nHand-written intro.\n\n{BEGIN_MARKER}\n{END_MARKER}\n\nHand-written outro.\n"


def make_repo(root: Path, inventory: str = INVENTORY) -> Path:
    """A committed temporary repository with the runtime-relevant paths, inventory and page."""
    repo = root / "repo"
    (repo / "runtime").mkdir(parents=True)
    (repo / "runtime" / "core.py").write_text("VALUE = 1\n")
    (repo / "harness").mkdir()
    (repo / "harness" / "tool.py").write_text("TOOL = 1\n")
    (repo / "foundation").mkdir()
    (repo / "foundation" / "base.py").write_text("BASE = 1\n")
    (repo / "pyproject.toml").write_text("[project]\nname = 'fixture'\n")
    (repo / "uv.lock").write_text("version = 1\n")
    (repo / "matrix").mkdir()
    (repo / "matrix" / "inventory.yaml").write_text(inventory)
    (repo / "docs").mkdir()
    (repo / "docs" / "support-matrix.md").write_text(PAGE)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_bound.py").write_text(BOUND_TESTS)
    (repo / ".gitignore").write_text("/runs/\n")
    git(root, "init", "-q", "-b", "main", str(repo))
    git(repo, "config", "user.email", "matrix@test.invalid")
    git(repo, "config", "user.name", "matrix tests")
    commit_all(repo, "fixture repo")
    return repo


def context(commit: str, *, dirty: bool = False, gpu: bool = False, system: str = LINUX) -> dict[str, Any]:
    """The context block both artifacts carry (harness.context shape)."""
    devices = [{"index": 0, "uuid": "GPU-0", "name": "H200", "driver": "570"}] if gpu else []
    return {
        "source": {
            "commit": commit,
            "branch": "main",
            "dirty": dirty,
            "worktree_digest": "sha256:" + "0" * 64,
            "reason": None,
        },
        "gpu": {"available": gpu, "reason": None if gpu else "NVML: no driver", "devices": devices},
        "software": {
            "python": "3.11",
            "torch": "2.6",
            "mujoco": "3.3",
            "warp-lang": None,
            "mujoco-warp": None,
            "soakbench": "0.1.0",
        },
        "environment": {"CUDA_VISIBLE_DEVICES": None},
        "host": {"hostname": "h", "cpu_model": "cpu", "cores": 2, "affinity_cores": 2, "platform": system},
    }


SOAK_FIXTURES = REPO / "tests" / "harness" / "soak" / "fixtures"
SOAK_SAMPLES = SOAK_FIXTURES / "samples_clean.jsonl"  # copied beside each soak artifact by write_json
SOAK_SAMPLES_NAME = "soak.samples.jsonl"


def _limit(resource: str, value: int, in_use: int | None, scope: str = "tree") -> dict[str, Any]:
    return {"resource": resource, "scope": scope, "value": value, "source": f"fixture {resource}",
            "in_use": in_use, "reason": None, "path": None}  # fmt: skip


#: the limits a fixture soak recorded: a 16 GiB host with 4 GiB in use, room for 100,000 tasks
SOAK_LIMITS: dict[str, Any] = {
    "read_at_wall": 1_750_000_000.0,
    "limits": [
        _limit("memory", 16 << 30, 4 << 30),
        _limit("tasks", 100_000, 500),
        _limit("map_count", 65_530, None, "process"),
    ],
}


def soak_artifact(
    commit: str,
    *,
    passed: bool = True,
    dirty: bool = False,
    gpu: bool = False,
    system: str = LINUX,
    algo: str = "sac",
    task: str = "g1_walk_flat",
    sim: str = "mujoco",
    num_envs: int = 8,
    iterations: int = 100,
    duration_s: float = 120.0,
    overrides: Iterable[str] = (),
    nproc_per_node: int = 1,
    world_size: int | None = None,
    inputs: dict[str, Any] | None = None,
    must_survive_s: float | None = 8 * 3600.0,
) -> dict[str, Any]:
    """An honest ``soak run`` artifact (0.4.0), built by the monitor's own code over the soak fixtures'
    clean samples (``SOAK_SAMPLES``) and a completed (or, ``passed=False``, collector-failure)
    run_summary, so that ``matrix ingest`` re-derives the same verdicts. Its survival is judged against
    ``must_survive_s`` (the shipped linux-cpu cells declare 8 h) under ``SOAK_LIMITS``. ``nproc_per_node`` > 1 is a
    ``soak run --nproc-per-node N`` artifact with a ``ranks`` section of ``world_size`` ranks (default N;
    0: no section)."""
    import hashlib

    from soakbench.harness.soak.evidence.artifact import MonitorRecord, build_artifact
    from soakbench.harness.soak.verdicts.judgement import judgement_of
    from soakbench.harness.soak.verdicts.observation import observe_classes
    from soakbench.harness.soak.verdicts.survival import assess_survival
    from soakbench.harness.soak.verdicts.trends import analysis_span, leak_verdicts
    from tests.harness.soak._observations import split

    text = SOAK_SAMPLES.read_text()
    samples = [json.loads(line) for line in text.splitlines()]
    summary_file = "run_summary_completed.json" if passed else "run_summary_collector_failure.json"
    leak = leak_verdicts(samples, 40.0)
    obs = split(
        mode="run",
        monitor_failure=None,
        trainer_returncode=0 if passed else 1,
        run_summary=json.loads((SOAK_FIXTURES / summary_file).read_text()),
        residual_processes=[],
        orphaned_shm_segments=[],
        leak_verdicts=leak,
        duration_s=duration_s,
        min_duration_s=60.0,
        observation=observe_classes(samples, leak, 30),
        survival=assess_survival(
            samples,
            limits=SOAK_LIMITS,
            window=(40.0, float((analysis_span(samples, 40.0) or {})["t_end"])),
            target_s=must_survive_s,
            warmup_s=None,
        ),
        must_survive_s=must_survive_s,
    )
    timing = {"sample_interval_s": 5.0, "startup_timeout_s": 60.0, "stale_progress_s": 60.0,
              "post_shutdown_grace_s": 1.0, "min_duration_s": 60.0, "duration_s": duration_s,
              "started_at": 1_750_000_000.0, "finished_at": 1_750_000_000.0 + duration_s}  # fmt: skip
    record = MonitorRecord(
        samples=samples,
        samples_path=f"/tmp/run/{SOAK_SAMPLES_NAME}",
        timing=timing,
        command=["train", "--algo", algo],
        log_dir="/tmp/run",
        startup_end_t=40.0,
        run_settings={
            "algo": algo,
            "task": task,
            "sim": sim,
            "num_envs": num_envs,
            "iterations": iterations,
            "extra_overrides": list(overrides),
            **({"nproc_per_node": nproc_per_node} if nproc_per_node > 1 else {}),
        },
        ranks=ranks_section(nproc_per_node if world_size is None else world_size, iterations),
        samples_sha256=hashlib.sha256(text.encode()).hexdigest(),
        inputs=inputs,
        limits=SOAK_LIMITS,
    )
    return build_artifact(
        judgement=judgement_of(*obs),
        record=record,
        context=context(commit, dirty=dirty, gpu=gpu, system=system),
    )


def ranks_section(world_size: int, iterations: int) -> dict[str, Any] | None:
    """A schema-valid ``ranks`` section of a completed job of ``world_size`` ranks (None below 2)."""
    if world_size < 2:
        return None
    entries = [
        {"rank": r, "node_rank": 0, "status": "completed", "failure_classification": None,
         "failure_reason": None, "exit_code": 0, "params_checksum": "abc", "attempts": [0],
         "processes": [{"pid": 100 + r, "start_ticks": 1, "name": "python", "role": f"rank {r} trainer"}],
         "last_progress": {"iteration": iterations, "final": True}, "leak_verdicts": {}, "last_seen_t": 100.0}
        for r in range(world_size)
    ]  # fmt: skip
    return {"world_size": world_size, "run_id": "job", "agent": None, "first_failure": None,
            "params_identical": True, "restarts": 0, "allowed_restarts": 0, "ranks": entries}  # fmt: skip


def _stats(phase: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"count": 1, "total_ms": 1.0, "mean_ms": 1.0, "median_ms": 1.0, "p95_ms": 1.0,
                           "min_ms": 1.0, "max_ms": 1.0}  # fmt: skip
    if phase:
        out.update(invocations=1, share_of_iteration=0.2)
    return out


def _probe_backend(backend: str, task: str, device: str, within: bool) -> dict[str, Any]:
    phases = {p: _stats(True) for p in ("physics_exchange_ms", "update_state_ms", "reset_selection_ms",
                                        "backend_reset_ms", "reset_publication_ms")}  # fmt: skip
    phases.update(iteration_ms=_stats(False), unattributed_ms=_stats(False))
    inventory = [{"phase": "physics_exchange", "direction": "h2d", "max_per_control_step": 1, "description": "d",
                  "measured_max_per_control_step": 1, "measured_total_count": 1, "measured_total_bytes": 8,
                  "within_limit": within}]  # fmt: skip
    return {
        "backend": backend, "pid": 10, "parent_pid": 9, "launcher_observed_pid": 10,
        "owner": {"algo": "flashsac", "task": task, "sim": backend, "chain": [backend]},
        "device": device, "data_plane": "host_bridge" if backend == "mujoco" else "device",
        "diagnostic_lane": backend == "mjwarp" and device == "cpu", "num_envs": 8, "obs_dim": 4, "action_dim": 2,
        "decimation": 4, "physics_threads": 2, "host_stepping": None, "warmup_iterations": 1,
        "measured_iterations": 2, "setup_s": 0.1, "warmup_s": 0.1, "episodes_finished": 0, "phases": phases,
        "throughput_env_control_steps_per_s": 100.0, "throughput_phased_env_control_steps_per_s": 90.0,
        "throughput_iteration_ms": _stats(False),
        "physics_limit": {"method": "m", "worlds": 8, "threads": 2, "device": device, "cuda_graph": False,
                          "physics_steps": 10, "elapsed_s": 0.1, "physics_steps_per_s": 100.0,
                          "control_steps_per_s": 25.0},
        "efficiency": 0.5,
        "backend_diagnostics": {"available": False, "backend_type": backend, "unavailable_reason": "fixture"},
        "transfers": {"control_steps": 2, "inventory": inventory, "undeclared": [], "within_inventory": within,
                      "inventory_declared": True, "counters_total": {}},
        "torch": {"version": "2.6", "cuda": None, "device_name": None},
    }  # fmt: skip


def probe_artifact(
    commit: str,
    *,
    dirty: bool = False,
    gpu: bool = False,
    task: str = "g1_walk_flat",
    backends: tuple[str, ...] = ("mujoco",),
    within: bool = True,
    acceptance: bool | None = None,
    mjwarp_device: str = "cuda",
) -> dict[str, Any]:
    """A schema-valid probe artifact (0.3.0); ``acceptance`` None means not requested."""
    return {
        "schema_version": "0.3.0", "kind": "soakbench.probe", "created_unix_s": 1_750_000_500.0,
        "duration_s": 3.0, "command": ["probe"], "probe_pid": 5,
        "settings": {"algo": "flashsac", "backends": list(backends), "task": task, "num_envs": 8, "warmup": 1,
                     "iters": 2, "seed": 0, "mjwarp_device": mjwarp_device, "physics_threads": 2,
                     "acceptance": acceptance is not None, "idle_memory_threshold_bytes": 0, "idle_wait_s": 0.0,
                     "worker_timeout_s": 60.0, "output": "/tmp/probe.json"},
        "exclusions": [{"name": n, "reason": "outside the env loop"}
                       for n in ("inference_ipc", "replay_ingestion", "learner_updates")],
        "comparison_note": "fixture",
        "context": context(commit, dirty=dirty, gpu=gpu),
        "backends": {b: _probe_backend(b, task, "cpu" if b == "mujoco" else mjwarp_device, within)
                     for b in backends},
        "acceptance": {"requested": acceptance is not None, "passed": acceptance,
                       "idle_memory_threshold_bytes": 0, "profiler_env_rejected": {"exact": [], "prefixes": []},
                       "checks": []},
    }  # fmt: skip


def junit_xml(
    commit: str,
    cases: list[tuple[str, str | None, str]],
    *,
    dirty: bool = False,
    platform: str | None = "linux-cpu",
    lane: str | None = "cpu",
    gpu: bool = False,
    system: str = "Linux",
    classname: str = "tests.test_bound",
) -> str:
    """JUnit XML as pytest + matrix.pytest_cell write it. ``cases``: (name, cell or None, outcome), in the
    test module ``classname`` (by default the fixture repo's ``tests/test_bound.py``, whose
    ``BOUND_TESTS`` a complete lane holds), or in the one a ``module::name`` name gives."""
    props = {"commit": commit, "dirty": str(dirty).lower(), "worktree_digest": "", "system": system,
             "gpu_available": str(gpu).lower(), "platform": platform or "", "lane": lane or ""}  # fmt: skip
    suite_props = "".join(
        f"<property name={quoteattr('matrix.' + k)} value={quoteattr(v)}/>" for k, v in props.items()
    )
    body = []
    for name, cell, outcome in cases:
        inner = f'<properties><property name="cell" value={quoteattr(cell)}/></properties>' if cell else ""
        inner += {"passed": "", "failed": "<failure message=\"x\">x</failure>", "error": "<error message=\"e\"/>",
                  "skipped": "<skipped message=\"s\"/>"}[outcome]  # fmt: skip
        module, _, test = name.rpartition("::")
        body.append(
            f"<testcase classname={quoteattr(module or classname)} name={quoteattr(test)} "
            f'time="0.01">{inner}</testcase>'
        )
    counts = {o: sum(1 for _, _, outcome in cases if outcome == o) for o in ("failed", "error", "skipped")}
    return (
        f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="{counts["error"]}" '
        f'failures="{counts["failed"]}" skipped="{counts["skipped"]}" tests="{len(body)}" time="1.0" '
        'timestamp="2025-06-15T10:00:00" hostname="h">'
        f"<properties>{suite_props}</properties>{''.join(body)}</testsuite></testsuites>"
    )


def write_json(path: Path, doc: dict[str, Any]) -> Path:
    """Write ``doc``; a soak artifact gets its samples file beside it, as `soak run` leaves it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    if isinstance(doc.get("samples_path"), str) and doc["samples_path"].endswith(SOAK_SAMPLES_NAME):
        (path.parent / SOAK_SAMPLES_NAME).write_bytes(SOAK_SAMPLES.read_bytes())
    return path
