"""The ``--json OUT`` option of the benchmarks that write their figures to a file.

A benchmark may run for tens of minutes before it writes; a path it cannot write to must stop it before
the work, not with a traceback after it. The option is checked when typer parses it (a bad one is a usage
error: exit code 2, with a message naming ``--json``), and written with the one atomic helper.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from soakbench.foundation.atomic import write_atomic


def checked_json_path(path: Path | None) -> Path | None:
    """``path`` made absolute, when its folder exists and it is not a folder itself (typer callback)."""
    if path is None:
        return None
    target = path if path.is_absolute() else Path.cwd() / path
    if not target.parent.is_dir():
        raise typer.BadParameter(f"the folder {target.parent} does not exist; create it first")
    if target.is_dir():
        raise typer.BadParameter(f"{target} is a folder; name a file to write, such as {target}/rates.json")
    return target


#: the ``--json`` option: where the figures are written as well as printed
JsonOut = Annotated[
    Path | None,
    typer.Option(
        "--json",
        help="also write the figures to this file (its folder must exist)",
        callback=checked_json_path,
    ),
]


def write_json(path: Path | None, text: str) -> None:
    """Write the printed figures to ``path`` (atomically), when one was given."""
    if path is not None:
        write_atomic(path, text + "\n")
