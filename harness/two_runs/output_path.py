"""The one check of a JSON report path a comparing command writes (``--json-file``, ``--output``)."""

from __future__ import annotations

from pathlib import Path


class OutputPathError(ValueError):
    """``flag`` names a path the report cannot be written to; ``reason`` says why."""

    def __init__(self, flag: str, reason: str) -> None:
        super().__init__(f"{flag}: {reason}")
        self.flag, self.reason = flag, reason


def json_output_path(flag: str, value: str | Path | None) -> Path | None:
    """``value`` as an absolute ``.json`` file path in an existing directory (None: not asked)."""
    if value is None:
        return None
    out = Path(value)
    if not out.is_absolute() or out.suffix != ".json" or not out.parent.is_dir():
        raise OutputPathError(
            flag, f"must be an absolute .json path in an existing directory, got {str(value)!r}"
        )
    if out.is_dir():
        raise OutputPathError(flag, f"{out} is a directory, not a file")
    return out
