"""Owner-routed configuration: compose owner YAMLs with OmegaConf, apply overrides, validate, fail closed.

Composition order (later wins), every layer limited to keys that ``base.yaml`` and the algorithm
defaults declare:

    conf/base.yaml -> conf/<algo>/defaults.yaml -> conf/tasks/<task>.yaml
      -> owner chain conf/<algo>/task/<task>/<sim>.yaml (``inherits: <sim>`` resolved first)
      -> CLI ``dotted.key=value`` overrides

The owner, not the CLI, decides ``training.sim_backend``. Derived values live under ``resolved`` and
the owner identity under ``owner``; neither can be overridden.
"""

from __future__ import annotations

import difflib
import math
import os
import platform as platform_module
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from foundation.vocab import ALGOS
from runtime.backends import BACKENDS
from runtime.tasks import TASKS

CONF_ROOT = Path(__file__).parent / "conf"

# Removed without an alias: the tensor runtime is an invariant of the manager, not a setting.
REMOVED_KEYS: dict[str, str] = {
    "env.tensor_runtime": "the manager runtime is tensor-native by construction",
    "env.tensor_runtime_device": "placement follows the backend's data plane and the process device",
}
# Keys that only the owner YAML or the composer may set.
OWNER_KEYS: frozenset[str] = frozenset({"training.sim_backend", "algo.name", "task.name"})

# (minimum, maximum) for integer settings; None means unbounded on that side.
INT_RANGES: dict[str, tuple[int, int | None]] = {
    "algo.num_envs": (1, 65536),
    "algo.max_iterations": (1, None),
    "algo.save_interval": (1, None),
    "algo.prefill_iterations": (0, None),
    "training.inference_slot_capacity": (1, 16),
    "training.replay_ingress_depth": (1, 16),
    "training.collector_metrics_interval": (1, 10000),
    "training.playback_steps": (1, 100000),
    "training.test_fault_iteration": (0, None),
    "task.decimation": (1, 100),
    "seed": (0, 2**31 - 1),
}
# Learner keys are validated only where the algorithm declares them.
OPTIONAL_INT_RANGES: dict[str, tuple[int, int | None]] = {
    "algo.batch_size": (2, None),
    "algo.updates_per_iteration": (1, 1024),
    "algo.replay_capacity": (1, None),
    "algo.learning_starts": (0, None),
    "algo.actor_update_period": (1, 1000),
    "algo.actor_hidden_dim": (1, None),
    "algo.actor_blocks": (1, 64),
    "algo.critic_hidden_dim": (1, None),
    "algo.critic_blocks": (1, 64),
    "algo.expansion": (1, 64),
    "algo.num_bins": (3, 10001),
}
# (exclusive low, inclusive high) for float settings; FLOAT_EXCLUSIVE_HIGH keys exclude the high end too.
# Lows are never looser than the learners' own checks, so a value that passes here never fails later.
FLOAT_RANGES: dict[str, tuple[float, float | None]] = {
    "algo.gamma": (0.0, 1.0),
    "algo.tau": (0.0, 1.0),
    "algo.actor_lr": (0.0, None),
    "algo.critic_lr": (0.0, None),
    "algo.alpha_lr": (0.0, None),
    "algo.init_alpha": (1e-8, None),
    "algo.target_sigma": (1e-6, None),
    "algo.v_max": (1e-3, None),
    "algo.bn_momentum": (0.0, 1.0),
    "task.episode_length_s": (0.0, None),
    "task.action_scale": (0.0, None),
    "task.min_base_height": (0.0, None),
}
FLOAT_EXCLUSIVE_HIGH: frozenset[str] = frozenset(
    {"algo.gamma"}
)  # gamma = 1: no discounting, unbounded returns
CHOICES: dict[str, tuple[Any, ...]] = {
    "training.cuda_process_sharing": (None, "mps"),
    "training.learner_device": ("auto", "cpu", "cuda", "mps"),
    "training.mjwarp_device": ("cuda", "cpu"),
    "training.test_fault": (None, "learner_exception"),
}
BOOL_KEYS: tuple[str, ...] = ("training.no_play", "training.torch_compile", "training.cuda_graphs")
# Learner keys checked where the algorithm declares them: MLP widths, nullable floats (exclusive low
# bound or None for any finite value), switches.
OPTIONAL_WIDTH_LISTS: tuple[str, ...] = ("algo.actor_hidden", "algo.critic_hidden")
OPTIONAL_NULLABLE_FLOATS: dict[str, float | None] = {"algo.max_grad_norm": 0.0, "algo.target_entropy": None}
OPTIONAL_BOOL_KEYS: tuple[str, ...] = ("algo.obs_normalization",)


class ConfigError(Exception):
    """A user-facing configuration error; the CLI prints it and exits with code 2."""


@dataclass(frozen=True)
class PlatformFacts:
    """What the host offers, passed explicitly so validation can be run 'as if' on another platform."""

    system: str  # platform.system(): Linux, Darwin, ...
    cuda_available: bool
    cuda_device_count: int
    hip_build: bool
    mps_available: bool
    gpu_uuid: str | None = None  # the physical GPU a CUDA run would use, when NVML can tell

    @classmethod
    def detect(cls, *, initialize_cuda: bool = True) -> PlatformFacts:
        """Read the facts of this host from torch (imported lazily: composing imports no torch).

        ``initialize_cuda=False`` asks torch for an NVML-based count instead of ``cuInit`` (torch falls
        back to ``cuInit`` only when NVML fails): a CUDA client binds to an MPS daemon when CUDA is
        initialized, so an MPS run must export its pipe directory before that happens.
        """
        import torch

        saved = os.environ.get(_NVML_CHECK)
        if not initialize_cuda:
            os.environ[_NVML_CHECK] = "1"
        try:
            cuda = bool(torch.cuda.is_available())
            count = int(torch.cuda.device_count()) if cuda else 0
        finally:
            if saved is None:
                os.environ.pop(_NVML_CHECK, None)
            else:
                os.environ[_NVML_CHECK] = saved
        return cls(
            system=platform_module.system(),
            cuda_available=cuda,
            cuda_device_count=count,
            hip_build=getattr(torch.version, "hip", None) is not None,
            mps_available=bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()),
            gpu_uuid=_visible_gpu_uuid() if cuda else None,
        )


_NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"


def _visible_gpu_uuid() -> str | None:
    """UUID of the single visible GPU through NVML (honouring CUDA_VISIBLE_DEVICES), else None."""
    from foundation.mps import visible_gpus
    from foundation.nvml import NvmlReader

    with NvmlReader() as reader:
        snapshot = reader.snapshot()
    visible = visible_gpus(snapshot, os.environ.get("CUDA_VISIBLE_DEVICES")) if snapshot["available"] else []
    return visible[0].uuid if len(visible) == 1 else None


def _load_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"owner configuration file is missing: {path}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return data


def _flat_keys(node: Any, prefix: str = "") -> list[str]:
    if not isinstance(node, dict):
        return [prefix]
    keys: list[str] = []
    for key, value in node.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        keys.extend(_flat_keys(value, path) if isinstance(value, dict) and value else [path])
    return keys


def _merge_declared(base: dict[str, Any], layer: dict[str, Any], source: Path) -> dict[str, Any]:
    """Merge ``layer`` over ``base``; a layer may change values but never invent keys."""
    declared = set(_flat_keys(base))
    for key in _flat_keys(layer):
        if key not in declared and not any(key.startswith(d + ".") for d in declared):
            raise ConfigError(f"{source}: unknown key {key!r}{_suggest(key, declared)}")
    merged = OmegaConf.merge(OmegaConf.create(base), OmegaConf.create(layer))
    return OmegaConf.to_container(merged)  # type: ignore[return-value]


def _suggest(key: str, candidates: set[str]) -> str:
    close = difflib.get_close_matches(key, sorted(candidates), n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


def _owner_chain(algo: str, task: str, sim: str) -> list[Path]:
    """Owner files from the root ancestor to ``sim``'s own owner, following ``inherits``."""
    chain: list[Path] = []
    current: str | None = sim
    while current is not None:
        path = CONF_ROOT / algo / "task" / task / f"{current}.yaml"
        if path in chain:
            raise ConfigError(f"{path}: owner inheritance cycle")
        chain.insert(0, path)
        parent = _load_yaml(path).get("inherits")
        if parent is not None and not isinstance(parent, str):
            raise ConfigError(f"{path}: 'inherits' must name a sibling owner, got {parent!r}")
        current = parent
    return chain


def split_override(item: str) -> tuple[str, str]:
    """``dotted.key=value`` -> (key, raw value text)."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {item!r} is not of the form dotted.key=value")
    return key, raw


def parse_override_value(item: str, raw: str) -> Any:
    """The override's value parsed by OmegaConf's YAML grammar, as its own dotlists are: ``null``,
    booleans, numbers (``1e-3`` too, unlike plain YAML 1.1), ``[64, 64]`` lists; dates stay text.

    Fails closed: text that is not valid YAML is rejected rather than kept as a string."""
    try:
        parsed = OmegaConf.from_dotlist([f"value={raw}"])
    except yaml.YAMLError as exc:
        reason = str(getattr(exc, "problem", None) or "unparsable")
        raise ConfigError(
            f"override {item!r}: the value is not valid YAML ({reason}); to pass it as text, quote it: "
            "key='\"text\"'"
        ) from None
    return OmegaConf.to_container(parsed)["value"]  # type: ignore[call-overload,index]


def compose(algo: str, task: str, sim: str, overrides: Sequence[str] = ()) -> DictConfig:
    """Compose and validate the owner-routed configuration (no host prerequisites checked).

    Returns a read-only DictConfig with ``owner`` and ``resolved`` sections added.
    Raises ConfigError naming the first problem.
    """
    if algo not in ALGOS:
        raise ConfigError(f"--algo {algo!r} is not supported; allowed: {', '.join(ALGOS)}")
    if task not in TASKS:
        raise ConfigError(f"--task {task!r} is not registered; allowed: {', '.join(sorted(TASKS))}")
    if sim not in BACKENDS:
        raise ConfigError(f"--sim {sim!r} is not registered; allowed: {', '.join(sorted(BACKENDS))}")

    data = _load_yaml(CONF_ROOT / "base.yaml")
    data.update(_load_yaml(CONF_ROOT / algo / "defaults.yaml"))
    data.update(_load_yaml(CONF_ROOT / "tasks" / f"{task}.yaml"))
    chain = _owner_chain(algo, task, sim)
    for path in chain:
        layer = _load_yaml(path)
        layer.pop("inherits", None)
        data = _merge_declared(data, layer, path)

    declared = set(_flat_keys(data))
    for item in overrides:
        key, raw = split_override(item)
        if key in REMOVED_KEYS or any(key.startswith(k + ".") for k in REMOVED_KEYS):
            raise ConfigError(
                f"{key} was removed ({REMOVED_KEYS.get(key, 'removed setting')}); delete it from your "
                "overrides and owner YAMLs. There is no alias."
            )
        if key in OWNER_KEYS:
            raise ConfigError(
                f"{key} is set by the owner YAML selected with --algo/--task/--sim and cannot be "
                f"overridden; choose the owner with --sim instead"
            )
        if key.split(".")[0] in ("owner", "resolved"):
            raise ConfigError(f"{key} is derived by the composer and cannot be overridden")
        if key not in declared:
            raise ConfigError(f"unknown setting {key!r}{_suggest(key, declared)}")
        node = OmegaConf.create(data)
        OmegaConf.update(node, key, parse_override_value(item, raw), merge=False)
        data = OmegaConf.to_container(node)  # type: ignore[assignment]

    _validate_values(data)
    data["owner"] = {
        "algo": algo,
        "task": task,
        "sim": sim,
        "chain": [p.stem for p in chain],
        "files": [str(p.relative_to(CONF_ROOT.parent.parent)) for p in chain],
    }
    rows = data["training"]["replay_ingress_slot_rows"]
    data["resolved"] = {
        "replay_ingress_slot_rows": rows if rows is not None else data["algo"]["num_envs"],
        "physics_threads": data["training"]["physics_threads"] or (os.cpu_count() or 1),
    }
    data["resolved"]["learner_threads"] = resolve_learner_threads(
        data["training"]["learner_threads"],
        data["training"]["sim_backend"],
        data["resolved"]["physics_threads"],
        os.cpu_count() or 1,
    )
    cfg = OmegaConf.create(data)
    OmegaConf.set_readonly(cfg, True)
    OmegaConf.set_struct(cfg, True)
    return cfg


# torch intra-op threads beyond this do not speed up the learner's small-MLP updates measurably.
LEARNER_THREADS_CAP = 8


def resolve_learner_threads(configured: int | None, sim_backend: str | None, physics: int, cores: int) -> int:
    """torch intra-op threads for the learner (main) process.

    An explicit ``training.learner_threads`` wins. null leaves the learner the cores the collector does
    not use: ``max(1, cores - busy)`` capped at LEARNER_THREADS_CAP, where ``busy`` is the MuJoCo CPU
    backend's ``physics`` worker threads, or 1 (the collector's own thread) for any other backend.
    torch's default (one thread per core) made the learner fight the collector: on 2 cores an isolated
    SAC learner ran 2.3 updates/s with 2 threads vs 47.7 with 1 (docs/learners.md).
    """
    if configured is not None:
        return int(configured)
    busy = physics if sim_backend == "mujoco" else 1
    return max(1, min(LEARNER_THREADS_CAP, cores - busy))


def _get(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        node = node[part]
    return node


def _has(data: dict[str, Any], dotted: str) -> bool:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _validate_values(data: dict[str, Any]) -> None:
    present = {**INT_RANGES, **{k: v for k, v in OPTIONAL_INT_RANGES.items() if _has(data, k)}}
    for key, (low, high) in present.items():
        value = _get(data, key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} must be an integer, got {value!r}")
        if value < low or (high is not None and value > high):
            allowed = f"{low}..{high}" if high is not None else f">= {low}"
            raise ConfigError(f"{key}={value} is out of range; allowed: {allowed}")
    for key, (lo, hi) in FLOAT_RANGES.items():
        if not _has(data, key):
            continue
        value = _get(data, key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key} must be a number, got {value!r}")
        open_high = key in FLOAT_EXCLUSIVE_HIGH
        if value <= lo or (hi is not None and (value >= hi if open_high else value > hi)):
            allowed = f"({lo}, {hi}{')' if open_high else ']'}" if hi is not None else f"> {lo}"
            raise ConfigError(f"{key}={value} is out of range; allowed: {allowed}")
    for key, choices in CHOICES.items():
        value = _get(data, key)
        if value not in choices:
            allowed = ", ".join("null" if c is None else str(c) for c in choices)
            raise ConfigError(f"{key}={value!r} is not allowed; allowed: {allowed}")
    for key in BOOL_KEYS + tuple(k for k in OPTIONAL_BOOL_KEYS if _has(data, k)):
        if not isinstance(_get(data, key), bool):
            raise ConfigError(f"{key} must be true or false, got {_get(data, key)!r}")
    for key in (k for k in OPTIONAL_WIDTH_LISTS if _has(data, k)):
        widths = _get(data, key)
        if (
            not isinstance(widths, list)
            or not widths
            or not all(isinstance(w, int) and not isinstance(w, bool) and w >= 1 for w in widths)
        ):
            raise ConfigError(
                f"{key} must be a non-empty list of integers >= 1, e.g. [256, 256]; got {widths!r}"
            )
    for key, nullable_low in ((k, v) for k, v in OPTIONAL_NULLABLE_FLOATS.items() if _has(data, k)):
        value = _get(data, key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ConfigError(f"{key} must be null or a finite number, got {value!r}")
        if nullable_low is not None and value <= nullable_low:
            raise ConfigError(f"{key}={value} is out of range; allowed: null or > {nullable_low}")
    num_envs = data["algo"]["num_envs"]
    rows = data["training"]["replay_ingress_slot_rows"]
    if rows is not None:
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ConfigError(
                f"training.replay_ingress_slot_rows must be null or a positive integer, got {rows!r}"
            )
        if num_envs % rows != 0:
            raise ConfigError(
                f"training.replay_ingress_slot_rows={rows} must divide algo.num_envs={num_envs} "
                "(null means one slot per vector step)"
            )
    threads = data["training"]["physics_threads"]
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ConfigError(f"training.physics_threads must be null or a positive integer, got {threads!r}")
    threads = data["training"]["learner_threads"]
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ConfigError(f"training.learner_threads must be null or a positive integer, got {threads!r}")
    heartbeat = data["training"]["heartbeat_seconds"]
    if isinstance(heartbeat, bool) or not isinstance(heartbeat, int | float) or heartbeat <= 0:
        raise ConfigError(f"training.heartbeat_seconds must be a positive number, got {heartbeat!r}")
    log_dir = data["log_dir"]
    if log_dir is not None and (not isinstance(log_dir, str) or not os.path.isabs(log_dir)):
        raise ConfigError(f"log_dir must be an absolute path, got {log_dir!r}")


def platform_blockers(cfg: DictConfig, facts: PlatformFacts) -> list[str]:
    """Unmet host prerequisites for ``cfg`` on ``facts``, first one first (empty when runnable)."""
    problems: list[str] = []
    training = cfg.training
    if facts.hip_build:
        problems.append("this torch build targets HIP/ROCm; only NVIDIA CUDA or CPU builds are supported")
    if facts.cuda_device_count > 1:
        problems.append(
            f"{facts.cuda_device_count} CUDA devices are visible; the runtime is single-GPU only. "
            "Set CUDA_VISIBLE_DEVICES=<one index or UUID>"
        )
    if training.sim_backend == "mjwarp" and training.mjwarp_device == "cuda":
        if facts.system != "Linux":
            problems.append(f"--sim mjwarp requires Linux with CUDA; this host is {facts.system}")
        elif not facts.cuda_available:
            problems.append(
                "--sim mjwarp requires Linux with a CUDA device and none is available; use --sim mujoco on "
                "a CPU host (training.mjwarp_device=cpu is a diagnostic lane, never production evidence)"
            )
    if training.cuda_process_sharing == "mps" and not (facts.system == "Linux" and facts.cuda_available):
        problems.append("training.cuda_process_sharing=mps requires Linux with a CUDA device")
    wanted = training.learner_device
    if wanted == "cuda" and not facts.cuda_available:
        problems.append("training.learner_device=cuda but no CUDA device is available")
    if wanted == "mps" and not facts.mps_available:
        problems.append("training.learner_device=mps but the MPS backend is not available")
    return problems


def resolve_learner_device(cfg: DictConfig, facts: PlatformFacts) -> str:
    """The learner device: explicit setting, else cuda, then mps, then cpu."""
    wanted = str(cfg.training.learner_device)
    if wanted != "auto":
        return wanted
    if facts.cuda_available:
        return "cuda"
    if facts.mps_available:
        return "mps"
    return "cpu"


def validate_for_run(cfg: DictConfig, facts: PlatformFacts) -> DictConfig:
    """Check everything a real run needs beyond composition and return ``cfg`` with
    ``resolved.learner_device`` filled in; raises ConfigError on the first unmet prerequisite."""
    problems = platform_blockers(cfg, facts)
    if problems:
        raise ConfigError(problems[0])
    if cfg.log_dir is None:
        raise ConfigError("log_dir is required: pass log_dir=/absolute/path/of/a/new/run/dir")
    log_dir = Path(str(cfg.log_dir))
    if log_dir.exists() and (not log_dir.is_dir() or any(log_dir.iterdir())):
        raise ConfigError(f"log_dir {log_dir} exists and is not an empty directory; choose a new path")
    sharing: dict[str, Any] = {
        "configured": cfg.training.cuda_process_sharing,
        "effective": None,
        "validation": None,
    }
    if cfg.training.cuda_process_sharing == "mps":
        from foundation.mps import CumpsError, resolve_for_training

        try:
            sharing["validation"] = resolve_for_training(facts.gpu_uuid, os.environ)
        except CumpsError as exc:
            raise ConfigError(str(exc)) from None
        sharing["effective"] = "mps"
    return with_resolved(cfg, learner_device=resolve_learner_device(cfg, facts), cuda_process_sharing=sharing)


def process_sharing_environment(cfg: DictConfig) -> dict[str, str]:
    """Variables the run must export before CUDA initializes so its processes use the validated MPS
    daemon: a daemon found through its cumps record is reached only if its pipe directory is in the
    environment (an explicit ``CUDA_MPS_PIPE_DIRECTORY`` is already there). Empty without MPS."""
    sharing = cfg.resolved.get("cuda_process_sharing")
    validation = sharing.get("validation") if sharing is not None else None
    if validation is None or validation.get("source") != "record":
        return {}
    return {"CUDA_MPS_PIPE_DIRECTORY": str(validation.pipe_dir)}


def with_resolved(cfg: DictConfig, **values: Any) -> DictConfig:
    """A read-only copy of ``cfg`` with extra ``resolved.*`` values."""
    data = OmegaConf.to_container(cfg)
    assert isinstance(data, dict)
    data["resolved"].update(values)
    out = OmegaConf.create(data)
    OmegaConf.set_readonly(out, True)
    OmegaConf.set_struct(out, True)
    return out
