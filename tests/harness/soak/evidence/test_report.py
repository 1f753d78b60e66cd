"""HTML soak report (harness/soak/evidence/report.py), checked in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from soakbench.harness.soak.evidence.artifact import ArtifactError
from soakbench.harness.soak.evidence.report import read_samples, render_report, report_command
from soakbench.harness.soak.verdicts.evaluation import CRITERIA
from tests.conftest import Chromium

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _stage(tmp_path: Path, label: str) -> Path:
    """Copy a fixture artifact and its samples into tmp_path (the report is written beside the artifact)."""
    shutil.copy(FIXTURES / f"samples_{label}.jsonl", tmp_path)
    target = tmp_path / f"artifact_{label}.json"
    shutil.copy(FIXTURES / f"artifact_{label}.json", target)
    return target


def test_report_is_self_contained_and_names_every_criterion(tmp_path: Path) -> None:
    html_path = render_report(_stage(tmp_path, "eventfd_leak"))
    assert html_path == tmp_path / "artifact_eventfd_leak.html"
    html = html_path.read_text()
    assert not re.search(r"""(src|href)=["'](https?:|//|file:)""", html), "external asset referenced"
    assert "<script" not in html
    artifact = json.loads((tmp_path / "artifact_eventfd_leak.json").read_text())
    for criterion in artifact["criteria"]:
        assert f'data-criterion="{criterion["name"]}"' in html
    assert html.count('src="data:image/png;base64,') == 10  # eight classes + fd breakdown + progress
    assert 'id="monitor"' in html and 'id="monitor-error"' not in html  # the artifact's monitor object
    assert f"{artifact['monitor']['root_pid']}</td>" in html


def test_report_renders_in_headless_chromium(tmp_path: Path, chromium: Chromium) -> None:
    html_path = render_report(_stage(tmp_path, "eventfd_leak"))
    url = html_path.resolve().as_uri()
    dom = chromium.dump_dom(url)
    assert 'id="verdicts"' in dom
    rows = re.findall(r'<tr class="(pass|fail|not_applicable)" data-criterion="([a-z_]+)"', dom)
    artifact = json.loads(html_path.with_suffix(".json").read_text())
    assert [name for _, name in rows] == [c["name"] for c in artifact["criteria"]]
    assert len(rows) == len(CRITERIA) - 1  # a 0.3.0 artifact: no survival row
    assert ("fail", "leak_verdicts") in rows
    assert re.search(r'id="status">FAILED<', dom)
    assert "resource classes still growing after start-up: eventfd, fd_total" in dom
    images = re.findall(r'<img alt="([^"]+)"[^>]*src="data:image/png;base64,', dom)
    assert len(images) == 10 and "fd_total over time" in images
    assert re.search(r'data-class="eventfd"><td><code>eventfd</code></td><td class="verdict growing"', dom)
    chromium.screenshot(url, tmp_path / "report.png", "1400,2000")


def test_passing_report_and_missing_samples_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifact = _stage(tmp_path, "clean")
    (tmp_path / "samples_clean.jsonl").unlink()
    assert report_command(artifact) == 0
    html = (tmp_path / "artifact_clean.html").read_text()
    assert 'id="status">PASSED<' in html
    assert 'id="plots-missing"' in html and "plots unavailable" in html
    assert "warning: samples file not found" in capsys.readouterr().err


def test_invalid_artifact_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifact = _stage(tmp_path, "clean")
    data = json.loads(artifact.read_text())
    data["status"] = "maybe"
    artifact.write_text(json.dumps(data))
    assert report_command(artifact) == 2
    assert "$.status" in capsys.readouterr().err
    assert not (tmp_path / "artifact_clean.html").exists()


def test_truncated_last_sample_line_is_skipped_and_other_bad_lines_named(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = (FIXTURES / "samples_clean.jsonl").read_text().splitlines()[:3]
    path.write_text("\n".join([*good, good[0][:40]]) + "\n")
    samples, note = read_samples(path)
    assert len(samples) == 3 and note is not None and "truncated last line 4" in note
    path.write_text("\n".join([good[0], "{oops", good[1]]) + "\n")
    with pytest.raises(ArtifactError, match=r"s\.jsonl:2: not JSON"):
        read_samples(path)
