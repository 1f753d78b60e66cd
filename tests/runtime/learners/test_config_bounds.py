"""The composer is never looser than the learner: a learner built with any ``algo.*`` field at either end
of its config bound (the nearest float inside an exclusive one) constructs and takes a finite step."""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from typing import Any

import pytest
import torch

from soakbench.runtime.config import ConfigError, compose
from soakbench.runtime.config.fields import Spec, field_type, spec_of
from soakbench.runtime.config.sections import LEARNER_SECTIONS
from soakbench.runtime.learners import build_learner
from soakbench.runtime.learners.flashsac import FlashSACLearner, flashsac_step
from soakbench.runtime.learners.sac import SACLearner, sac_step

from .conftest import ACT, OBS, toy_batch

# Tiny networks, so that a bound on one width or depth stays cheap to build; every other field at default.
SMALL: dict[str, dict[str, Any]] = {
    "sac": {"actor_hidden": [8], "critic_hidden": [8], "batch_size": 16},
    "flashsac": {
        "actor_hidden_dim": 4,
        "critic_hidden_dim": 4,
        "actor_blocks": 1,
        "critic_blocks": 1,
        "batch_size": 16,
    },
}


def _edges(spec: Spec, integer: bool) -> list[tuple[float, float]]:
    """(the extreme allowed value, the nearest refused one) at each bounded end of ``spec``."""
    b = spec.bounds
    assert b is not None
    out: list[tuple[float, float]] = []
    for value, is_open, outward in ((b.low, b.low_open, -math.inf), (b.high, b.high_open, math.inf)):
        if value is None:
            continue
        if integer:
            out.append((int(value), int(value) + (1 if outward > 0 else -1)))
        elif is_open:
            out.append((math.nextafter(float(value), -outward), float(value)))
        else:
            out.append((float(value), math.nextafter(float(value), outward)))
    return out


def _cases() -> list[tuple[str, str, Any, Any]]:
    """(algo, field, value at the bound, value just past it), lists as one-item lists."""
    cases: list[tuple[str, str, Any, Any]] = []
    for algo, cls in LEARNER_SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            spec, kind = spec_of(f), field_type(hints[f.name])
            if spec.bounds is None:
                continue
            for inside, outside in _edges(spec, (kind.item or kind).base is int):
                if kind.base is list:
                    cases.append((algo, f.name, [inside], [outside]))
                else:
                    cases.append((algo, f.name, inside, outside))
    return cases


CASES = _cases()
IDS = [f"{algo}-{name}={inside}" for algo, name, inside, _ in CASES]


def _overrides(values: dict[str, Any]) -> list[str]:
    return [f"algo.{key}={json.dumps(value)}" for key, value in values.items()]


def test_the_table_covers_every_bounded_learner_field() -> None:
    names = {(algo, name) for algo, name, _, _ in CASES}
    for algo, cls in LEARNER_SECTIONS.items():
        bounded = {f.name for f in dataclasses.fields(cls) if spec_of(f).bounds is not None}
        assert bounded and {(algo, n) for n in bounded} <= names


@pytest.mark.parametrize(("algo", "name", "inside", "outside"), CASES, ids=IDS)
def test_learner_at_a_config_bound_builds_and_steps(algo: str, name: str, inside: Any, outside: Any) -> None:
    cfg = compose(algo, "g1_walk_flat", "mujoco", _overrides({**SMALL[algo], name: inside}))
    assert getattr(cfg.algo, name) == inside
    learner = build_learner(cfg.algo, OBS, ACT, torch.device("cpu"))
    batch = toy_batch(16)
    noise = torch.zeros(16, ACT)
    if isinstance(learner, SACLearner):
        _, metrics = sac_step(learner.nets, learner.hp, learner.state, batch, noise, noise)
    else:
        assert isinstance(learner, FlashSACLearner)
        learner.add_transitions(batch.obs, batch.action, batch.reward, batch.next_obs, batch.terminated)
        _, metrics = flashsac_step(learner.nets, learner.hp, learner.state, batch, noise, noise)
    assert all(math.isfinite(float(v)) for v in metrics.values()), metrics


@pytest.mark.parametrize(("algo", "name", "inside", "outside"), CASES, ids=IDS)
def test_just_past_a_bound_does_not_compose(algo: str, name: str, inside: Any, outside: Any) -> None:
    with pytest.raises(ConfigError, match=rf"algo\.{name}"):
        compose(algo, "g1_walk_flat", "mujoco", _overrides({name: outside}))
