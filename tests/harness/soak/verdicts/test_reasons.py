"""The failure reason names the row it was written from, and that row can be read back from it."""

from __future__ import annotations

from soakbench.harness.soak.verdicts.criterion import Criterion
from soakbench.harness.soak.verdicts.reasons import deciding_row, failure_reason


def test_the_deciding_row_is_read_back_from_the_reason() -> None:
    rows = [Criterion("trainer_returncode", "0", 1, "fail"), Criterion("shutdown_contract", "ok", [], "fail")]
    reason = failure_reason(rows[1], rows)  # a shutdown contract violation is decided by its second row
    assert deciding_row(reason, [r.name for r in rows]) == "shutdown_contract"


def test_without_a_matching_reason_the_first_failed_row_decides() -> None:
    assert deciding_row("something else", ["a", "b"]) == "a"
    assert deciding_row(None, []) is None
