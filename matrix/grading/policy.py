"""The grade policy (pure): a cell's policy + runtime facts + evidence facts -> grade, blockers, verdicts.

A cell reaches a grade only when that grade's own requirements and those of every lower grade hold.
For each grade above the one reached, ``blockers`` says why it is not met.
"""

from __future__ import annotations

from collections.abc import Sequence

from soakbench.matrix.grading.bound_tests import describe_missing
from soakbench.matrix.grading.soak_sampler import platform_note, sampler_problem
from soakbench.matrix.model import (
    GRADES,
    CellKey,
    CellPolicy,
    CellResult,
    EvidenceFacts,
    EvidenceVerdict,
    SoakBudget,
    unrecorded_inputs,
)


def freshness(ev: EvidenceFacts, key: CellKey | None = None) -> str:
    """``invalid`` (can never count), ``fresh`` or ``historical`` (an input changed since it was made),
    for cell ``key`` (a JUnit summary is judged per bound cell), or for any cell when None."""
    if ev.problems:
        return "invalid"
    if key is not None:
        return "historical" if ev.stale_reason(key) else "fresh"
    return "fresh" if ev.fresh else "historical"


def _general_disqualifier(policy: CellPolicy, ev: EvidenceFacts) -> str | None:
    key = policy.key
    if ev.problems:
        return "invalid: " + "; ".join(ev.problems)
    if ev.platform != key.platform:
        return f"wrong platform: recorded as {ev.platform} evidence, this cell is {key.platform}"
    if not ev.passed:
        return f"failing: {ev.status_detail}"
    if ev.dirty is not False:
        return "dirty tree: evidence from a tree with uncommitted changes never counts"
    stale = ev.stale_reason(key)
    if stale:
        return f"historical: {stale}"
    if ev.kind == "junit" and ev.lane != policy.test_lane:
        return f"wrong lane: {ev.lane!r}, this cell counts lane {policy.test_lane!r}"
    return None


def _junit_verdict(policy: CellPolicy, ev: EvidenceFacts) -> str | None:
    """None when the lane's bound tests meet Tested (every test bound at its commit present, every
    required kind among them, all passed, enough of them), else why not."""
    binding = policy.key.binding()
    at = (ev.commit or "")[:12]
    if missing := ev.missing_tests.get(binding):
        return describe_missing(missing, at)
    lacking = [kind for kind in policy.test_kinds if kind not in ev.bound_kinds.get(binding, frozenset())]
    if lacking:
        return f"incomplete: no test of kind {', '.join(lacking)} is bound to this cell at {at}"
    tally = ev.tests[binding]
    if tally.failed or tally.errors:
        return f"bound tests failed: {tally.failed} failed, {tally.errors} errors"
    if tally.passed < policy.min_passed:
        return f"{tally.passed} bound tests passed, {policy.min_passed} needed"
    if tally.skipped:
        # pytest's JUnit XML writes an xfailed test as skipped; the cell plugin makes a bound xpass fail
        return f"bound tests did not all pass: {tally.skipped} skipped or xfailed ({tally.passed} passed)"
    return None


def _soak_verdict(budget: SoakBudget, ev: EvidenceFacts, system: str | None) -> str | None:
    wrong_sampler = sampler_problem(ev.platform, ev.sampler, system)
    if wrong_sampler is not None:
        return wrong_sampler
    short = budget.shortfalls(ev.duration_s, ev.num_envs, ev.iterations)
    if short:
        return "soak under the cell's budget: " + ", ".join(short)
    return _survival_shortfall(budget, ev)


def _survival_shortfall(budget: SoakBudget, ev: EvidenceFacts) -> str | None:
    """Why a soak does not vouch for the cell's ``must_survive``, or None (nothing declared, or it does)."""
    if budget.must_survive_s is None:
        return None
    wanted = f"{budget.must_survive_s / 3600.0:g} h"
    said = ev.survival
    if said is None or said.target_s is None:
        return f"soak does not vouch for must_survive {wanted}: it ran without --must-survive"
    if said.target_s < budget.must_survive_s:
        return f"soak does not vouch for must_survive {wanted}: its target was {said.target_s / 3600.0:g} h"
    if said.verdict != "survives":
        return f"soak does not vouch for must_survive {wanted}: its survival verdict is {said.verdict}"
    return None


def judge(policy: CellPolicy, ev: EvidenceFacts) -> EvidenceVerdict:
    """Verdict of one piece of evidence (already known to cover the cell's algo/task/backend and ranks)."""
    reason = _general_disqualifier(policy, ev)
    if reason is None and ev.kind == "junit":
        reason = _junit_verdict(policy, ev)
    elif reason is None and ev.kind == "soak" and policy.soak is not None:
        reason = _soak_verdict(policy.soak, ev, policy.system)
    counts = reason is None
    if ev.kind == "junit" and counts:
        tally = ev.tests[policy.key.binding()]
        reason = (
            f"counts: all {tally.passed} bound tests passed, every test bound at {(ev.commit or '')[:12]} "
            "among them (none failed, skipped or xfailed)"
        )
    elif ev.kind == "soak" and counts:
        reason = f"counts: passing soak, {ev.duration_s} s, {ev.num_envs} envs, {ev.iterations} iterations"
        if ev.survival is not None:
            reason += f"; {ev.survival.text()}"
        if ev.unchecked:
            reason += f"; its {ev.sampler} sampler could not check {', '.join(ev.unchecked)}"
    elif counts:
        reason = f"counts: passing {ev.kind}"
    manifest = ev.cell_inputs.get(policy.key.binding()) if ev.kind == "junit" else ev.inputs
    unrecorded = unrecorded_inputs(ev.kind, manifest)
    return EvidenceVerdict(
        ev.id, ev.kind, ev.file, freshness(ev, policy.key), counts, reason or "", unrecorded
    )


def grade_cell(
    policy: CellPolicy,
    registered: str | None,
    configured: str | None,
    evidence: Sequence[EvidenceFacts],
    canonical: SoakBudget,
) -> CellResult:
    """Grade one cell. ``registered``/``configured`` are None when met, else the reason they fail."""
    relevant = sorted((ev for ev in evidence if ev.covers_cell(policy.key)), key=lambda ev: ev.id)
    verdicts = tuple(judge(policy, ev) for ev in relevant)
    if policy.unsupported_reason is not None:
        return CellResult(policy, "Unsupported", (), verdicts, _unsupported_notes(registered, configured))
    judged = list(zip(relevant, verdicts, strict=True))
    by_kind = {kind: [v for ev, v in judged if ev.kind == kind] for kind in ("junit", "probe", "soak")}
    counting_soaks = [ev for ev, v in judged if ev.kind == "soak" and v.counts]
    own = {
        "Registered": [] if registered is None else [registered],
        "Configured": [] if configured is None else [configured],
        "Tested": _tested_shortfalls(policy, by_kind["junit"]),
        "Benchmarked": _benchmarked_shortfalls(policy, by_kind["probe"], by_kind["soak"]),
        "Recommended": _recommended_shortfalls(policy, counting_soaks, canonical),
    }
    grade, blockers = _reached(own)
    note = platform_note(policy.key.platform)
    return CellResult(policy, grade, blockers, verdicts, () if note is None else (note,))


def _unsupported_notes(registered: str | None, configured: str | None) -> tuple[str, ...]:
    if registered is None and configured is None:
        return (
            "declared unsupported, yet the owner composes and validates for this platform: "
            "the fail-closed declaration is not enforced by configuration",
        )
    return ()


def _tested_shortfalls(policy: CellPolicy, junit: Sequence[EvidenceVerdict]) -> list[str]:
    key = policy.key
    failed = [v for v in junit if v.verdict.startswith("bound tests failed")]
    if failed:
        return ["bound tests failed in " + ", ".join(v.id for v in failed)]
    if not any(v.counts for v in junit):
        incomplete = [f"{v.id} ({v.verdict})" for v in junit if v.verdict.startswith("incomplete")]
        return [
            f"no fresh, clean {key.platform} JUnit evidence (lane {policy.test_lane!r}) that holds every test "
            f"marked {key.marker()} at its commit, all passed, at least {policy.min_passed}, "
            "none failed, skipped or xfailed"
            + (f"; incomplete: {'; '.join(incomplete)}" if incomplete else "")
        ]
    return []


def _benchmarked_shortfalls(
    policy: CellPolicy, probes: Sequence[EvidenceVerdict], soaks: Sequence[EvidenceVerdict]
) -> list[str]:
    platform = policy.key.platform
    out: list[str] = []
    if policy.probe_required and not any(v.counts for v in probes):
        out.append(f"no fresh, clean, passing {platform} probe artifact for this cell")
    if not any(v.counts for v in soaks):
        under = [v.id for v in soaks if v.verdict.startswith("soak under")]
        ranks = policy.key.ranks
        of_ranks = f" of {ranks} ranks (soak run --nproc-per-node {ranks})" if ranks > 1 else ""
        out.append(
            f"no fresh, clean, passing {platform} soak artifact{of_ranks} meeting the cell budget"
            + (f" (under budget: {', '.join(under)})" if under else "")
        )
    return out


def _recommended_shortfalls(
    policy: CellPolicy, counting_soaks: Sequence[EvidenceFacts], canonical: SoakBudget
) -> list[str]:
    out: list[str] = []
    rec = policy.recommendation
    if rec is None:
        out.append("no recommendation record in the inventory")
    elif rec.decision != "recommend":
        out.append(f"recommendation decision is {rec.decision!r} ({rec.date}): {rec.rationale}")
    if not any(not canonical.shortfalls(ev.duration_s, ev.num_envs, ev.iterations) for ev in counting_soaks):
        out.append(f"no counting soak at the canonical budget ({', '.join(canonical.parts())})")
    return out


def _reached(own: dict[str, list[str]]) -> tuple[str, tuple[tuple[str, tuple[str, ...]], ...]]:
    """The highest grade whose own requirements and every lower grade's hold, and each higher grade's
    blockers (a grade blocked only by a lower one says so)."""
    grade = "Unsupported"
    for g in GRADES[1:]:
        if own[g]:
            break
        grade = g
    reached = GRADES.index(grade)
    first_failing = GRADES[reached + 1] if reached + 1 < len(GRADES) else None
    blockers = tuple(
        (g, tuple(own[g] or [f"its own requirements hold, but {first_failing} is not met"]))
        for g in GRADES[reached + 1 :]
    )
    return grade, blockers
