"""The report's per-process table (harness/soak/evidence/report.py) from the fixture artifacts."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

from soakbench.harness.soak.evidence.report import build_page, process_rows

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _artifact(label: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((FIXTURES / f"artifact_{label}.json").read_text())
    return data


def test_per_process_table_names_the_growing_process(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "samples_eventfd_leak.jsonl", tmp_path)
    html = build_page(_artifact("eventfd_leak"), tmp_path / "artifact_eventfd_leak.json")
    assert 'id="per-process"' in html
    row = re.search(r'<tr data-pid="4242" data-role="trainer">.*?</tr>', html, re.S)
    assert row is not None
    assert re.search(r'class="verdict growing" data-class="eventfd">growing<', row.group(0))
    assert re.search(r'class="verdict bounded" data-class="pss">bounded<', row.group(0))
    assert "trainer (pid 4242): eventfd growing" in html  # the failure reason


def test_short_lived_growth_shows_as_reported() -> None:
    artifact = _artifact("eventfd_leak")
    summary = copy.deepcopy(artifact["resource_summary"])
    assert isinstance(summary, dict)
    entry = summary["per_process"]["processes"][0]
    entry["judged"], entry["failing"] = False, []
    (row,) = process_rows(summary)
    cells = {v["cls"]: v["text"] for v in row["verdicts"]}
    assert cells["eventfd"] == "growing (reported)" and row["judged"] == "short-lived: reported"


def test_artifact_without_per_process_has_no_table() -> None:
    summary = copy.deepcopy(_artifact("clean")["resource_summary"])
    assert isinstance(summary, dict)
    del summary["per_process"]
    assert process_rows(summary) == []
