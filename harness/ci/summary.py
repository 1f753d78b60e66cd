"""The Markdown job summary: per suite a title, the failure reason first, a compact verdict table and
where the full report is. Pure; bounded in bytes whatever the run's length (GitHub takes at most 1 MiB
per step, and other steps may write there too)."""

from __future__ import annotations

from collections.abc import Sequence

from soakbench.harness.ci.cases import MESSAGE_CHARS, CiCase, CiSuite, clip, counts

#: GitHub's limit for one step's summary
STEP_SUMMARY_LIMIT = 1 << 20
#: what one command writes at most, so that several commands in one step still fit
SUMMARY_BUDGET = 256 << 10
_MARK = {"passed": "✅ pass", "failed": "❌ fail", "skipped": "➖ skip"}
_ORDER = {"failed": 0, "skipped": 1, "passed": 2}


def _cell(text: str) -> str:
    """One table cell: one line, pipes escaped, at most a message's length."""
    return clip(text, MESSAGE_CHARS).replace("|", "\\|") or " "


def _row(case: CiCase) -> str:
    return f"| `{case.name}` | {_MARK[case.outcome]} | {_cell(case.message)} |"


def _head(suite: CiSuite) -> list[str]:
    verdict = "passed" if suite.passed else "FAILED"
    lines = [f"### {'✅' if suite.passed else '❌'} {suite.title}: {verdict}", ""]
    if suite.reason:
        lines += [f"> **Why:** {_cell(suite.reason)}", ""]
    n = counts([suite])
    tally = f"{n['passed']} passed, {n['failed']} failed, {n['skipped']} skipped"
    if suite.report:
        tally += f" · full report: `{suite.report}`"
    return [*lines, tally, ""]


_TABLE = ("| case | result | why |", "|---|---|---|")


def _blocks(suite: CiSuite) -> list[list[str]]:
    """The tables: failures and skips open, the passing cases folded (they are the long, quiet part)."""
    ordered = sorted(suite.cases, key=lambda c: _ORDER[c.outcome])
    loud = [_row(c) for c in ordered if c.outcome != "passed"]
    quiet = [_row(c) for c in ordered if c.outcome == "passed"]
    blocks = [[*_TABLE, *loud, ""]] if loud else []
    if quiet:
        blocks.append(
            [f"<details><summary>{len(quiet)} passed</summary>", "", *_TABLE, *quiet, "", "</details>", ""]
        )
    return blocks


def suite_markdown(suite: CiSuite, budget: int) -> str:
    """One suite's section within ``budget`` bytes: failures first, then skips, then the passes folded.
    When that does not fit, the passes are left out, then the rows that still do not fit, and a closing
    line counts them (the JUnit XML has every case)."""
    whole = "\n".join([*_head(suite), *(line for block in _blocks(suite) for line in block)]) + "\n"
    if len(whole.encode()) <= budget:
        return whole
    lines = [*_head(suite), *_TABLE]
    rows = [_row(c) for c in sorted(suite.cases, key=lambda c: _ORDER[c.outcome]) if c.outcome != "passed"]
    used = len("\n".join(lines).encode()) + 200  # the closing line's room
    kept = 0
    for row in rows:
        if used + len(row.encode()) + 1 > budget:
            break
        lines.append(row)
        used += len(row.encode()) + 1
        kept += 1
    left = len(suite.cases) - kept
    return (
        "\n".join([*lines, "", f"*{left} more cases are in the JUnit XML only (the passing ones first).*"])
        + "\n"
    )


def render_summary(suites: Sequence[CiSuite], run_link: str | None = None) -> str:
    """The whole summary of one command, within ``SUMMARY_BUDGET`` bytes."""
    if not suites:
        raise ValueError("render_summary: no suite to summarize")
    share = SUMMARY_BUDGET // len(suites)
    text = "\n".join(suite_markdown(suite, share) for suite in suites)
    if run_link:
        text += f"\nArtifacts of [this run]({run_link}).\n"
    return text
