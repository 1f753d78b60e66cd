"""The at-a-glance pages: the grid, per-cell detail limited to the cell's own platform, collapsed history,
fail-closed footnotes, capabilities read from the backend classes, and conditional links."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape
from typer.testing import CliRunner, Result

from soakbench.matrix import cli as matrix_cli
from soakbench.matrix.declared.runtime_facts import runtime_capabilities
from soakbench.matrix.model import CellKey
from soakbench.matrix.publishing.grid import next_line
from soakbench.runtime.backends import backend_class
from soakbench.runtime.backends.contract import BackendCapabilities
from tests.matrix._fixtures import (
    REGISTRY,
    REPO,
    commit_all,
    configured_ok,
    git,
    junit_xml,
    make_repo,
    probe_artifact,
    soak_artifact,
    write_json,
)

SAC_WALK = "sac/g1_walk_flat/mujoco"
CPU_CELL = "cell-sac-g1_walk_flat-mujoco-linux-cpu"
CUDA_CELL = "cell-sac-g1_walk_flat-mujoco-linux-cuda"


def invoke(repo: Path, *args: str) -> Result:
    return CliRunner().invoke(matrix_cli.app, [*args, "--repo", str(repo)])


# The shipped policy's kinds beside the fixture's train test; a complete lane holds them all.
SHIPPED_KINDS = """\
import pytest


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="fault")
def test_fault():
    pass


@pytest.mark.cell("sac", "g1_walk_flat", "mujoco", kind="soak")
def test_soak():
    pass
"""
KIND_CASES = ("tests.test_kinds::test_fault", "tests.test_kinds::test_soak")


def _file_cpu_evidence(repo: Path, tmp: Path, tag: str) -> None:
    head = git(repo, "rev-parse", "HEAD")
    xml = tmp / f"junit-{tag}.xml"
    # the shipped linux-cpu policy: 3 bound tests, a soak of 600 s with 64 envs and 5000 iterations
    xml.write_text(
        junit_xml(head, [(name, SAC_WALK, "passed") for name in ("test_sac_walk_mujoco", *KIND_CASES)])
    )
    soak = soak_artifact(head, num_envs=64, iterations=5000, duration_s=650.0)
    for path, flags in (
        (xml, ()),
        (write_json(tmp / f"probe-{tag}.json", probe_artifact(head)), ("--platform", "linux-cpu")),
        (write_json(tmp / f"soak-{tag}.json", soak), ("--platform", "linux-cpu")),
    ):
        assert invoke(repo, "ingest", str(path), *flags).exit_code == 0


def real_shape_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repo with the shipped inventory: linux-cpu evidence at an older runtime (historical) and at
    HEAD (fresh), and a linux-cuda soak under that cell's budget; the matrix generated."""
    monkeypatch.setattr(matrix_cli, "runtime_inputs", lambda: (REGISTRY, configured_ok))
    inventory = (REPO / "matrix" / "inventory.yaml").read_text()
    repo = make_repo(tmp_path, inventory)
    (repo / "tests" / "test_kinds.py").write_text(SHIPPED_KINDS)
    commit_all(repo, "a test of each kind the shipped linux-cpu policy requires")
    _file_cpu_evidence(repo, tmp_path, "old")
    (repo / "runtime" / "core.py").write_text("VALUE = 2\n")
    commit_all(repo, "runtime change")
    _file_cpu_evidence(repo, tmp_path, "new")
    cuda_soak = soak_artifact(git(repo, "rev-parse", "HEAD"), gpu=True)
    path = write_json(tmp_path / "soak-cuda.json", cuda_soak)
    assert invoke(repo, "ingest", str(path), "--platform", "linux-cuda").exit_code == 0
    assert invoke(repo, "generate").exit_code == 0
    return repo


def section(html: str, anchor: str) -> str:
    found = re.search(rf'<section class="detail" id="{anchor}".*?</section>', html, re.S)
    assert found, anchor
    return found.group(0)


def evidence_ids(text: str) -> set[str]:
    return set(re.findall(r'class="evidence" href="[^"]*/([^/"]+)\.json"', text))


def test_grid_first_and_each_cell_lists_only_its_own_platform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = real_shape_repo(tmp_path, monkeypatch)
    html = (repo / "reports" / "support-matrix.html").read_text()
    doc = json.loads((repo / "reports" / "support-matrix.json").read_text())
    platform_of = {e["id"]: e["platform"] for e in doc["evidence"]}
    # The grid comes first: 5 rows (entrypoint x task, and the 2-rank sac/g1_walk_flat row), 6 columns
    # (backend x platform), 24 single-rank cells and 2 of 2 ranks (mujoco on linux-cuda and linux-cpu).
    grid = html[html.index('id="grid"') : html.index("</table>", html.index('id="grid"'))]
    assert grid.count("<tr>") == 2 + 5 and grid.count('class="cell"') == 24 + 2
    assert html.index('id="grid"') < html.index('id="capabilities"') < html.index('id="cells"')
    cpu = section(html, CPU_CELL)
    counted, _, rest = cpu.partition('<details class="historical">')
    assert len(evidence_ids(counted)) == 3 and "Benchmarked" in cpu
    history = rest.partition("</details>")[0]
    assert len(evidence_ids(history)) == 3  # the older runtime's evidence, collapsed
    assert {platform_of[i] for i in evidence_ids(cpu)} == {"linux-cpu"}
    cuda = section(html, CUDA_CELL)
    (cuda_soak,) = evidence_ids(cuda)  # the linux-cpu evidence is not listed under a linux-cuda cell
    assert platform_of[cuda_soak] == "linux-cuda" and "soak under the cell" in cuda
    # The JSON stays complete: the linux-cuda cell still records every covering piece with its verdict.
    (json_cuda,) = [c for c in doc["cells"] if c["backend"] == "mujoco" and c["platform"] == "linux-cuda"
                    and c["algo"] == "sac" and c["task"] == "g1_walk_flat" and c["ranks"] == 1]  # fmt: skip
    assert len(json_cuda["evidence"]) == 7
    assert sum(e["verdict"].startswith("wrong platform") for e in json_cuda["evidence"]) == 6


def test_unsupported_cells_show_their_reason_on_hover_and_in_a_footnote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = real_shape_repo(tmp_path, monkeypatch)
    html = (repo / "reports" / "support-matrix.html").read_text()
    doc = json.loads((repo / "reports" / "support-matrix.json").read_text())
    reasons = {c["unsupported_reason"] for c in doc["cells"] if c["unsupported_reason"]}
    assert len(reasons) == 2
    td = re.search(r'<td class="cell" data-cell="sac/g1_walk_flat/mjwarp@linux-cpu"[^>]*>', html)
    assert td and 'title="fail-closed: MJWarp is supported on CUDA devices only' in td.group(0)
    footnotes = html[html.index('id="footnotes"') : html.index("</ol>")]
    for reason in reasons:
        assert str(escape(reason)) in footnotes
    md = (repo / "docs" / "support-matrix.md").read_text()
    assert "| sac | g1_walk_flat |" in md and "Unsupported [1]" in md and "Unsupported [2]" in md
    assert md.count(" @ ") >= 6 and "**Benchmarked**<br>Recommended: needs a recommendation" in md
    assert "- sac/g1_walk_flat/mujoco@linux-cpu: **Benchmarked**; counts: [junit]" in md


def test_capabilities_come_from_the_backend_classes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mujoco = backend_class("mujoco")
    declared = mujoco.capabilities

    def marked(cls: type, platform: Any) -> BackendCapabilities:
        from dataclasses import replace

        return replace(declared(platform), process_model=f"declared for {platform.system} by the class")

    monkeypatch.setattr(mujoco, "capabilities", classmethod(marked))
    repo = real_shape_repo(tmp_path, monkeypatch)
    html = (repo / "reports" / "support-matrix.html").read_text()
    md = (repo / "docs" / "support-matrix.md").read_text()
    assert "declared for Darwin by the class" in html and "declared for Linux by the class" in md
    rows = json.loads((repo / "reports" / "support-matrix.json").read_text())["capabilities"]
    assert {(r["backend"], r["platform"]) for r in rows} == {
        (b, p) for b in ("mujoco", "mjwarp") for p in ("linux-cuda", "linux-cpu", "macos-mps")
    }
    warp_cuda = next(r for r in rows if (r["backend"], r["platform"]) == ("mjwarp", "linux-cuda"))
    expected = runtime_capabilities(CellKey("flashsac", "g1_motion_tracking", "mjwarp", "linux-cuda"))
    assert warp_cuda["physics_device"] == expected.physics_device == "cuda"
    assert warp_cuda["cuda_graph_possible"] and warp_cuda["host_transfers"] == {}
    assert warp_cuda["mps_sharing"] == "shares the GPU" and warp_cuda["learner_device"] == "cuda"
    host = next(r for r in rows if (r["backend"], r["platform"]) == ("mujoco", "linux-cpu"))
    inventory = mujoco.transfer_inventory()
    assert sum(host["host_transfers"].values()) == sum(t.max_per_control_step for t in inventory)
    assert host["data_plane"] == "host_bridge" and host["mps_sharing"] == "unavailable"


def test_probe_history_and_soak_reports_are_linked_when_they_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = real_shape_repo(tmp_path, monkeypatch)
    html = (repo / "reports" / "support-matrix.html").read_text()
    assert "probe-history" not in html and "soak report" not in html
    (repo / "reports" / "probe-history.html").write_text("<html></html>")
    index = json.loads((repo / "matrix" / "evidence" / "index.json").read_text())
    soak = next(e for e in index["entries"] if e["kind"] == "soak" and e["platform"] == "linux-cpu")
    report = Path(soak["file"]).with_suffix(".html").as_posix()
    (repo / report).write_text("<html></html>")
    assert invoke(repo, "generate").exit_code == 0
    html = (repo / "reports" / "support-matrix.html").read_text()
    assert 'href="../reports/probe-history.html"' in html
    assert f'<a class="report" href="../{report}">soak report</a>' in html
    md = (repo / "docs" / "support-matrix.md").read_text()
    assert "(../reports/probe-history.html)" in md
    doc = json.loads((repo / "reports" / "support-matrix.json").read_text())
    assert doc["links"] == {"probe_history": "reports/probe-history.html"}
    assert next(e for e in doc["evidence"] if e["id"] == soak["id"])["report"] == report


def _cell(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "unsupported_reason": None,
        "blockers": [],
        "evidence": [],
        "policy": {"test_lane": "cuda", "probe_required": True},
        "recommendation": None,
    }
    return {**base, **kw}


@pytest.mark.parametrize(
    ("cell", "line"),
    [
        (_cell(unsupported_reason="no CUDA here"), "fail-closed"),
        (_cell(), "top grade"),
        (_cell(blockers=[{"grade": "Tested", "reasons": ["long"]}]), "Tested: needs cuda-lane JUnit"),
        (_cell(blockers=[{"grade": "Tested", "reasons": ["x"]}],
               evidence=[{"kind": "junit", "counts": False, "verdict": "bound tests failed: 1 failed"}]),
         "Tested: bound tests failed"),
        (_cell(blockers=[{"grade": "Benchmarked", "reasons": ["x"]}],
               evidence=[{"kind": "probe", "counts": True, "verdict": "counts"}]),
         "Benchmarked: needs a fresh soak"),
        (_cell(blockers=[{"grade": "Recommended", "reasons": ["no canonical soak"]}],
               recommendation={"decision": "recommend"}),
         "Recommended: needs a canonical soak"),
        (_cell(blockers=[{"grade": "Registered", "reasons": ["task 'x' is not registered"]}]),
         "Registered: task 'x' is not registered"),
    ],
)  # fmt: skip
def test_next_line_is_one_short_reason(cell: dict[str, Any], line: str) -> None:
    short, full = next_line(cell)
    assert short == line and len(short) <= 40
    expected = [cell["unsupported_reason"]] if cell["unsupported_reason"] else []
    expected += [r for b in cell["blockers"][:1] for r in b["reasons"]]
    assert all(reason in full for reason in expected)  # the hover text carries them in full
