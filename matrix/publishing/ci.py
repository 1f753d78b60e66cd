"""``matrix check`` as a CI suite: a case per generated output (current, or what differs) and one for
the test bindings. Pure: the check's findings in, suite out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from soakbench.harness.ci.cases import MESSAGE_CHARS, CiCase, CiSuite, clip

_REGENERATE = "run `uv run matrix generate`, review, commit"


def output_case(rel: str, drift: Sequence[str]) -> CiCase:
    """One generated output: passes when the committed file equals the regenerated one."""
    name = f"generated.{rel}"
    if not drift:
        return CiCase(name, "passed")
    return CiCase(
        name, "failed", clip(f"{drift[0]}; {_REGENERATE}", MESSAGE_CHARS), "\n".join(drift), "drift"
    )


def bindings_case(findings: Sequence[str]) -> CiCase:
    """The test bindings: every cell marker names a cell and every cell has its tests."""
    if not findings:
        return CiCase("test_bindings", "passed")
    message = f"{len(findings)} disagreement(s) with matrix/inventory.yaml: {findings[0]}"
    return CiCase("test_bindings", "failed", clip(message, MESSAGE_CHARS), "\n".join(findings), "bindings")


def check_suite(per_file: Mapping[str, Sequence[str]], findings: Sequence[str]) -> CiSuite:
    """The CI suite of one ``matrix check``."""
    cases = (*(output_case(rel, lines) for rel, lines in sorted(per_file.items())), bindings_case(findings))
    failed = [c for c in cases if c.outcome == "failed"]
    return CiSuite(
        name="matrix.check",
        title="matrix check",
        cases=cases,
        reason="; ".join(c.message for c in failed) if failed else None,
    )
