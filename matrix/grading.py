"""The grade policy (pure): a cell's policy + runtime facts + evidence facts -> grade, blockers, verdicts.

A cell reaches a grade only when that grade's own requirements and those of every lower grade hold.
For each grade above the one reached, ``blockers`` says why it is not met.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from matrix.model import GRADES, CellPolicy, EvidenceFacts, SoakBudget


@dataclass(frozen=True)
class EvidenceVerdict:
    """How one piece of evidence was judged for one cell."""

    id: str
    kind: str
    file: str
    freshness: str  # fresh | historical | invalid
    counts: bool
    verdict: str


@dataclass(frozen=True)
class CellResult:
    """The graded cell."""

    policy: CellPolicy
    grade: str
    blockers: tuple[tuple[str, tuple[str, ...]], ...]  # (grade above the reached one, reasons)
    evidence: tuple[EvidenceVerdict, ...]
    notes: tuple[str, ...] = ()


def freshness(ev: EvidenceFacts) -> str:
    """``invalid`` (can never count), ``fresh`` or ``historical`` (fingerprint differs from HEAD)."""
    if ev.problems:
        return "invalid"
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
    if not ev.fresh:
        return f"historical: runtime fingerprint at {(ev.commit or '?')[:12]} differs from HEAD's"
    if ev.kind == "junit" and ev.lane != policy.test_lane:
        return f"wrong lane: {ev.lane!r}, this cell counts lane {policy.test_lane!r}"
    return None


def judge(policy: CellPolicy, ev: EvidenceFacts) -> EvidenceVerdict:
    """Verdict of one piece of evidence (already known to cover the cell's algo/task/backend)."""
    reason = _general_disqualifier(policy, ev)
    counts = reason is None
    if counts and ev.kind == "junit":
        tally = ev.tests[(policy.key.algo, policy.key.task, policy.key.backend)]
        if tally.failed or tally.errors:
            reason, counts = f"bound tests failed: {tally.failed} failed, {tally.errors} errors", False
        elif tally.passed < policy.min_passed:
            reason, counts = f"{tally.passed} bound tests passed, {policy.min_passed} needed", False
        else:
            reason = f"counts: {tally.passed} bound tests passed, none failed ({tally.skipped} skipped)"
    elif counts and ev.kind == "soak" and policy.soak is not None:
        short = policy.soak.shortfalls(ev.duration_s, ev.num_envs, ev.iterations)
        if short:
            reason, counts = "soak under the cell's budget: " + ", ".join(short), False
        else:
            reason = (
                f"counts: passing soak, {ev.duration_s} s, {ev.num_envs} envs, {ev.iterations} iterations"
            )
    elif counts:
        reason = f"counts: passing {ev.kind}"
    return EvidenceVerdict(ev.id, ev.kind, ev.file, freshness(ev), counts, reason or "")


def grade_cell(
    policy: CellPolicy,
    registered: str | None,
    configured: str | None,
    evidence: Sequence[EvidenceFacts],
    canonical: SoakBudget,
) -> CellResult:
    """Grade one cell. ``registered``/``configured`` are None when met, else the reason they fail."""
    key = policy.key
    relevant = sorted((ev for ev in evidence if ev.covers_cell(key)), key=lambda ev: ev.id)
    verdicts = tuple(judge(policy, ev) for ev in relevant)
    if policy.unsupported_reason is not None:
        notes: tuple[str, ...] = ()
        if registered is None and configured is None:
            notes = (
                "declared unsupported, yet the owner composes and validates for this platform: "
                "the fail-closed declaration is not enforced by configuration",
            )
        return CellResult(policy, "Unsupported", (), verdicts, notes)

    own: dict[str, list[str]] = {g: [] for g in GRADES[1:]}
    if registered is not None:
        own["Registered"].append(registered)
    if configured is not None:
        own["Configured"].append(configured)

    by_kind = {
        kind: [(ev, v) for ev, v in zip(relevant, verdicts, strict=True) if ev.kind == kind]
        for kind in ("junit", "probe", "soak")
    }
    junit_ok = [v for _, v in by_kind["junit"] if v.counts]
    junit_bad = [v for _, v in by_kind["junit"] if v.verdict.startswith("bound tests failed")]
    if junit_bad:
        own["Tested"].append("bound tests failed in " + ", ".join(v.id for v in junit_bad))
    elif not junit_ok:
        own["Tested"].append(
            f"no fresh, clean, passing {key.platform} JUnit evidence (lane {policy.test_lane!r}) with "
            f">= {policy.min_passed} passing test(s) marked cell({key.algo}, {key.task}, {key.backend})"
        )
    if policy.probe_required and not any(v.counts for _, v in by_kind["probe"]):
        own["Benchmarked"].append(f"no fresh, clean, passing {key.platform} probe artifact for this cell")
    soaks_ok = [(ev, v) for ev, v in by_kind["soak"] if v.counts]
    if not soaks_ok:
        under = [v.id for _, v in by_kind["soak"] if v.verdict.startswith("soak under")]
        own["Benchmarked"].append(
            f"no fresh, clean, passing {key.platform} soak artifact meeting the cell budget"
            + (f" (under budget: {', '.join(under)})" if under else "")
        )
    rec = policy.recommendation
    if rec is None:
        own["Recommended"].append("no recommendation record in the inventory")
    elif rec.decision != "recommend":
        own["Recommended"].append(
            f"recommendation decision is {rec.decision!r} ({rec.date}): {rec.rationale}"
        )
    if not any(not canonical.shortfalls(ev.duration_s, ev.num_envs, ev.iterations) for ev, _ in soaks_ok):
        own["Recommended"].append(
            f"no counting soak at the canonical budget ({canonical.min_duration_s} s, "
            f"{canonical.num_envs} envs, {canonical.iterations} iterations)"
        )

    grade = "Unsupported"
    for g in GRADES[1:]:
        if own[g]:
            break
        grade = g
    reached = GRADES.index(grade)
    first_failing = GRADES[reached + 1] if reached + 1 < len(GRADES) else None
    blockers = []
    for g in GRADES[reached + 1 :]:
        reasons = own[g] or [f"its own requirements hold, but {first_failing} is not met"]
        blockers.append((g, tuple(reasons)))
    return CellResult(policy, grade, tuple(blockers), verdicts)
