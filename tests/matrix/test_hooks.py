"""`matrix ingest` refuses evidence made with a test-only hook (exit 2, the hook and the file named,
nothing written) wherever the evidence records it; the hooks at their defaults are accepted."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soakbench.matrix.grading.evidence import normalize_artifact
from soakbench.matrix.grading.hooks import PROBE_FLAGS, PROBE_SETTINGS, RUN_SETTINGS, hooks_in
from tests.matrix._fixtures import git, probe_artifact, soak_artifact, write_json
from tests.matrix.conftest import Invoke
from tests.matrix.test_cli import snapshot
from tests.matrix.test_probe_evidence import REAL_PROBE

Doc = dict[str, Any]


def _soak(commit: str, *overrides: str, in_command: bool = True) -> Doc:
    """A passing `soak run` artifact whose trainer got ``overrides`` (in its command too, as `soak run`
    spawns it, unless ``in_command`` is False)."""
    doc = soak_artifact(commit, overrides=overrides)
    if in_command:
        doc["command"] = [*doc["command"], "--task", "g1_walk_flat", "--sim", "mujoco", *overrides]
    return doc


def _monitored(commit: str, *argv: str) -> Doc:
    """A soak artifact whose command line carries ``argv`` but whose run settings do not."""
    doc = _soak(commit)
    doc["command"] = [*doc["command"], *argv]
    return doc


def _real_probe(commit: str, sleep_ms: float, *argv: str) -> Doc:
    """The real 0.4.0 probe fixture, re-homed at ``commit``, recording ``--test-step-sleep-ms``."""
    doc: Doc = json.loads(REAL_PROBE.read_text())
    doc["context"]["source"].update(commit=commit, dirty=False)
    doc["settings"]["test_step_sleep_ms"] = sleep_ms
    doc["command"] = [*doc["command"], *argv]
    return doc


def _old_probe(commit: str, *argv: str) -> Doc:
    doc = probe_artifact(commit)
    doc["command"] = [*doc["command"], *argv]
    return doc


HOOKED: list[tuple[str, Callable[[str], Doc], str]] = [
    ("soak with training.test_fault", lambda c: _soak(c, "training.test_fault=learner_exception"),
     "run_settings.extra_overrides: training.test_fault=learner_exception"),
    ("soak with a fault past the run's end", lambda c: _soak(c, "training.test_fault=learner_exception",
     "training.test_fault_iteration=100000"), "training.test_fault_iteration=100000"),
    ("soak with only the fault's iteration", lambda c: _soak(c, "training.test_fault_iteration=3"),
     "training.test_fault_iteration=3"),
    ("soak whose command alone holds the fault", lambda c: _monitored(c, "training.test_fault=learner_exception"),
     "command: training.test_fault=learner_exception"),
    ("probe 0.4.0 with --test-step-sleep-ms", lambda c: _real_probe(c, 5.0, "--test-step-sleep-ms", "5"),
     "settings.test_step_sleep_ms=5.0"),
    ("probe whose settings alone hold the sleep", lambda c: _real_probe(c, 0.5), "settings.test_step_sleep_ms=0.5"),
    ("probe 0.3.0 whose command holds the sleep", lambda c: _old_probe(c, "--test-step-sleep-ms=2"),
     "command: --test-step-sleep-ms 2"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "make", "hook"), HOOKED, ids=[n for n, _, _ in HOOKED])
def test_evidence_made_with_a_test_hook_is_refused(
    repo: Path, run_matrix: Invoke, tmp_path: Path, name: str, make: Callable[[str], Doc], hook: str
) -> None:
    path = write_json(tmp_path / "artifact.json", make(git(repo, "rev-parse", "HEAD")))
    before = snapshot(repo)
    result = run_matrix("ingest", str(path), "--platform", "linux-cpu")
    said = " ".join(result.output.split())
    assert result.exit_code == 2, (name, said)
    assert f"{path}:" in said and "made with a test-only hook" in said and hook in said, (name, said)
    assert snapshot(repo) == before


DEFAULTS: list[tuple[str, Callable[[str], Doc]]] = [
    ("soak with the fault hooks at their defaults",
     lambda c: _soak(c, "training.test_fault=null", "training.test_fault_iteration=0")),
    ("soak with the fault hook ~", lambda c: _soak(c, "training.test_fault=~")),
    ("probe 0.4.0 with --test-step-sleep-ms 0", lambda c: _real_probe(c, 0.0, "--test-step-sleep-ms", "0")),
    ("probe 0.4.0 without the flag", lambda c: _real_probe(c, 0.0)),
]  # fmt: skip


@pytest.mark.parametrize(("name", "make"), DEFAULTS, ids=[n for n, _ in DEFAULTS])
def test_hooks_at_their_defaults_are_accepted(
    repo: Path, run_matrix: Invoke, tmp_path: Path, name: str, make: Callable[[str], Doc]
) -> None:
    path = write_json(tmp_path / "artifact.json", make(git(repo, "rev-parse", "HEAD")))
    result = run_matrix("ingest", str(path), "--platform", "linux-cpu")
    assert result.exit_code == 0, (name, result.output)
    assert "filed:" in result.output


def test_hand_filed_hooked_evidence_never_counts() -> None:
    entry = {"id": "x", "kind": "probe", "file": "matrix/evidence/probe/x.json", "platform": "linux-cpu"}
    doc = _real_probe(json.loads(REAL_PROBE.read_text())["context"]["source"]["commit"], 5.0)
    facts = normalize_artifact(entry, doc)
    assert "made with a test-only hook: settings.test_step_sleep_ms=5.0" in facts.problems
    assert normalize_artifact(entry, _real_probe(doc["context"]["source"]["commit"], 0.0)).problems == ()


def test_a_junit_summary_records_no_hooks() -> None:
    assert hooks_in("junit", {"command": ["training.test_fault=learner_exception"]}) == []


def test_the_hook_lists_match_the_runtime_and_the_probe() -> None:
    """Every test-only setting the runtime declares, the probe schema records and the probe CLI takes is
    one the checker looks for."""
    import inspect

    import typer.main

    from soakbench.foundation.schema import load_schema
    from soakbench.harness.probe.cli import app as probe_app
    from soakbench.runtime.config import sections

    declaring = {
        name: {f"training.{f.name}" for f in dataclasses.fields(cls) if f.name.startswith("test_")}
        for name, cls in inspect.getmembers(sections, dataclasses.is_dataclass)
        if isinstance(cls, type)
    }
    assert {name for name, hooks in declaring.items() if hooks} <= {"TrainingConfig"}
    assert set(RUN_SETTINGS) == declaring["TrainingConfig"]
    settings = load_schema("probe-0.4.0.schema.json")["properties"]["settings"]["properties"]
    assert set(PROBE_SETTINGS) == {k for k in settings if k.startswith("test_")}
    command = typer.main.get_command(probe_app)
    options = {o for p in getattr(command, "params", []) for o in p.opts if o.startswith("--test-")}
    assert set(PROBE_FLAGS) == options
