"""One row of the pass table, the type that the evaluation builds and the failure reasons read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

#: ``inconclusive``: the row could not decide (a survival projection whose bound straddles the target);
#: not a pass, not a failure: the soak is ``inconclusive`` unless another row fails.
Result = Literal["pass", "fail", "not_applicable", "inconclusive"]


@dataclass(frozen=True)
class Criterion:
    """One row of the pass table; ``value`` is plain JSON."""

    name: str
    expected: str
    value: Any
    result: Result

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "expected": self.expected, "value": self.value, "result": self.result}
