"""The CI output options, declared once for every command that takes them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

JunitXml = Annotated[
    Path | None,
    typer.Option("--junit-xml", help="write the verdict as JUnit XML, a test case per row (docs/ci.md)"),
]
SummaryMd = Annotated[
    Path | None,
    typer.Option(
        "--summary-md",
        help="write a Markdown verdict summary (default: appended to $GITHUB_STEP_SUMMARY when it is set)",
    ),
]
