"""The CLI choices are exactly what the runtime registers."""

from __future__ import annotations

from soakbench.runtime.backends import BACKENDS
from soakbench.runtime.choices import Algo, Sim, Task
from soakbench.runtime.config import ALGOS
from soakbench.runtime.tasks import TASKS


def test_cli_choices_equal_the_registries() -> None:
    assert [a.value for a in Algo] == list(ALGOS)
    assert sorted(t.value for t in Task) == sorted(TASKS)
    assert sorted(s.value for s in Sim) == sorted(BACKENDS)
