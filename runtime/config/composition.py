"""Owner-routed composition: owner YAML layers and CLI overrides merged by OmegaConf onto the typed schema.

Composition order (later wins), every layer typed and limited to the keys of the schema
(``runtime.config.sections``): the sections' base defaults -> ``conf/<algo>/defaults.yaml`` ->
``conf/tasks/<task>.yaml`` -> owner chain ``conf/<algo>/task/<task>/<sim>.yaml`` (``inherits: <sim>``
resolved first) -> CLI ``dotted.key=value`` overrides. OmegaConf types and merges every layer and rejects
unknown keys; a value it would only accept by converting it (``1`` for a boolean, ``"5"`` for an integer)
is refused instead. Then the bounds beside each field are checked once and ``OmegaConf.to_object`` gives
the frozen dataclasses. The owner, not the CLI, decides ``training.sim_backend``; ``owner`` and ``resolved``
are derived and cannot be overridden.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException, ValidationError

from soakbench.foundation.inputs import note_data_file
from soakbench.foundation.vocab import ALGOS
from soakbench.runtime.backends import BACKENDS
from soakbench.runtime.config.fields import (
    ConfigError,
    FieldType,
    Spec,
    check_section,
    check_value,
    field_type,
    spec_of,
    type_hints,
)
from soakbench.runtime.config.host import resolve_learner_threads
from soakbench.runtime.config.sections import (
    LEARNER_SECTIONS,
    TASK_SECTIONS,
    ComposedConfig,
    OwnerConfig,
    ResolvedConfig,
    RunConfig,
    Section,
    Settings,
    TrainingConfig,
    shallow_fields,
)
from soakbench.runtime.tasks import TASKS

CONF_ROOT = Path(__file__).resolve().parents[1] / "conf"

# Removed without an alias: the tensor runtime is an invariant of the manager, not a setting.
REMOVED_KEYS: dict[str, str] = {
    "env.tensor_runtime": "the manager runtime is tensor-native by construction",
    "env.tensor_runtime_device": "placement follows the backend's data plane and the process device",
}
# Keys that only the owner YAML or the composer may set.
OWNER_KEYS: frozenset[str] = frozenset({"training.sim_backend", "algo.name", "task.name"})
DERIVED_SECTIONS: tuple[str, ...] = ("owner", "resolved")

S = TypeVar("S", bound=Section)


@dataclass(frozen=True)
class Layer:
    """One YAML layer: ``kind`` names the owner level in docs/settings.md."""

    kind: str  # "algo defaults" | "task defaults" | "owner YAML"
    path: Path
    data: dict[str, Any]


@dataclass(frozen=True)
class Schema:
    """The declared leaves of a template config: dotted key -> (type, spec)."""

    template: Section
    leaves: dict[str, tuple[FieldType, Spec]]

    @classmethod
    def of(cls, template: Section) -> Schema:
        leaves: dict[str, tuple[FieldType, Spec]] = {}
        _collect_leaves(template, "", leaves)
        return cls(template, leaves)

    def suggest(self, key: str) -> str:
        close = difflib.get_close_matches(key, sorted(self.leaves), n=1, cutoff=0.5)
        return f"; did you mean {close[0]!r}?" if close else ""


def _collect_leaves(obj: object, prefix: str, out: dict[str, tuple[FieldType, Spec]]) -> None:
    hints = type_hints(type(obj))
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]  # a section instance
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            _collect_leaves(value, f"{prefix}{f.name}.", out)
        else:
            out[f"{prefix}{f.name}"] = (field_type(hints[f.name]), spec_of(f))


def template(cls: type[S], **given: object) -> S:
    """An instance of ``cls`` whose fields without a default are OmegaConf-missing (sections nested)."""
    hints = type_hints(cls)
    values = dict(given)
    for f in dataclasses.fields(cls):
        if (
            f.name in values
            or f.default is not dataclasses.MISSING
            or f.default_factory is not dataclasses.MISSING
        ):
            continue
        hint = hints[f.name]
        is_section = isinstance(hint, type) and issubclass(hint, Section)
        values[f.name] = template(hint) if is_section else MISSING
    return cls(**values)


def _load_yaml(path: Path) -> dict[str, Any]:
    note_data_file(path)
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


def owner_layers(algo: str, task: str, sim: str) -> tuple[list[Layer], list[Path]]:
    """The YAML layers of an owner route in composition order, and its owner chain."""
    check_route(algo, task, sim)
    chain = _owner_chain(algo, task, sim)
    layers = [
        Layer(
            "algo defaults",
            CONF_ROOT / algo / "defaults.yaml",
            _load_yaml(CONF_ROOT / algo / "defaults.yaml"),
        ),
        Layer(
            "task defaults",
            CONF_ROOT / "tasks" / f"{task}.yaml",
            _load_yaml(CONF_ROOT / "tasks" / f"{task}.yaml"),
        ),
    ]
    for path in chain:
        data = _load_yaml(path)
        data.pop("inherits", None)
        layers.append(Layer("owner YAML", path, data))
    return layers, chain


def check_route(algo: str, task: str, sim: str) -> None:
    if algo not in ALGOS:
        raise ConfigError(f"--algo {algo!r} is not supported; allowed: {', '.join(ALGOS)}")
    if task not in TASKS:
        raise ConfigError(f"--task {task!r} is not registered; allowed: {', '.join(sorted(TASKS))}")
    if sim not in BACKENDS:
        raise ConfigError(f"--sim {sim!r} is not registered; allowed: {', '.join(sorted(BACKENDS))}")


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
    return OmegaConf.to_container(parsed)["value"]  # type: ignore[call-overload,index]  # a plain dict


def check_override_key(key: str, schema: Schema) -> None:
    """Refuse removed, owner-set, derived and unknown keys (before the value is parsed)."""
    if key in REMOVED_KEYS or any(key.startswith(k + ".") for k in REMOVED_KEYS):
        raise ConfigError(
            f"{key} was removed ({REMOVED_KEYS.get(key, 'removed setting')}); delete it from your "
            "overrides and owner YAMLs. There is no alias.",
            key,
        )
    if key in OWNER_KEYS:
        raise ConfigError(
            f"{key} is set by the owner YAML selected with --algo/--task/--sim and cannot be "
            f"overridden; choose the owner with --sim instead",
            key,
        )
    if key.split(".")[0] in DERIVED_SECTIONS:
        raise ConfigError(f"{key} is derived by the composer and cannot be overridden", key)
    if key not in schema.leaves:
        raise ConfigError(f"unknown setting {key!r}{schema.suggest(key)}", key)


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> {dotted key: leaf value}; lists are leaves."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{path}."))
        else:
            out[path] = value
    return out


def _nest(key: str, value: object) -> dict[str, Any]:
    out: dict[str, Any] = {}
    node = out
    *parents, last = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return out


def _field_key(full_key: object) -> str:
    """OmegaConf's ``algo.actor_hidden[0]`` -> the setting ``algo.actor_hidden``."""
    return re.sub(r"\[.*$", "", str(full_key))


def _value_error(schema: Schema, key: str, raw: object, where: str) -> ConfigError | None:
    """The field's own refusal of ``raw`` (prefixed by ``where``), or None if the field accepts it."""
    declared = schema.leaves.get(key)
    if declared is None:
        return ConfigError(f"{where}{key} must be a mapping of settings, got {raw!r}", key)
    try:
        check_value(key, *declared, raw)
    except ConfigError as refused:
        return ConfigError(f"{where}{refused}", key)
    return None


def _coerced(raw: object, stored: object) -> bool:
    """True when OmegaConf accepted ``raw`` only by converting it (int -> float widening is fine)."""
    if isinstance(raw, list) and isinstance(stored, list):
        return len(raw) != len(stored) or any(_coerced(r, s) for r, s in zip(raw, stored, strict=True))
    if type(raw) is type(stored):
        return False
    return not (type(raw) is int and type(stored) is float)


def merge_layer(node: DictConfig, layer: Mapping[str, Any], schema: Schema, where: str = "") -> DictConfig:
    """``layer`` merged onto ``node`` by OmegaConf; ConfigError (prefixed by ``where``) names the key."""
    flat = flatten(layer)
    try:
        merged = OmegaConf.merge(node, layer)
    except ConfigKeyError as exc:
        key = _field_key(exc.full_key)
        raise ConfigError(f"{where}unknown key {key!r}{schema.suggest(key)}", key) from None
    except ValidationError as exc:
        key = _field_key(exc.full_key)
        error = _value_error(schema, key, flat.get(key), where)
        raise error or ConfigError(f"{where}{key}: {exc.msg}", key) from None
    assert isinstance(merged, DictConfig)
    for key, raw in flat.items():
        stored = OmegaConf.select(merged, key)
        if isinstance(stored, DictConfig | ListConfig):
            stored = OmegaConf.to_container(stored)
        error = _value_error(schema, key, raw, where) if _coerced(raw, stored) else None
        if error is not None:
            raise error
    return merged


def _to_object(node: DictConfig, cls: type[S], where: str, written: Mapping[str, object]) -> S:
    try:
        out = OmegaConf.to_object(node)
    except MissingMandatoryValue as exc:
        key = _field_key(exc.full_key)
        raise ConfigError(f"{key} has no value: {where} must set it", key) from None
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{where}: {exc}") from None
    assert isinstance(out, cls)
    check_section(out, written=written)
    return out


def compose(algo: str, task: str, sim: str, overrides: Sequence[str] = ()) -> ComposedConfig:
    """Compose and validate the owner-routed configuration (no host prerequisites checked).

    Returns the frozen ``ComposedConfig``; raises ConfigError naming the first problem."""
    layers, chain = owner_layers(algo, task, sim)
    schema = Schema.of(
        template(Settings, algo=template(LEARNER_SECTIONS[algo]), task=template(TASK_SECTIONS[task]))
    )
    node = OmegaConf.structured(schema.template)
    written: dict[str, object] = {}
    for layer in layers:
        node = merge_layer(node, layer.data, schema, f"{layer.path}: ")
        written.update(flatten(layer.data))
    for item in overrides:
        key, raw = split_override(item)
        check_override_key(key, schema)
        value = parse_override_value(item, raw)
        node = merge_layer(node, _nest(key, value), schema)
        written[key] = value
    settings = _to_object(node, Settings, "the owner YAMLs " + ", ".join(str(p) for p in chain), written)
    _check_owner_identity(settings, algo, task, sim)
    _check_slot_rows(settings)
    owner = OwnerConfig(
        algo=algo,
        task=task,
        sim=sim,
        chain=[p.stem for p in chain],
        files=[str(p.relative_to(CONF_ROOT.parent.parent)) for p in chain],
    )
    return ComposedConfig(**shallow_fields(settings), owner=owner, resolved=resolve(settings))


def _check_owner_identity(settings: Settings, algo: str, task: str, sim: str) -> None:
    for key, value, flag, want in (
        ("algo.name", settings.algo.name, "--algo", algo),
        ("task.name", settings.task.name, "--task", task),
        ("training.sim_backend", settings.training.sim_backend, "--sim", sim),
    ):
        if value != want:
            raise ConfigError(f"the owner YAMLs set {key}={value!r} for the owner route {flag} {want}", key)


def _check_slot_rows(settings: Settings) -> None:
    rows, num_envs = settings.training.replay_ingress_slot_rows, settings.algo.num_envs
    if rows is not None and num_envs % rows != 0:
        raise ConfigError(
            f"training.replay_ingress_slot_rows={rows} must divide algo.num_envs={num_envs} "
            "(null means one slot per vector step)",
            "training.replay_ingress_slot_rows",
        )


def physics_device(training: TrainingConfig) -> str:
    """Where the backend's tensors live: MuJoCo CPU is a host bridge; MJWarp runs on its configured device."""
    return training.mjwarp_device if training.sim_backend == "mjwarp" else "cpu"


def resolve(settings: Settings) -> ResolvedConfig:
    """The ``resolved`` section known at compose time."""
    training, cores = settings.training, os.cpu_count() or 1
    physics = training.physics_threads or cores
    rows = training.replay_ingress_slot_rows
    return ResolvedConfig(
        replay_ingress_slot_rows=settings.algo.num_envs if rows is None else rows,
        physics_threads=physics,
        learner_threads=resolve_learner_threads(
            training.learner_threads, training.sim_backend, physics, cores
        ),
        physics_device=physics_device(training),
    )


def load_run_config(data: Mapping[str, Any]) -> RunConfig:
    """The typed config recorded by ``RunConfig.to_dict()`` (run_config.json's ``config``, a checkpoint's
    ``config``), typed and checked again; ConfigError names the first problem."""
    owner = data.get("owner")
    algo = owner.get("algo") if isinstance(owner, Mapping) else None
    task = owner.get("task") if isinstance(owner, Mapping) else None
    if algo not in LEARNER_SECTIONS or task not in TASK_SECTIONS:
        raise ConfigError(f"recorded config: owner {owner!r} names no known --algo/--task")
    shape = template(RunConfig, algo=template(LEARNER_SECTIONS[algo]), task=template(TASK_SECTIONS[task]))
    schema = Schema.of(shape)
    node = merge_layer(OmegaConf.structured(shape), data, schema, "recorded config: ")
    return _to_object(node, RunConfig, "the recorded config", flatten(data))
