"""What the runtime says about a cell: registries (Registered), composition per platform (Configured) and
what each backend declares it offers per platform (the capabilities table).

The runtime is imported lazily, inside these functions, so importing ``matrix`` imports no torch; the
registries and the Configured check never import a backend, while the capabilities are read from the
backend classes themselves (which import torch and MuJoCo, never Warp). Platform facts are stated
explicitly per platform (never read from this host), so ``linux-cuda`` is validated and described here
exactly as it would be on a CUDA host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from soakbench.foundation.vocab import ALGOS
from soakbench.matrix.model import PLATFORM_SYSTEM, CellKey

if TYPE_CHECKING:  # the runtime is imported lazily at run time (see the module docstring)
    from soakbench.runtime.backends.contract import BackendCapabilities
    from soakbench.runtime.config import PlatformFacts

# ConfiguredCheck(key) -> None when the owner composes and validates for key.platform, else the reason.
ConfiguredCheck = Callable[[CellKey], "str | None"]
# CapabilityQuery(key) -> what key.backend offers on key.platform (key.algo/task pick the owner config).
CapabilityQuery = Callable[[CellKey], "CapabilityRow"]
MpsSharing = Literal["shares the GPU", "no effect", "unavailable"]


@dataclass(frozen=True)
class CapabilityRow:
    """One backend x platform row of the capabilities table, as the runtime declares it.

    ``physics_device`` is None when the backend cannot run there (``note`` says why); the learner device
    and MPS sharing come from the runtime's host validation of the owner config, the rest from the
    backend class.
    """

    backend: str
    platform: str
    data_plane: str
    physics_device: str | None
    learner_device: str
    process_model: str
    cuda_graph_requested: bool
    cuda_graph_possible: bool
    mps_sharing: MpsSharing
    host_transfers: tuple[tuple[str, int], ...]
    note: str | None


@dataclass(frozen=True)
class Registry:
    """Names the runtime registers: entrypoints (algos), tasks and backends."""

    algos: frozenset[str]
    tasks: frozenset[str]
    backends: frozenset[str]


def load_registry() -> Registry:
    """Read the runtime's registries (``runtime.config.ALGOS``, ``TASKS``, ``BACKENDS``)."""
    from soakbench.runtime.backends import BACKENDS
    from soakbench.runtime.tasks import TASKS

    return Registry(algos=frozenset(ALGOS), tasks=frozenset(TASKS), backends=frozenset(BACKENDS))


def platform_facts(platform: str) -> PlatformFacts:
    """``runtime.config.PlatformFacts`` describing ``platform`` (one device; no HIP build)."""
    from soakbench.runtime.config import PlatformFacts

    return PlatformFacts(
        system=PLATFORM_SYSTEM[platform],
        cuda_available=platform == "linux-cuda",
        cuda_device_count=1 if platform == "linux-cuda" else 0,
        hip_build=False,
        mps_available=platform == "macos-mps",
    )


def runtime_configured(key: CellKey) -> str | None:
    """Compose ``key``'s owner YAML and validate it for ``key.platform``; the first problem or None."""
    from soakbench.runtime.config import ConfigError, compose, platform_blockers

    try:
        cfg = compose(key.algo, key.task, key.backend)
    except ConfigError as exc:
        return f"compose failed: {exc}"
    problems = platform_blockers(cfg, platform_facts(key.platform))
    return f"not valid on {key.platform}: {problems[0]}" if problems else None


MPS_OVERRIDE = "training.cuda_process_sharing=mps"


def _mps_sharing(key: CellKey, facts: PlatformFacts, physics_device: str | None) -> MpsSharing:
    """Whether the owner config with MPS sharing passes the platform check, and whether it would share
    anything: MPS only helps when the collector is a CUDA client too."""
    from soakbench.runtime.config import ConfigError, compose, platform_blockers

    try:
        blocked = platform_blockers(compose(key.algo, key.task, key.backend, [MPS_OVERRIDE]), facts)
    except ConfigError:
        return "unavailable"
    if blocked:
        return "unavailable"
    return "shares the GPU" if physics_device == "cuda" else "no effect"


def capability_row(
    key: CellKey, declared: BackendCapabilities, learner_device: str, mps: MpsSharing
) -> CapabilityRow:
    """The table row from the backend's declaration and the runtime's host facts (pure)."""
    return CapabilityRow(
        backend=key.backend,
        platform=key.platform,
        data_plane=declared.data_plane,
        physics_device=declared.physics_device,
        learner_device=learner_device,
        process_model=declared.process_model,
        cuda_graph_requested=declared.cuda_graph_requested,
        cuda_graph_possible=declared.cuda_graph_possible,
        mps_sharing=mps,
        host_transfers=declared.host_transfers,
        note=declared.unavailable_reason,
    )


def runtime_capabilities(key: CellKey) -> CapabilityRow:
    """Ask ``key.backend``'s class what it offers on ``key.platform``; the learner device is the one the
    runtime resolves for ``key``'s owner config there (``unresolved`` when that config does not compose)."""
    from soakbench.runtime.backends import backend_class
    from soakbench.runtime.config import ConfigError, compose, resolve_learner_device

    facts = platform_facts(key.platform)
    declared = backend_class(key.backend).capabilities(facts)
    try:
        learner = resolve_learner_device(compose(key.algo, key.task, key.backend), facts)
    except ConfigError:
        learner = "unresolved"
    return capability_row(key, declared, learner, _mps_sharing(key, facts, declared.physics_device))


@dataclass(frozen=True)
class CellSources:
    """What a cell's code is, as the runtime names it: the files a run of the cell loads by name (which no
    static import graph shows) and the data it reads (path prefixes: configuration, assets, schemas)."""

    trainer: tuple[str, ...]  # the train command and the processes it runs
    learner: str | None  # the cell's learner module (None: a project that names none)
    physics: tuple[str, ...]  # the cell's backend and task modules: what a probe measures
    data: tuple[str, ...]

    @property
    def entries(self) -> tuple[str, ...]:
        """Every entry file of a training run of the cell."""
        return (*self.trainer, *([self.learner] if self.learner else []), *self.physics)


def _module_file(target: str) -> str:
    """``runtime/backends/mujoco.py`` for ``soakbench.runtime.backends.mujoco:MujocoBackend`` (the rooms
    live at the repository root; ``soakbench`` is the package that holds them)."""
    return target.partition(":")[0].removeprefix("soakbench.").replace(".", "/") + ".py"


def runtime_cell_sources(key: CellKey) -> CellSources:
    """This runtime's sources of ``key``: the train CLI, the trainer and its collector, the cell's learner,
    backend and task modules (each imported by name), its owner YAML chain and the shipped assets. An
    algo, task or backend the runtime does not register is a KeyError."""
    from soakbench.runtime.backends import BACKENDS
    from soakbench.runtime.config.sections import LEARNER_SECTIONS
    from soakbench.runtime.learners import LEARNERS
    from soakbench.runtime.tasks import TASKS

    return CellSources(
        trainer=("runtime/cli.py", "runtime/manager/trainer.py", "runtime/manager/collector.py"),
        learner=_module_file(LEARNERS[LEARNER_SECTIONS[key.algo].__name__][0]),
        physics=(_module_file(BACKENDS[key.backend]), _module_file(TASKS[key.task])),
        data=(
            f"runtime/conf/{key.algo}/defaults.yaml",
            f"runtime/conf/{key.algo}/task/{key.task}/",
            f"runtime/conf/tasks/{key.task}.yaml",
            *task_assets(key),
            "foundation/schemas/",
        ),
    )


#: Task-config keys that name a shipped asset (relative to ``runtime/assets/``) a run of the task reads.
ASSET_KEYS = ("scene", "motion")


def task_assets(key: CellKey, conf: Path | None = None) -> tuple[str, ...]:
    """The assets a run of ``key`` reads, as repository paths, from its task config and the owner's
    override for its backend (the later wins): a scene's folder (MuJoCo's loader reads the includes and
    meshes beside it) and each other named file. A walk cell reads no motion clip, so a clip's change
    stales only the cells whose task names it."""
    import yaml

    conf = conf or Path(__file__).resolve().parents[2] / "runtime" / "conf"
    named: dict[str, str] = {}
    for path in (
        conf / "tasks" / f"{key.task}.yaml",
        conf / key.algo / "task" / key.task / f"{key.backend}.yaml",
    ):
        task = (
            (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("task") if path.is_file() else None
        )
        if isinstance(task, dict):
            named.update({k: v for k, v in task.items() if k in ASSET_KEYS and isinstance(v, str)})
    return tuple(
        f"runtime/assets/{rel.rpartition('/')[0]}/" if name == "scene" else f"runtime/assets/{rel}"
        for name, rel in sorted(named.items())
    )
