"""The field declarations and the one bound checker: every kind of bound, choices, nullable, lists; the
sections' own declarations (units, docstrings, registries); the typed config's behaviour as an object."""

from __future__ import annotations

import dataclasses
import pickle
import shutil
import typing
from pathlib import Path
from typing import Any, Literal

import pytest

from soakbench.runtime.backends import BACKENDS
from soakbench.runtime.config import (
    ALGOS,
    ConfigError,
    compose,
    composition,
    load_run_config,
    validate_for_run,
)
from soakbench.runtime.config.fields import (
    FrozenSettingError,
    Interval,
    above,
    at_least,
    check_section,
    closed,
    field_type,
    left_open,
    open_interval,
    owner_setting,
    section,
    setting,
    spec_of,
)
from soakbench.runtime.config.sections import (
    LEARNER_SECTIONS,
    TASK_SECTIONS,
    CudaProcessSharing,
    FlashSacConfig,
    G1MotionTrackingConfig,
    G1WalkFlatConfig,
    HostResolvedConfig,
    MpsValidation,
    OwnerConfig,
    SacConfig,
    Section,
    Settings,
    TrainingConfig,
)
from soakbench.runtime.tasks import TASKS
from tests.runtime._platforms import LINUX_CPU


@section
class Kinds(Section):
    """One field of every kind the checker knows."""

    count: int = setting(default=2, doc="closed integer range", unit="slots", bounds=closed(1, 16))
    floor: int = setting(default=2, doc="integer lower bound", unit="rows", bounds=at_least(2))
    positive: int | None = setting(
        default=None, doc="nullable positive integer", unit="rows", bounds=at_least(1)
    )
    rate: float = setting(default=0.5, doc="open interval", unit="1", bounds=open_interval(0.0, 1.0))
    tau: float = setting(default=1.0, doc="left-open interval", unit="1", bounds=left_open(0.0, 1.0))
    lr: float = setting(default=1e-3, doc="exclusive lower bound", unit="1", bounds=above(0.0))
    clip: float | None = setting(
        default=None, doc="nullable exclusive lower bound", unit="1", bounds=above(0.0)
    )
    anything: float | None = setting(default=None, doc="nullable, unbounded", unit="1")
    flag: bool = setting(default=False, doc="switch")
    device: Literal["cpu", "cuda"] = setting(default="cpu", doc="choice")
    sharing: Literal["mps"] | None = setting(default=None, doc="nullable choice")
    path: str | None = setting(default=None, doc="absolute path", absolute_path=True)
    widths: list[int] = owner_setting(doc="non-empty list", unit="units", bounds=at_least(1), items=(1, None))
    pair: list[float] = owner_setting(doc="exactly two numbers", unit="m/s", items=(2, 2))


@section
class Holder(Section):
    inner: Kinds


VALID = Kinds(widths=[4], pair=[0.0, 1.0])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("count", 1, None),
        ("count", 16, None),
        ("count", 0, r"count=0 is out of range; allowed: 1\.\.16"),
        ("count", 17, r"allowed: 1\.\.16"),
        ("count", True, "count must be an integer, got True"),
        ("count", 2.0, "count must be an integer"),
        ("floor", 2, None),
        ("floor", 1, "allowed: >= 2"),
        ("positive", None, None),
        ("positive", 1, None),
        ("positive", 0, "allowed: null or a positive integer"),
        ("positive", "3", "positive must be null or an integer, got '3'"),
        ("rate", 0.25, None),
        ("rate", 0.0, r"allowed: \(0\.0, 1\.0\)"),
        ("rate", 1.0, r"allowed: \(0\.0, 1\.0\)"),
        ("rate", float("nan"), "rate must be a finite number"),
        ("rate", "x", "rate must be a number, got 'x'"),
        ("rate", True, "rate must be a number"),
        ("tau", 1.0, None),
        ("tau", 1, None),  # an integer is a number
        ("tau", 0.0, r"allowed: \(0\.0, 1\.0\]"),
        ("lr", 5e-324, None),
        ("lr", 0.0, "allowed: > 0.0"),
        ("lr", float("inf"), "lr must be a finite number"),
        ("clip", None, None),
        ("clip", 0.0, "allowed: null or > 0.0"),
        ("clip", float("inf"), "clip must be null or a finite number"),
        ("anything", -1e9, None),
        ("anything", "low", "anything must be null or a finite number"),
        ("flag", True, None),
        ("flag", 1, "flag must be true or false, got 1"),
        ("flag", "true", "flag must be true or false"),
        ("device", "cuda", None),
        ("device", "tpu", "device='tpu' is not allowed; allowed: cpu, cuda"),
        ("device", None, r"device must be cpu \| cuda, got null"),
        ("sharing", "mps", None),
        ("sharing", "nccl", "allowed: null, mps"),
        ("path", "/abs/run", None),
        ("path", "relative/run", "path must be an absolute path, got 'relative/run'"),
        ("widths", [1, 64], None),
        ("widths", [], "widths must be a non-empty list of integers >= 1"),
        ("widths", [0], "widths must be a non-empty list of integers >= 1, got \\[0\\]"),
        ("widths", [True], "widths must be a non-empty list"),
        ("widths", 256, "widths must be a non-empty list"),
        ("pair", [-1, 1], None),
        ("pair", [0.0], "pair must be a list of 2 numbers"),
        ("pair", [1.0, "x"], "pair must be a list of 2 numbers"),
    ],
)
def test_every_kind_of_bound(field: str, value: Any, message: str | None) -> None:
    candidate = dataclasses.replace(VALID, **{field: value})
    if message is None:
        check_section(candidate)
        return
    with pytest.raises(ConfigError, match=message) as caught:
        check_section(candidate)
    assert caught.value.key == field


def test_nested_sections_are_checked_with_their_dotted_key() -> None:
    with pytest.raises(ConfigError, match=r"inner\.count=0 is out of range") as caught:
        check_section(Holder(inner=dataclasses.replace(VALID, count=0)))
    assert caught.value.key == "inner.count"


@pytest.mark.parametrize(
    ("interval", "integer", "text"),
    [
        (closed(1, 16), True, "1..16"),
        (at_least(2), True, ">= 2"),
        (at_least(1), True, "a positive integer"),
        (open_interval(0.0, 1.0), False, "(0.0, 1.0)"),
        (left_open(0.0, 1.0), False, "(0.0, 1.0]"),
        (above(1e-8), False, "> 1e-08"),
        (Interval(high=3.0, high_open=True), False, "< 3.0"),
    ],
)
def test_interval_wording(interval: Interval, integer: bool, text: str) -> None:
    assert interval.describe(integer) == text


def _section_classes() -> list[type[Section]]:
    return [
        Settings,
        TrainingConfig,
        SacConfig,
        FlashSacConfig,
        G1WalkFlatConfig,
        G1MotionTrackingConfig,
        OwnerConfig,
        HostResolvedConfig,
        CudaProcessSharing,
        MpsValidation,
    ]


def test_every_numeric_field_has_a_unit_and_every_field_a_docstring() -> None:
    for cls in _section_classes():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            kind = field_type(hints[f.name])
            if isinstance(kind.base, type) and issubclass(kind.base, Section):
                continue
            spec = spec_of(f)
            assert spec.doc.strip(), f"{cls.__name__}.{f.name} has no docstring"
            numeric = kind.base in (int, float) or (kind.item is not None and kind.item.base in (int, float))
            if numeric:
                assert spec.unit, f"{cls.__name__}.{f.name} is numeric and has no unit"


def test_every_algorithm_and_task_has_its_section() -> None:
    assert tuple(LEARNER_SECTIONS) == ALGOS
    assert set(TASK_SECTIONS) == set(TASKS)


def test_composed_config_is_frozen_and_pickles() -> None:
    cfg = compose("flashsac", "g1_motion_tracking", "mjwarp", ["algo.num_envs=8"])
    with pytest.raises(FrozenSettingError, match="read-only"):
        cfg.training.no_play = True  # type: ignore[misc]  # the point: frozen at runtime too
    with pytest.raises(FrozenSettingError, match="read-only"):
        del cfg.seed
    assert pickle.loads(pickle.dumps(cfg)) == cfg  # the collector is a spawned process


def test_placement_is_resolved_at_compose_time() -> None:
    assert compose("sac", "g1_walk_flat", "mujoco").resolved.physics_device == "cpu"
    assert compose("sac", "g1_walk_flat", "mjwarp").resolved.physics_device == "cuda"
    cpu_lane = compose("sac", "g1_walk_flat", "mjwarp", ["training.mjwarp_device=cpu"])
    assert cpu_lane.resolved.physics_device == "cpu"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ('algo.batch_size="5"', "algo.batch_size must be an integer, got '5'"),  # no text-to-number
        ("algo.obs_normalization=0", "must be true or false, got 0"),  # no number-to-boolean
        ("task.semantic_name=5", "task.semantic_name must be a string, got 5"),  # no number-to-text
        ("training.learner_device=5", "allowed: auto, cpu, cuda, mps"),
        ("task.motion=motions/x.npz", "unknown setting 'task.motion'"),  # g1_walk_flat has no clip
    ],
)
def test_omegaconf_conversions_are_refused(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compose("sac", "g1_walk_flat", "mujoco", [override])


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "conf"
    shutil.copytree(composition.CONF_ROOT, root)
    monkeypatch.setattr(composition, "CONF_ROOT", root)
    return root


def test_a_layer_value_error_names_its_file(conf: Path) -> None:
    path = conf / "sac/defaults.yaml"
    path.write_text(path.read_text().replace("num_envs: 2048", "num_envs: lots"))
    with pytest.raises(
        ConfigError, match=r"sac/defaults\.yaml: algo\.num_envs must be an integer, got 'lots'"
    ):
        compose("sac", "g1_walk_flat", "mujoco")


def test_an_owner_value_no_layer_sets_fails_closed(conf: Path) -> None:
    path = conf / "sac/defaults.yaml"
    path.write_text("\n".join(line for line in path.read_text().splitlines() if "gamma" not in line))
    with pytest.raises(ConfigError, match=r"algo\.gamma has no value"):
        compose("sac", "g1_walk_flat", "mujoco")


def test_an_owner_must_name_its_own_backend(conf: Path) -> None:
    (conf / "sac/task/g1_walk_flat/mujoco.yaml").write_text("training:\n  sim_backend: mjwarp\n")
    with pytest.raises(ConfigError, match=r"training\.sim_backend='mjwarp' for the owner route --sim mujoco"):
        compose("sac", "g1_walk_flat", "mujoco")


def test_recorded_config_round_trips(tmp_path: Path) -> None:
    for algo, task, sim in (("sac", "g1_walk_flat", "mujoco"), ("flashsac", "g1_motion_tracking", "mjwarp")):
        overrides = [f"log_dir={tmp_path / algo}", "training.mjwarp_device=cpu"]
        cfg = validate_for_run(compose(algo, task, sim, overrides), LINUX_CPU)
        assert load_run_config(cfg.to_dict()) == cfg
    bad = cfg.to_dict()
    bad["algo"]["num_envs"] = "many"
    with pytest.raises(ConfigError, match=r"recorded config: algo\.num_envs must be an integer"):
        load_run_config(bad)


def test_with_num_envs_resizes_and_stays_in_bounds() -> None:
    cfg = compose(
        "sac", "g1_walk_flat", "mujoco", ["training.replay_ingress_slot_rows=64", "algo.num_envs=128"]
    )
    one = cfg.with_num_envs(1)
    assert (one.algo.num_envs, one.resolved.replay_ingress_slot_rows) == (1, 1)
    assert type(one) is type(cfg) and one.task == cfg.task
    with pytest.raises(ConfigError, match=r"algo\.num_envs=0 is out of range"):
        cfg.with_num_envs(0)


def test_run_training_refuses_a_config_that_skipped_the_host_checks(tmp_path: Path) -> None:
    from soakbench.runtime.manager.trainer import run_training

    log_dir = tmp_path / "run"
    composed = compose("sac", "g1_walk_flat", "mujoco", [f"log_dir={log_dir}"])
    with pytest.raises(TypeError, match="validate_for_run"):
        run_training(composed)  # type: ignore[arg-type]  # the point: refused at runtime too
    assert not log_dir.exists()


def test_every_backend_has_an_owner_for_every_route() -> None:
    for algo in ALGOS:
        for task in TASKS:
            for sim in BACKENDS:
                assert compose(algo, task, sim).owner.sim == sim
