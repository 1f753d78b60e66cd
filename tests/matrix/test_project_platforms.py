"""A project's own platforms and lanes (pure): its inventory declares them, its JUnit summaries, index
entries and evidence name them, each refusal names the field and the project's own allowed values, and
`matrix affected` judges its evidence without a manifest by the project's own input roots."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import yaml

from soakbench.matrix.declared.inventory import parse_inventory
from soakbench.matrix.declared.project import derived_manifest
from soakbench.matrix.freshness.affected import TreeState, affected_cells
from soakbench.matrix.freshness.head import HeadInputs, judge_inputs
from soakbench.matrix.freshness.manifest import InputChange, changed_inputs
from soakbench.matrix.grading.evidence import index_entry_problems, platform_problems
from soakbench.matrix.grading.policy import grade_cell
from soakbench.matrix.grading.soak_sampler import sampler_problem
from soakbench.matrix.intake.ingest import _check_cells
from soakbench.matrix.intake.junit import summarize_junit
from soakbench.matrix.model import EvidenceFacts, MatrixInputError
from tests.matrix._fixtures import junit_xml

INVENTORY = """\
schema_version: 1
project:
  name: armproject
  facts: declared
  axes: {algo: [toy], task: [count], backend: [py]}
  platforms: [linux-cpu, {name: linux-arm64, system: Linux}, {name: mac-arm, system: Darwin}]
  lanes: [cpu, arm64]
  inputs: [settings.toml, lib/]
canonical_soak: {min_duration_s: 3600}
cells:
  - algo: toy
    task: count
    backend: py
    platform: [linux-cpu, linux-arm64, mac-arm]
    tests: {lane: arm64}
    probe_required: false
    soak: {min_duration_s: 1}
"""


def _parse(text: str = INVENTORY) -> Any:
    return parse_inventory(yaml.safe_load(text), None, "inv.yaml")


def test_declared_platforms_keep_their_order_and_systems() -> None:
    inventory = _parse()
    assert inventory.platforms == ("linux-cpu", "linux-arm64", "mac-arm")
    assert inventory.systems == {"linux-cpu": "Linux", "linux-arm64": "Linux", "mac-arm": "Darwin"}
    assert [c.key.platform for c in inventory.cells] == ["linux-cpu", "linux-arm64", "mac-arm"]
    assert {c.key.platform: c.system for c in inventory.cells}["mac-arm"] == "Darwin"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("{name: linux-arm64, system: Linux}", "linux-arm64",
         r"project\.platforms\[1\]: unknown platform 'linux-arm64'; allowed: linux-cuda, linux-cpu, "
         r"macos-mps, or a platform of the project's own declared with its host system"),
        ("{name: mac-arm, system: Darwin}", "{name: linux-cpu, system: Linux}",
         r"project\.platforms\[2\]: platform 'linux-cpu' is declared twice"),
        ("system: Darwin", "system: Plan9", r"project\.platforms\[2\]\.system: schema violation: 'Plan9' is not one of \['Linux', 'Darwin'"),
        ("tests: {lane: arm64}", "tests: {lane: cuda}",
         r"cells\[0\]\.tests\.lane: unknown lane 'cuda'; allowed \(declared in project\.lanes\): cpu, arm64"),
        ("platform: [linux-cpu, linux-arm64, mac-arm]", "platform: linux-riscv",
         r"cells\[0\]\.platform: unknown platform 'linux-riscv'; allowed \(declared in project\.platforms\): "
         r"linux-cpu, linux-arm64, mac-arm"),
    ],
)  # fmt: skip
def test_bad_platforms_and_lanes_name_the_field_and_the_declared_values(
    old: str, new: str, message: str
) -> None:
    assert old in INVENTORY
    with pytest.raises(MatrixInputError, match=message):
        _parse(INVENTORY.replace(old, new))


def test_lanes_default_to_this_runtimes() -> None:
    inventory = _parse(INVENTORY.replace("  lanes: [cpu, arm64]\n", "").replace("lane: arm64", "lane: mps"))
    assert inventory.lanes == ("cpu", "cuda", "mps")


def test_junit_summary_takes_the_inventorys_platforms_and_lanes() -> None:
    xml = junit_xml(
        "a" * 40, [("t", "toy/count/py", "passed")], platform="linux-arm64", lane="arm64"
    ).encode()
    summary = summarize_junit(xml, "j.xml", platforms=("linux-arm64",), lanes=("arm64",))
    assert (summary["platform"], summary["lane"]) == ("linux-arm64", "arm64")
    with pytest.raises(
        MatrixInputError, match=r"platform: unknown platform 'linux-arm64'; allowed: linux-cuda"
    ):
        summarize_junit(xml, "j.xml")  # this runtime's platforms
    cpu = junit_xml("a" * 40, [("t", "toy/count/py", "passed")], platform="linux-arm64", lane="cpu").encode()
    with pytest.raises(MatrixInputError, match=r"lane: unknown lane 'cpu'; allowed: arm64"):
        summarize_junit(cpu, "j.xml", platforms=("linux-arm64",), lanes=("arm64",))


def test_index_entries_and_platform_facts_follow_the_inventory() -> None:
    entry = {"kind": "soak", "platform": "linux-arm64", "lane": None}
    assert index_entry_problems(entry, 0, ("linux-arm64",), ("arm64",)) == []
    assert index_entry_problems(entry, 3) == [
        "entries[3].platform: unknown platform 'linux-arm64'; allowed: linux-cuda, linux-cpu, macos-mps"
    ]
    systems = {"linux-arm64": "Linux", "mac-arm": "Darwin"}
    assert platform_problems("linux-arm64", "arm64", "Linux", False, [], systems) == []
    assert platform_problems("mac-arm", None, "Linux-6.1-aarch64", False, [], systems) == [
        "recorded host system 'Linux-6.1-aarch64' is not Darwin, so it cannot be mac-arm evidence"
    ]
    assert platform_problems("linux-arm64", None, "Linux", False, []) == [
        "platform 'linux-arm64' is not one of the inventory's: linux-cuda, linux-cpu, macos-mps"
    ]


def test_a_projects_own_platform_needs_its_systems_sampler() -> None:
    assert sampler_problem("linux-arm64", "linux", "Linux") is None
    assert "must come from the portable sampler" in str(sampler_problem("mac-arm", "linux", "Darwin"))
    assert sampler_problem("macos-mps", "portable") is None  # this runtime's platforms: by name


def _soak(fingerprint: str) -> EvidenceFacts:
    """A passing soak of toy/count/py on linux-arm64 that records no input manifest."""
    return EvidenceFacts(id="soak-1", kind="soak", file="f.json", platform="linux-arm64", lane=None,
                         commit="a" * 40, dirty=False, passed=True, status_detail="soak status passed",
                         fresh=True, fingerprint=fingerprint, covers=(("toy", "count", "py"),),
                         duration_s=5.0)  # fmt: skip


def test_affected_judges_evidence_without_a_manifest_by_the_projects_input_roots() -> None:
    inventory = _parse()
    policy = next(c for c in inventory.cells if c.key.platform == "linux-arm64")
    ev = _soak("fp-before")
    result = grade_cell(policy, None, None, [ev], inventory.canonical_soak)
    roots = ("settings.toml", "lib/")
    before = TreeState(HeadInputs({"lib/a.py": "1", "README.md": "1"}), "fp-before", roots)
    readme = TreeState(HeadInputs({"lib/a.py": "1", "README.md": "2"}), "fp-before", roots)
    assert affected_cells([result], [ev], before, readme) == []
    code = TreeState(HeadInputs({"lib/a.py": "2", "README.md": "1"}), "fp-after", roots)
    (found,) = affected_cells([result], [ev], before, code)
    assert (found.key.platform, found.kind) == ("linux-arm64", "soak")
    assert found.cause == "lib/a.py (no input manifest: any change under settings.toml, lib/)"


def test_a_file_added_under_a_folder_root_stales_a_derived_manifest() -> None:
    """A manifest derived from `lib/` at the evidence's commit lists only the files there then; a file
    added under `lib/` later is a changed input (`matrix explain` names it, `matrix affected` reports it)."""
    inventory = _parse()
    policy = next(c for c in inventory.cells if c.key.platform == "linux-arm64")
    at_commit = {"lib/a.py": "1", "settings.toml": "1", "README.md": "1"}
    manifest = derived_manifest(at_commit, ("settings.toml", "lib/"))
    assert manifest is not None and set(manifest.files) == {"lib/a.py", "settings.toml"}
    ev = replace(_soak("fp"), inputs=manifest)
    unchanged = HeadInputs({**at_commit, "README.md": "2", "docs/new.md": "1"})
    assert judge_inputs(ev, unchanged, "abc123", True).fresh
    added = {**at_commit, "lib/new_plugin.py": "9"}
    judged = judge_inputs(ev, HeadInputs(added), "abc123", True)
    assert not judged.fresh and judged.stale == {None: "lib/new_plugin.py added since abc123"}
    assert changed_inputs(manifest, added, {}) == (InputChange("file", "lib/new_plugin.py", "-", "9"),)
    result = grade_cell(policy, None, None, [ev], inventory.canonical_soak)
    before = TreeState(HeadInputs(at_commit), "fp", ("settings.toml", "lib/"))
    after = TreeState(HeadInputs(added), "fp", ("settings.toml", "lib/"))
    (found,) = affected_cells([result], [ev], before, after)
    assert (found.kind, found.cause) == ("soak", "lib/new_plugin.py")


def test_a_soak_naming_no_inventory_cell_is_refused_at_ingest() -> None:
    inventory = _parse()
    ev = _soak("fp")
    doc = {"run_settings": {"cell": {"algo": "toy", "task": "count", "backend": "py"}}}
    _check_cells("soak.json", "soak", doc, ev, inventory)  # toy/count/py is a cell on linux-arm64
    typo = replace(ev, covers=(("toy", "cuont", "py"),))
    with pytest.raises(
        MatrixInputError,
        match=r"soak\.json: run_settings\.cell: toy/cuont/py names no cell of the inventory on linux-arm64; "
        r"allowed: toy/count/py$",
    ):
        _check_cells("soak.json", "soak", doc, typo, inventory)
