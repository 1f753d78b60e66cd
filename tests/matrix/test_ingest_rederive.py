"""`matrix ingest` re-derives every soak verdict and recounts JUnit: a table of lying artifacts, each
refused with exit 2 and nothing written; the honest ones are accepted."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from soakbench.harness.soak.evidence.report import locate_samples
from tests.matrix._fixtures import SOAK_SAMPLES_NAME, git, junit_xml, soak_artifact, write_json
from tests.matrix.conftest import Invoke
from tests.matrix.test_cli import SAC_WALK, snapshot

Doc = dict[str, Any]


def _set(doc: Doc, dotted: str, value: Any) -> Doc:
    node = doc
    *parents, leaf = dotted.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    return doc


def _row(doc: Doc, name: str, **changes: Any) -> Doc:
    for row in doc["criteria"]:
        if row["name"] == name:
            row.update(changes)
    return doc


def _drop_consistently(doc: Doc) -> Doc:
    """dropped_batches 3 everywhere the artifact says it, invariants kept, rows and status untouched."""
    ingress = doc["run_summary"]["runtime_manifest"]["replay_ingress"]
    ingress.update(dropped_batches=3, early_returns=3, stop_returns=3)
    doc["replay"].update(dropped_batches=3, early_returns=3, stop_returns=3)
    return doc


def _fill_lies(doc: Doc) -> Doc:
    """A run that published nothing claims a high-water mark of 0 everywhere (an invariant break)."""
    ingress = doc["run_summary"]["runtime_manifest"]["replay_ingress"]
    ingress["high_water_occupancy"] = 0
    doc["replay"]["high_water_occupancy"] = 0
    return doc


LIES: list[tuple[str, Callable[[Doc], Doc], str]] = [
    ("dropped_batches 3 in the replay section", lambda d: _set(d, "replay.dropped_batches", 3),
     "replay.dropped_batches (row replay_no_drops)"),
    ("dropped_batches 3 in the summary too", _drop_consistently, "row replay_no_drops: recorded 'pass', re-derived 'fail'"),
    ("a growing verdict on a passed soak", lambda d: _set(d, "resource_summary.leak_verdicts.eventfd", "growing"),
     "resource_summary.leak_verdicts.eventfd (row leak_verdicts): recorded 'growing', the samples say 'bounded'"),
    ("a failed soak relabelled passed", lambda d: {**d, "status": "passed"} if d["status"] == "failed" else
     _row(_set(d, "trainer_returncode", 1), "trainer_returncode", result="pass"),
     "row trainer_returncode: recorded 'pass', re-derived 'fail'"),
    ("a row whose result contradicts its value", lambda d: _row(d, "min_duration", value=1.0),
     "row min_duration: recorded value 1.0"),
    ("published_sequence off by one", lambda d: _set(d, "replay.published_sequence", 1201),
     "replay.published_sequence (row replay_published_sequence)"),
    ("an invariant broken in summary and section", _fill_lies, "row replay_invariants"),
    ("a schema-violating embedded summary", lambda d: _set(d, "run_summary.metric_schema_version", "1"),
     "row run_summary_schema"),
    ("an observation edited to observed", lambda d: _set(d, "resource_summary.observation.min_trend_samples", 500),
     "row trend_observation"),
    ("a sample count that is not the file's", lambda d: _set(d, "resource_summary.sample_count", 10),
     "resource_summary.sample_count"),
    ("an artifact from before re-derivation", lambda d: {k: v for k, v in d.items() if k != "samples_sha256"},
     "samples_sha256: missing"),
    ("a digest that is not the samples'", lambda d: _set(d, "samples_sha256", "0" * 64), "has sha256"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "lie", "message"), LIES, ids=[n for n, _, _ in LIES])
def test_a_lying_soak_artifact_is_refused(
    repo: Path, run_matrix: Invoke, tmp_path: Path, name: str, lie: Callable[[Doc], Doc], message: str
) -> None:
    honest = soak_artifact(git(repo, "rev-parse", "HEAD"))
    path = write_json(tmp_path / "soak.json", lie(copy.deepcopy(honest)))
    before = snapshot(repo)
    result = run_matrix("ingest", str(path), "--platform", "linux-cpu")
    assert result.exit_code == 2, (name, result.output)
    assert message in " ".join(result.output.split()), (name, result.output)
    assert snapshot(repo) == before


def test_the_honest_soak_is_filed_with_its_samples_beside_it(
    repo: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    honest = soak_artifact(git(repo, "rev-parse", "HEAD"))
    path = write_json(tmp_path / "soak.json", honest)
    result = run_matrix("ingest", str(path), "--platform", "linux-cpu")
    assert result.exit_code == 0, result.output
    folder = repo / "matrix" / "evidence" / "soak"
    (filed,) = folder.glob("soak-*.json")
    assert json.loads(filed.read_text())["samples_sha256"] == honest["samples_sha256"]
    samples = folder / SOAK_SAMPLES_NAME  # the name the artifact records, beside the filed artifact
    assert samples.read_bytes() == (tmp_path / SOAK_SAMPLES_NAME).read_bytes()
    (tmp_path / SOAK_SAMPLES_NAME).unlink()  # the run's own copy is gone: the filed one is found
    assert locate_samples(filed, honest["samples_path"])[0] == samples
    assert len(json.loads((repo / "matrix" / "evidence" / "index.json").read_text())["entries"]) == 1


def test_a_different_samples_file_under_a_filed_name_is_refused(
    repo: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    taken = repo / "matrix" / "evidence" / "soak" / SOAK_SAMPLES_NAME
    taken.parent.mkdir(parents=True, exist_ok=True)
    taken.write_text('{"t": 0.0}\n')  # another run's samples, filed under the same name
    path = write_json(tmp_path / "soak.json", soak_artifact(git(repo, "rev-parse", "HEAD")))
    before = snapshot(repo)
    result = run_matrix("ingest", str(path), "--platform", "linux-cpu")
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "a different samples file is filed as matrix/evidence/soak/soak.samples.jsonl" in said
    assert snapshot(repo) == before


def test_missing_samples_file_names_the_path(repo: Path, run_matrix: Invoke, tmp_path: Path) -> None:
    path = write_json(tmp_path / "soak.json", soak_artifact(git(repo, "rev-parse", "HEAD")))
    (tmp_path / SOAK_SAMPLES_NAME).unlink()
    result = run_matrix("ingest", str(path), "--platform", "linux-cpu")
    assert result.exit_code == 2 and str(tmp_path / SOAK_SAMPLES_NAME) in " ".join(result.output.split())


def test_edited_samples_are_refused_by_digest(repo: Path, run_matrix: Invoke, tmp_path: Path) -> None:
    path = write_json(tmp_path / "soak.json", soak_artifact(git(repo, "rev-parse", "HEAD")))
    samples = tmp_path / SOAK_SAMPLES_NAME
    samples.write_text(samples.read_text().replace('"eventfd":6', '"eventfd":7', 3))
    result = run_matrix("ingest", str(path), "--platform", "linux-cpu")
    assert result.exit_code == 2 and "has sha256" in result.output


@pytest.mark.parametrize(
    ("attribute", "value"),
    [("tests", "7"), ("failures", "0"), ("errors", "5"), ("skipped", "3")],
)
def test_a_junit_whose_declared_counts_disagree_with_its_testcases_is_refused(
    repo: Path, run_matrix: Invoke, tmp_path: Path, attribute: str, value: str
) -> None:
    xml = junit_xml(git(repo, "rev-parse", "HEAD"), [("t1", SAC_WALK, "passed"), ("t2", SAC_WALK, "failed")])
    lying = _with_suite_attribute(xml, attribute, value)
    (tmp_path / "j.xml").write_text(lying)
    before = snapshot(repo)
    result = run_matrix("ingest", str(tmp_path / "j.xml"))
    assert result.exit_code == 2 and f"declares {attribute}={value}" in result.output, result.output
    assert snapshot(repo) == before


def test_an_honest_junit_with_declared_counts_is_accepted(
    repo: Path, run_matrix: Invoke, tmp_path: Path
) -> None:
    xml = junit_xml(
        git(repo, "rev-parse", "HEAD"),
        [("test_sac_walk_mujoco", SAC_WALK, "passed"), ("t2", SAC_WALK, "passed")],
    )
    (tmp_path / "j.xml").write_text(_with_suite_attribute(xml, "tests", "2"))
    result = run_matrix("ingest", str(tmp_path / "j.xml"))
    assert result.exit_code == 0, result.output


def _with_suite_attribute(xml: str, attribute: str, value: str) -> str:
    import re

    def add(match: re.Match[str]) -> str:
        tag = re.sub(rf' {attribute}="[^"]*"', "", match.group(0))
        return tag[:-1] + f' {attribute}="{value}">'

    return re.sub(r"<testsuite(?=[ >])[^>]*>", add, xml, count=1)


def test_a_filed_junit_summary_has_its_counts_recomputed() -> None:
    from soakbench.matrix.grading.evidence import junit_count_problems
    from soakbench.matrix.intake.junit import summarize_junit

    xml = junit_xml("a" * 40, [("t1", SAC_WALK, "passed"), ("t2", SAC_WALK, "failed")])
    summary = summarize_junit(xml.encode(), "j.xml")
    assert junit_count_problems(summary) == []
    summary["totals"].update(passed=2, failed=1)
    summary["cells"][0].update(passed=2, failed=0, skipped=1)
    assert junit_count_problems(summary) == [
        "totals.tests is 2 but its outcomes add up to 3",
        "cells[0]: outcome counts add up to 3 but it lists 2 tests",
    ]
