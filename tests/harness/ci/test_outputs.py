"""Where CI outputs go: checked paths, GITHUB_STEP_SUMMARY by default, appended after other steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from soakbench.harness.ci.cases import CiCase, CiSuite
from soakbench.harness.ci.outputs import CiOutputError, CiOutputs, run_link

SUITE = CiSuite("s", "a check", (CiCase("a", "passed"),))


def test_no_option_and_no_environment_writes_nothing(tmp_path: Path) -> None:
    outputs = CiOutputs.resolve(None, None, env={})
    assert outputs == CiOutputs() and outputs.emit([SUITE]) == []


def test_the_step_summary_is_the_default_and_keeps_what_other_steps_wrote(tmp_path: Path) -> None:
    step = tmp_path / "step_summary_1234"  # GitHub's file has no suffix
    step.write_text("earlier step\n")
    outputs = CiOutputs.resolve(None, None, env={"GITHUB_STEP_SUMMARY": str(step)})
    assert outputs.summary_md == step and outputs.append_summary
    outputs.emit([SUITE])
    text = step.read_text()
    assert text.startswith("earlier step\n") and "### ✅ a check: passed" in text


def test_an_explicit_summary_path_is_replaced_not_appended(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("old\n")
    CiOutputs.resolve(None, path, env={}).emit([SUITE])
    assert path.read_text().startswith("### ✅ a check")


def test_a_full_step_summary_keeps_earlier_content_and_says_where_the_verdict_is(tmp_path: Path) -> None:
    step = tmp_path / "step"
    step.write_text("x" * ((1 << 20) - 100))
    CiOutputs.resolve(None, None, env={"GITHUB_STEP_SUMMARY": str(step)}).emit([SUITE])
    assert step.read_text().endswith("the verdict is in the JUnit XML.*\n")
    assert len(step.read_bytes()) <= 1 << 20


@pytest.mark.parametrize(
    ("junit", "summary", "message"),
    [
        ("out.txt", None, "--junit-xml: must end in .xml"),
        ("missing/j.xml", None, "--junit-xml: parent directory"),
        (None, "missing/s.md", "--summary-md: parent directory"),
    ],
)
def test_bad_paths_are_refused_naming_the_option(
    tmp_path: Path, junit: str | None, summary: str | None, message: str
) -> None:
    with pytest.raises(CiOutputError, match=message):
        CiOutputs.resolve(
            None if junit is None else tmp_path / junit,
            None if summary is None else tmp_path / summary,
            env={},
        )


def test_a_bad_step_summary_variable_is_named() -> None:
    with pytest.raises(CiOutputError, match="GITHUB_STEP_SUMMARY"):
        CiOutputs.resolve(None, None, env={"GITHUB_STEP_SUMMARY": "/no/such/dir/step"})


def test_the_run_link_needs_all_three_variables() -> None:
    env = {"GITHUB_SERVER_URL": "https://gh", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "9"}
    assert run_link(env) == "https://gh/o/r/actions/runs/9"
    assert run_link({**env, "GITHUB_RUN_ID": ""}) is None


def test_a_file_that_cannot_be_written_after_the_check_names_its_option(tmp_path: Path) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    outputs = CiOutputs.resolve(folder / "j.xml", None, env={})
    folder.rmdir()  # the folder went away while the soak ran
    with pytest.raises(CiOutputError, match=r"--junit-xml: cannot write .*j\.xml"):
        outputs.emit([SUITE])
