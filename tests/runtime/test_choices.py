"""The CLI choices are exactly what the runtime registers."""

from __future__ import annotations

from runtime.backends import BACKENDS
from runtime.choices import Algo, Sim, Task
from runtime.config import ALGOS
from runtime.tasks import TASKS


def test_cli_choices_equal_the_registries() -> None:
    assert [a.value for a in Algo] == list(ALGOS)
    assert sorted(t.value for t in Task) == sorted(TASKS)
    assert sorted(s.value for s in Sim) == sorted(BACKENDS)
