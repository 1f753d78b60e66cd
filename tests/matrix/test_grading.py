"""The grade policy on synthetic policies and evidence facts (pure; no git, no files)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from soakbench.matrix.grading.policy import grade_cell
from soakbench.matrix.model import (
    EXPECTED_INPUTS,
    RECORDED_INPUTS,
    BoundTally,
    CellKey,
    CellPolicy,
    CellResult,
    EvidenceFacts,
    InputManifest,
    Recommendation,
    SoakBudget,
    SoakSurvival,
    unrecorded_inputs,
)

KEY = CellKey("sac", "g1_walk_flat", "mujoco", "linux-cpu")
CANON = SoakBudget(3600, 2048, 1000)
POLICY = CellPolicy(
    key=KEY,
    test_lane="cpu",
    min_passed=1,
    probe_required=True,
    soak=SoakBudget(60, 8, 100),
    recommendation=Recommendation("recommend", "2025-01-31", "reference path"),
)
JUNIT = EvidenceFacts(
    id="junit-a", kind="junit", file="f", platform="linux-cpu", lane="cpu", commit="c" * 40, dirty=False,
    passed=True, status_detail="ok", fresh=True, tests={("sac", "g1_walk_flat", "mujoco", 1): BoundTally(passed=2)},
    bound_kinds={("sac", "g1_walk_flat", "mujoco", 1): frozenset({"train", "fault", "soak"})},
)  # fmt: skip
PROBE = EvidenceFacts(
    id="probe-a", kind="probe", file="f", platform="linux-cpu", lane=None, commit="c" * 40, dirty=False,
    passed=True, status_detail="ok", fresh=True, covers=((None, "g1_walk_flat", "mujoco"),),
)  # fmt: skip
SOAK = EvidenceFacts(
    id="soak-a", kind="soak", file="f", platform="linux-cpu", lane=None, commit="c" * 40, dirty=False,
    passed=True, status_detail="ok", fresh=True, covers=(("sac", "g1_walk_flat", "mujoco"),),
    duration_s=4000.0, num_envs=2048, iterations=1000,
)  # fmt: skip
ALL = (JUNIT, PROBE, SOAK)


def grade(
    policy: CellPolicy = POLICY,
    evidence: Sequence[EvidenceFacts] = ALL,
    registered: str | None = None,
    configured: str | None = None,
) -> CellResult:
    return grade_cell(policy, registered, configured, evidence, CANON)


def test_every_grade_is_reachable() -> None:
    assert grade(replace(POLICY, unsupported_reason="needs CUDA")).grade == "Unsupported"
    assert grade(registered="task 'x' is not registered").grade == "Unsupported"
    assert grade(configured="not valid on linux-cpu: needs CUDA").grade == "Registered"
    assert grade(evidence=()).grade == "Configured"
    assert grade(evidence=(JUNIT,)).grade == "Tested"
    assert grade(policy=replace(POLICY, recommendation=None)).grade == "Benchmarked"
    result = grade()
    assert result.grade == "Recommended" and result.blockers == ()


@pytest.mark.parametrize(
    ("evidence", "expected_grade", "verdict_start"),
    [
        ((JUNIT, PROBE, replace(SOAK, passed=False, status_detail="soak status failed")), "Tested", "failing"),
        ((JUNIT, PROBE, replace(SOAK, dirty=True)), "Tested", "dirty tree"),
        ((JUNIT, PROBE, replace(SOAK, platform="linux-cuda")), "Tested", "wrong platform"),
        ((JUNIT, PROBE, replace(SOAK, fresh=False)), "Tested", "historical"),
        ((JUNIT, PROBE, replace(SOAK, problems=("status: not valid",))), "Tested", "invalid"),
        ((JUNIT, PROBE, replace(SOAK, duration_s=10.0)), "Tested", "soak under the cell's budget"),
        ((JUNIT, replace(PROBE, fresh=False), SOAK), "Tested", "historical"),
        ((replace(JUNIT, lane="cuda"), PROBE, SOAK), "Configured", "wrong lane"),
        ((replace(JUNIT, dirty=True), PROBE, SOAK), "Configured", "dirty tree"),
        ((replace(JUNIT, tests={("sac", "g1_walk_flat", "mujoco", 1): BoundTally(passed=3, failed=1)}),), "Configured",
         "bound tests failed"),
        ((replace(JUNIT, tests={("sac", "g1_walk_flat", "mujoco", 1): BoundTally(skipped=3)}),), "Configured",
         "0 bound tests passed"),
    ],
)  # fmt: skip
def test_demotion_paths(evidence: tuple[EvidenceFacts, ...], expected_grade: str, verdict_start: str) -> None:
    result = grade(evidence=evidence)
    assert result.grade == expected_grade
    assert any(v.verdict.startswith(verdict_start) and not v.counts for v in result.evidence), result.evidence


def test_missing_probe_blocks_benchmarked_only_when_required() -> None:
    result = grade(evidence=(JUNIT, SOAK))
    assert result.grade == "Tested"
    assert "probe" in dict(result.blockers)["Benchmarked"][0]
    assert grade(policy=replace(POLICY, probe_required=False), evidence=(JUNIT, SOAK)).grade == "Recommended"


def test_recommended_needs_record_decision_and_canonical_soak() -> None:
    no_record = grade(policy=replace(POLICY, recommendation=None))
    assert dict(no_record.blockers)["Recommended"] == ("no recommendation record in the inventory",)
    withheld = grade(
        policy=replace(POLICY, recommendation=Recommendation("withhold", "2025-02-01", "flaky GPU"))
    )
    assert withheld.grade == "Benchmarked"
    short = grade(evidence=(JUNIT, PROBE, replace(SOAK, duration_s=600.0)))
    assert short.grade == "Benchmarked"
    assert "canonical budget" in dict(short.blockers)["Recommended"][0]


def test_blockers_name_every_higher_grade() -> None:
    result = grade(configured="not valid on linux-cpu: x", evidence=())
    assert [g for g, _ in result.blockers] == ["Configured", "Tested", "Benchmarked", "Recommended"]
    assert result.blockers[0][1] == ("not valid on linux-cpu: x",)


def test_a_failing_bound_test_in_any_counted_lane_run_blocks_tested() -> None:
    failing = replace(
        JUNIT, id="junit-b", tests={("sac", "g1_walk_flat", "mujoco", 1): BoundTally(passed=1, failed=1)}
    )
    assert grade(evidence=(JUNIT, failing)).grade == "Configured"


def test_unsupported_cell_that_composes_gets_a_note() -> None:
    result = grade(policy=replace(POLICY, unsupported_reason="needs CUDA"))
    assert result.notes and "not enforced" in result.notes[0]
    assert grade(policy=replace(POLICY, unsupported_reason="x"), configured="fails").notes == ()


CPU_POLICY = replace(
    POLICY, min_passed=3, test_kinds=("train", "fault", "soak"), soak=SoakBudget(600, 64, 5000)
)
CPU_SOAK = replace(SOAK, duration_s=650.0, num_envs=64, iterations=6000)


def _junit(**tally: int) -> EvidenceFacts:
    return replace(JUNIT, tests={("sac", "g1_walk_flat", "mujoco", 1): BoundTally(**tally)})


NO_TESTED = (
    "no fresh, clean linux-cpu JUnit evidence (lane 'cpu') that holds every test marked cell(sac, g1_walk_flat, "
    "mujoco) at its commit, all passed, at least 3, none failed, skipped or xfailed"
)


@pytest.mark.parametrize(
    ("tally", "verdict", "blocker"),
    [
        ({"passed": 3, "skipped": 1}, "bound tests did not all pass: 1 skipped or xfailed (3 passed)", NO_TESTED),
        ({"passed": 2}, "2 bound tests passed, 3 needed", NO_TESTED),
        ({"passed": 5, "errors": 1}, "bound tests failed: 0 failed, 1 errors", "bound tests failed in junit-a"),
    ],
)  # fmt: skip
def test_tested_needs_every_bound_test_passed_and_the_minimum(
    tally: dict[str, int], verdict: str, blocker: str
) -> None:
    result = grade(CPU_POLICY, (_junit(**tally), PROBE, CPU_SOAK))
    assert result.grade == "Configured"
    assert [v.verdict for v in result.evidence if v.kind == "junit"] == [verdict]
    assert dict(result.blockers)["Tested"] == (blocker,)


def test_tested_with_all_bound_tests_passed() -> None:
    result = grade(CPU_POLICY, (_junit(passed=3), PROBE, CPU_SOAK))
    assert result.grade == "Benchmarked"  # CPU_SOAK is under the canonical budget
    (junit,) = [v for v in result.evidence if v.kind == "junit"]
    assert junit.counts and junit.verdict == (
        f"counts: all 3 bound tests passed, every test bound at {'c' * 12} among them "
        "(none failed, skipped or xfailed)"
    )


def test_a_summary_without_a_test_bound_at_its_commit_does_not_count() -> None:
    binding = KEY.binding()
    lacking = replace(_junit(passed=3), missing_tests={binding: ("tests.t::test_fault",)})
    result = grade(CPU_POLICY, (lacking, PROBE, CPU_SOAK))
    assert result.grade == "Configured"
    (junit,) = [v for v in result.evidence if v.kind == "junit"]
    assert (
        junit.verdict
        == f"incomplete: 1 test(s) bound at {'c' * 12} missing from the lane: tests.t::test_fault"
    )
    assert dict(result.blockers)["Tested"] == (f"{NO_TESTED}; incomplete: junit-a ({junit.verdict})",)


def test_every_kind_the_cell_requires_must_be_among_the_bound_tests() -> None:
    two_kinds = replace(_junit(passed=3), bound_kinds={KEY.binding(): frozenset({"train", "soak"})})
    result = grade(CPU_POLICY, (two_kinds, PROBE, CPU_SOAK))
    (junit,) = [v for v in result.evidence if v.kind == "junit"]
    assert junit.verdict == f"incomplete: no test of kind fault is bound to this cell at {'c' * 12}"


@pytest.mark.parametrize(
    ("soak", "shortfall"),
    [
        (replace(CPU_SOAK, duration_s=599.0), "duration 599.0 s < 600 s"),
        (replace(CPU_SOAK, duration_s=61.0, num_envs=16), "duration 61.0 s < 600 s, num_envs 16 < 64"),
        (replace(CPU_SOAK, iterations=4000), "iterations 4000 < 5000"),
    ],
)
def test_benchmarked_on_cpu_needs_600_s_and_64_envs(soak: EvidenceFacts, shortfall: str) -> None:
    result = grade(CPU_POLICY, (_junit(passed=3), PROBE, soak))
    assert result.grade == "Tested"
    (verdict,) = [v for v in result.evidence if v.kind == "soak"]
    assert not verdict.counts and verdict.verdict == f"soak under the cell's budget: {shortfall}"
    assert dict(result.blockers)["Benchmarked"] == (
        f"no fresh, clean, passing linux-cpu soak artifact meeting the cell budget (under budget: {SOAK.id})",
    )
    assert grade(CPU_POLICY, (_junit(passed=3), PROBE, CPU_SOAK)).grade == "Benchmarked"


def test_evidence_names_the_kinds_of_input_its_manifest_does_not_record() -> None:
    old = replace(CPU_SOAK, inputs=InputManifest({"a.py": "b"}, {}))  # files and distributions only
    (soak,) = [v for v in grade(CPU_POLICY, (_junit(passed=3), PROBE, old)).evidence if v.kind == "soak"]
    assert soak.unrecorded == ("interpreter", "native libraries")
    whole = InputManifest({"a.py": "b"}, {}, recorded=frozenset(RECORDED_INPUTS))
    assert unrecorded_inputs("soak", whole) == () and unrecorded_inputs("junit", whole) == ()
    assert unrecorded_inputs("junit", None) == EXPECTED_INPUTS["junit"]


SURVIVING_POLICY = replace(
    POLICY, soak=SoakBudget(60, 8, 100, must_survive_s=8 * 3600.0), recommendation=None
)


@pytest.mark.parametrize(
    ("survival", "why"),
    [
        (None, "it ran without --must-survive"),
        (
            SoakSurvival(target_s=None, verdict="no_target", horizon_hours=40.0),
            "it ran without --must-survive",
        ),
        (SoakSurvival(target_s=3600.0, verdict="survives", horizon_hours=40.0), "its target was 1 h"),
        (
            SoakSurvival(target_s=8 * 3600.0, verdict="inconclusive", horizon_hours=3.0),
            "verdict is inconclusive",
        ),
    ],
)
def test_a_cell_that_declares_must_survive_needs_a_soak_that_survives_it(
    survival: SoakSurvival | None, why: str
) -> None:
    result = grade(SURVIVING_POLICY, (JUNIT, PROBE, replace(SOAK, survival=survival)))
    assert result.grade == "Tested"
    (verdict,) = [v for v in result.evidence if v.kind == "soak"]
    assert not verdict.counts
    assert verdict.verdict.startswith("soak does not vouch for must_survive 8 h") and why in verdict.verdict


def test_a_soak_that_survives_the_declared_target_counts_and_says_its_horizon() -> None:
    vouching = SoakSurvival(target_s=72 * 3600.0, verdict="survives", horizon_hours=131.0)
    result = grade(SURVIVING_POLICY, (JUNIT, PROBE, replace(SOAK, survival=vouching)))
    assert result.grade == "Benchmarked"
    (verdict,) = [v for v in result.evidence if v.kind == "soak"]
    assert verdict.counts and "survives 72 h (horizon >= 131 h on its host)" in verdict.verdict
    undeclared = replace(SURVIVING_POLICY, soak=SoakBudget(60, 8, 100))
    assert grade(undeclared, (JUNIT, PROBE, SOAK)).grade == "Benchmarked"  # nothing declared: as before
