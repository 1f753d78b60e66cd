"""Where a command's CI outputs go: ``--junit-xml PATH`` and ``--summary-md PATH`` (by default the file
``GITHUB_STEP_SUMMARY`` names, when it is set). Paths are checked before the command does any work."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from soakbench.foundation.atomic import write_atomic
from soakbench.harness.ci.cases import CiSuite
from soakbench.harness.ci.summary import STEP_SUMMARY_LIMIT, render_summary

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"


class CiOutputError(ValueError):
    """A CI output path that cannot be written; the message names the option."""


def _checked(option: str, path: Path, suffix: str | None) -> Path:
    if not path.is_absolute():
        path = Path.cwd() / path
    if suffix is not None and path.suffix != suffix:
        raise CiOutputError(f"{option}: must end in {suffix}, got {path.name!r}")
    if not path.parent.is_dir():
        raise CiOutputError(f"{option}: parent directory {path.parent} does not exist")
    if path.is_dir():
        raise CiOutputError(f"{option}: {path} is a directory")
    return path


def run_link(env: Mapping[str, str]) -> str | None:
    """The CI run's page, where its uploaded artifacts are listed (GitHub Actions), or None."""
    keys = ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
    if all(env.get(k) for k in keys):
        return f"{env['GITHUB_SERVER_URL']}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    return None


@dataclass(frozen=True)
class CiOutputs:
    """The checked destinations; ``append_summary`` is true for the step summary GitHub gave us, which
    other steps' tools write to as well, so ours is added after what is there."""

    junit_xml: Path | None = None
    summary_md: Path | None = None
    append_summary: bool = False
    link: str | None = None

    @classmethod
    def resolve(
        cls, junit_xml: Path | None, summary_md: Path | None, env: Mapping[str, str] | None = None
    ) -> CiOutputs:
        """Check the options (raises CiOutputError); ``GITHUB_STEP_SUMMARY`` stands in for a missing
        ``--summary-md``."""
        env = os.environ if env is None else env
        junit = None if junit_xml is None else _checked("--junit-xml", junit_xml, ".xml")
        append = False
        if summary_md is None and env.get(STEP_SUMMARY_ENV):
            summary_md, append = Path(env[STEP_SUMMARY_ENV]), True
        summary = None if summary_md is None else _checked(_summary_option(append), summary_md, None)
        if summary is not None and env.get(STEP_SUMMARY_ENV):
            append = append or summary == Path(env[STEP_SUMMARY_ENV])
        return cls(junit, summary, append, run_link(env))

    def emit(self, suites: Sequence[CiSuite]) -> list[Path]:
        """Write the JUnit XML and the summary; returns the paths written. CiOutputError names the option
        whose file could not be written."""
        from soakbench.harness.ci.junit import (
            write_junit,  # junitparser loads only when a report is asked for
        )

        written: list[Path] = []
        if self.junit_xml is not None:
            written.append(_writing("--junit-xml", self.junit_xml, lambda p: write_junit(p, suites)))
        if self.summary_md is not None:
            text = self._summary_text(suites)
            written.append(
                _writing(
                    _summary_option(self.append_summary), self.summary_md, lambda p: write_atomic(p, text)
                )
            )
        return written

    def _summary_text(self, suites: Sequence[CiSuite]) -> str:
        ours = render_summary(suites, self.link)
        before = ""
        if self.append_summary and self.summary_md is not None and self.summary_md.exists():
            before = self.summary_md.read_text(encoding="utf-8") + "\n"
        if len((before + ours).encode()) > STEP_SUMMARY_LIMIT:  # earlier steps filled it: keep theirs
            ours = f"*{suites[0].title}: the step summary is full; the verdict is in the JUnit XML.*\n"
        return before + ours


def _writing(option: str, path: Path, write: Callable[[Path], Path]) -> Path:
    """``write(path)``, a failure (the folder went away, the disk filled) said as the option's."""
    try:
        return write(path)
    except OSError as exc:
        raise CiOutputError(f"{option}: cannot write {path}: {exc.strerror or exc}") from None


def _summary_option(from_env: bool) -> str:
    return f"{STEP_SUMMARY_ENV} (the default --summary-md)" if from_env else "--summary-md"
