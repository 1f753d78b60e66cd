"""The survival verdict (harness.soak.verdicts.survival) through the one judgement: samples, the limits
the monitor recorded and ``--must-survive`` in; a verdict per class and a pass-table row out."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from soakbench.harness.soak.outcome import EXIT_CODES
from soakbench.harness.soak.verdicts.gates import Gates
from soakbench.harness.soak.verdicts.judgement import RecordedFacts, judge
from soakbench.harness.soak.verdicts.survival import assess_survival, horizon_hours

GIB = float(1 << 30)
MIB = float(1 << 20)
HOUR = 3600.0


def _limit(
    resource: str, value: int | None, *, in_use: int | None = None, scope: str = "tree"
) -> dict[str, Any]:
    return {
        "resource": resource,
        "scope": scope,
        "value": value,
        "source": f"test {resource}",
        "in_use": in_use,
        "reason": None if value is not None else "not readable here",
        "path": None,
    }


def _samples(
    *,
    seconds: int = 600,
    pss=lambda t: 1 * GIB,
    fds=lambda t: 100.0,
    fd_limit: int = 1024,
    rng_seed: int = 0,
) -> list[dict[str, Any]]:
    rng = np.random.default_rng(rng_seed)
    out = []
    for second in range(seconds):
        t = float(second)
        level = float(pss(t)) + float(rng.normal(0.0, 2 * MIB))
        proc = {
            "pid": 4242,
            "start_ticks": 1,
            "role": "collector",
            "name": "collector",
            "cmdline": ["python", "collector.py"],
            "fds": {"total": int(fds(t))},
            "fd_limit": fd_limit,
            "map_count": 80,
        }
        out.append(
            {
                "t": t,
                "totals": {
                    "pss_bytes": level,
                    "uss_bytes": level,
                    "rss_bytes": level,
                    "process_count": 1,
                    "threads": 4,
                    "zombies": 0,
                    "eventfd": 0,
                    "shared_memory_fd": 0,
                    "fd_total": int(fds(t)),
                    "gpu_memory_bytes": 0,
                },
                "processes": [proc],
                "progress": {"iteration": second * 10, "total_env_steps": second * 1000},
            }
        )
    return out


def _facts(limits: list[dict[str, Any]] | None) -> RecordedFacts:
    return RecordedFacts(
        mode="monitor",
        root_pid=4242,
        trainer_returncode=0,
        monitor_failure=None,
        duration_s=600.0,
        startup_end_t=0.0,
        limits=None if limits is None else {"read_at_wall": 0.0, "limits": limits},
    )


LIMITS = [_limit("memory", int(16 * GIB), in_use=int(8 * GIB)), _limit("map_count", 65530, scope="process")]


def _judge(samples, *, limits=LIMITS, target_h: float | None = 72.0, warmup_s: float | None = None):
    gates = Gates(min_duration_s=0.0, min_trend_samples=8, must_survive_s=None if target_h is None else target_h * HOUR,
                  warmup_s=warmup_s)  # fmt: skip
    return judge(samples, facts=_facts(limits), gates=gates)


def _row(judgement, name: str = "survival"):
    return next(c for c in judgement.rows if c.name == name)


def _class(judgement, name: str):
    assert judgement.survival is not None
    return next(c for c in judgement.survival.classes if c.resource_class == name)


def test_a_healthy_run_survives_a_target_its_headroom_carries():
    judgement = _judge(_samples(), target_h=24.0)
    assert _class(judgement, "pss").verdict == "survives"
    assert _class(judgement, "fds").verdict == "survives"
    assert judgement.survival.verdict == "survives"
    assert _row(judgement).result == "pass"
    assert judgement.status == "passed"


def test_a_memory_leak_that_exhausts_the_headroom_before_the_target_fails_and_names_the_limit():
    leak = 1 * GIB / HOUR  # 8 GiB of headroom: dead in about 8 h, target 72 h
    judgement = _judge(_samples(pss=lambda t: 1 * GIB + leak * t))
    pss = _class(judgement, "pss")
    assert pss.verdict == "fails"
    assert pss.hours_to_exhaustion_lower is not None and pss.hours_to_exhaustion_lower < 10.0
    assert judgement.status == "failed"
    assert judgement.failure_classification == "resource_exhaustion"
    reason = judgement.evaluation.failure_reason or ""
    assert "criterion survival failed" in reason
    assert "pss of the tree" in reason and "test memory" in reason and "no sooner than" in reason
    assert EXIT_CODES[judgement.status] == 1


def test_an_fd_leak_fails_against_the_process_own_limit_naming_pid_and_role():
    judgement = _judge(_samples(fds=lambda t: 100.0 + t / 6.0, fd_limit=256))  # 600 fds/h, 156 left
    fds = _class(judgement, "fds")
    assert (fds.verdict, fds.scope, fds.role, fds.limit) == ("fails", "4242", "collector", 256.0)
    assert "pid 4242 (collector)" in (judgement.evaluation.failure_reason or "")
    assert fds.attribution == ("process: python collector.py",)


def test_the_same_leak_under_a_large_limit_survives():
    judgement = _judge(_samples(fds=lambda t: 100.0 + t / 60.0, fd_limit=1_048_576))  # 60 fds/h
    assert _class(judgement, "fds").verdict == "survives"


def test_a_bound_that_straddles_the_lethal_rate_is_inconclusive_with_the_length_that_would_decide():
    # 10 fds/h against 924 fds of headroom and 72 h: lethal 12.8/h, but 10 minutes bound it at 18/h
    judgement = _judge(_samples(fds=lambda t: 100.0))
    fds = _class(judgement, "fds")
    assert fds.verdict == "inconclusive"
    assert fds.decide_after_seconds is not None and fds.decide_after_seconds > 600.0
    assert judgement.survival.verdict == "inconclusive"
    assert _row(judgement).result == "inconclusive"
    assert judgement.status == "inconclusive"
    assert judgement.failure_classification is None
    assert EXIT_CODES[judgement.status] == 3


def test_without_a_target_every_class_is_projected_and_the_row_does_not_apply():
    judgement = _judge(_samples(pss=lambda t: 1 * GIB + 0.5 * GIB / HOUR * t), target_h=None)
    pss = _class(judgement, "pss")
    assert pss.verdict == "projected"
    assert pss.hours_to_exhaustion_lower is not None and 10.0 < pss.hours_to_exhaustion_lower < 20.0
    assert pss.units_to_exhaustion_lower["iterations"] == pytest.approx(
        pss.hours_to_exhaustion_lower * 36000.0, rel=0.02
    )
    assert _row(judgement).result == "not_applicable"
    assert judgement.status == "passed"
    assert horizon_hours(judgement.survival) is not None


def test_a_limit_that_could_not_be_read_is_not_observable_never_a_guess():
    judgement = _judge(_samples(), limits=[_limit("memory", None)], target_h=24.0)
    pss = _class(judgement, "pss")
    assert pss.verdict == "not_observable"
    assert "not readable here" in pss.limit_source


def test_a_filled_buffer_is_cut_as_warm_up_and_survives():
    fill = lambda t: 1 * GIB + min(t, 150.0) * 20 * MIB  # noqa: E731 — 3 GiB in 150 s, then flat
    judgement = _judge(_samples(pss=fill), target_h=72.0)
    pss = _class(judgement, "pss")
    assert pss.cut is not None and pss.cut.method == "change_point"
    assert pss.verdict == "survives"


def test_a_declared_warmup_is_used_and_recorded():
    fill = lambda t: 1 * GIB + min(t, 150.0) * 20 * MIB  # noqa: E731
    judgement = _judge(_samples(pss=fill), warmup_s=200.0)
    pss = _class(judgement, "pss")
    assert pss.cut is not None and (pss.cut.method, pss.cut.t_cut) == ("declared", 200.0)
    assert judgement.survival.to_json()["warmup_seconds"] == 200.0


def test_an_artifact_without_a_survival_section_is_judged_without_the_row():
    samples = _samples()
    facts = _facts(LIMITS)
    old = RecordedFacts(**{**facts.__dict__, "absent": frozenset({"survival"})})
    judgement = judge(samples, facts=old, gates=Gates(min_duration_s=0.0, min_trend_samples=8))
    assert judgement.survival is None
    assert "survival" not in [c.name for c in judgement.rows]


def test_no_window_under_a_target_is_inconclusive():
    survival = assess_survival(_samples(), limits=None, window=None, target_s=3600.0, warmup_s=None)
    assert survival.verdict == "inconclusive" and survival.classes == ()


def test_a_cgroup_whose_other_processes_fill_it_leaves_the_room_its_sampled_working_set_leaves():
    """The tree holds 1 GiB, but the cgroup's working set (the monitor and every other process in it,
    sampled from the limit's usage file) reaches 15.5 GiB of 16: only 0.5 GiB is left, not the 8 GiB that
    the use at the start plus the tree's growth would say."""
    memory = {
        **_limit("memory", int(16 * GIB), in_use=int(8 * GIB)),
        "usage_file": "/cg/memory.usage_in_bytes",
    }
    samples = _samples()
    for sample in samples:
        sample["domains"] = {"memory": int(15.5 * GIB)}
    pss = _class(_judge(samples, limits=[memory]), "pss")
    assert pss.headroom == pytest.approx(0.5 * GIB, rel=0.01)
    assert _class(_judge(_samples(), limits=[memory]), "pss").headroom == pytest.approx(8 * GIB, rel=0.01)


def _carried(samples: list[dict[str, Any]], *, period: int) -> list[dict[str, Any]]:
    """``samples`` as the rollup schedule records a large process read every ``period`` samples: its
    PSS (and the tree's) carried between reads, with the carried value's age."""
    held = samples[0]["totals"]["pss_bytes"]
    for index, sample in enumerate(samples):
        age = index % period
        if age == 0:
            held = sample["totals"]["pss_bytes"]
        sample["totals"]["pss_bytes"] = held
        sample["processes"][0].update(pss_bytes=held, rollup_age_samples=age)
    return samples


def test_a_level_read_too_few_times_after_the_warm_up_cannot_survive():
    """Two reads in ten minutes (one once the warm-up cut takes the first) carry no slope: the run is inconclusive, with the soak length that would
    hold enough reads; the same level read at every sample survives."""
    judgement = _judge(_carried(_samples(), period=300), target_h=24.0)
    pss = _class(judgement, "pss")
    assert pss.verdict == "inconclusive"
    reads = re.match(r"only (\d+) fresh read\(s\) of the level after the warm-up", pss.reason)
    assert reads is not None and int(reads.group(1)) in (1, 2), pss.reason  # t=0 (if not cut) and t=300
    assert pss.decide_after_seconds is not None
    assert pss.decide_after_seconds >= 600.0
    assert judgement.survival.verdict == "inconclusive"
    assert _class(_judge(_carried(_samples(), period=1), target_h=24.0), "pss").verdict == "survives"


def test_a_tree_sum_is_read_when_the_members_holding_most_of_it_are():
    from soakbench.harness.soak.verdicts.exhaustion_series import tree_reads

    def sample(*members: tuple[int | None, int]) -> dict[str, Any]:
        return {"processes": [{"pss_bytes": v, "rollup_age_samples": age} for v, age in members]}

    # a 900 carried while the 100 is read: no new observation of the sum; the 900 read: one
    marks = tree_reads(
        [sample((900, 0), (100, 0)), sample((900, 7), (100, 0)), sample((900, 0), (100, 3))], "pss_bytes"
    )
    assert marks.tolist() == [True, False, True]
    # two ranks of 350 each and two collectors of 100, read at different samples (the schedule staggers
    # them): the sum is renewed once both ranks were read since its last renewal, not never
    staggered = [
        sample((350, 0), (350, 0), (100, 0), (100, 0)),
        sample((350, 0), (350, 1), (100, 1), (100, 1)),
        sample((350, 1), (350, 2), (100, 2), (100, 2)),
        sample((350, 2), (350, 0), (100, 1), (100, 0)),
        sample((350, 0), (350, 1), (100, 2), (100, 1)),
        sample((350, 1), (350, 0), (100, 0), (100, 2)),
    ]
    assert tree_reads(staggered, "pss_bytes").tolist() == [True, False, False, True, False, True]
    assert tree_reads([sample((None, 4))], "pss_bytes").tolist() == [True]  # nothing to carry: a read
