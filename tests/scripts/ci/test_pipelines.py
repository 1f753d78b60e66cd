"""The two CI pipelines in docs/ci.md: valid against the CI systems' published schemas (as vendored by
check-jsonschema), shown verbatim in the doc, and running the one release-gate script."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
PIPELINES = {"github-actions.yml": "vendor.github-workflows", "gitlab-ci.yml": "vendor.gitlab-ci"}
CHECKER = Path(sys.executable).with_name("check-jsonschema")


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((REPO / "scripts" / "ci" / name).read_text())
    return doc


def _validate(path: Path, schema: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHECKER), "--builtin-schema", schema, str(path)], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(("name", "schema"), PIPELINES.items())
def test_each_pipeline_validates_against_its_published_schema(name: str, schema: str) -> None:
    done = _validate(REPO / "scripts" / "ci" / name, schema)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("name", "schema", "break_it"),
    [
        ("github-actions.yml", "vendor.github-workflows", lambda d: d["jobs"]["soak-gate"].pop("runs-on")),
        (
            "gitlab-ci.yml",
            "vendor.gitlab-ci",
            lambda d: d["soak-gate"].update(timeout=["not", "a", "duration"]),
        ),
    ],
)
def test_the_schema_check_sees_a_broken_pipeline(
    name: str, schema: str, break_it: Any, tmp_path: Path
) -> None:
    doc = _load(name)
    break_it(doc)
    broken = tmp_path / name
    broken.write_text(yaml.safe_dump(doc))
    assert _validate(broken, schema).returncode != 0


def test_the_github_workflow_gates_and_uploads_every_verdict() -> None:
    doc = _load("github-actions.yml")
    job = doc["jobs"]["soak-gate"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    runs = [step.get("run", "") for step in job["steps"]]
    assert "bash scripts/ci/release_gate.sh" in runs
    upload = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "runs/ci/"
    assert job["env"]["OUT"].endswith("/runs/ci") and "BASE_SHA" in job["env"]


def test_the_gitlab_job_gates_and_reports_junit() -> None:
    job = _load("gitlab-ci.yml")["soak-gate"]
    assert "bash scripts/ci/release_gate.sh" in job["script"]
    assert any("BASE_SHA" in line for line in job["script"])
    assert job["artifacts"]["when"] == "always" and job["artifacts"]["reports"]["junit"] == "runs/ci/*.xml"
    assert job["variables"]["OUT"] == "$CI_PROJECT_DIR/runs/ci"


def test_docs_show_both_pipelines_verbatim() -> None:
    doc = (REPO / "docs" / "ci.md").read_text()
    blocks = re.findall(r"^```yaml\n(.*?)^```", doc, re.S | re.M)
    for name in PIPELINES:
        assert (REPO / "scripts" / "ci" / name).read_text() in blocks, name


def test_the_gate_script_is_valid_bash() -> None:
    bash = shutil.which("bash")
    assert bash is not None
    done = subprocess.run([bash, "-n", str(REPO / "scripts" / "ci" / "release_gate.sh")], check=False)
    assert done.returncode == 0
