"""Soak evidence and the sampler that took it: Linux cells count only Linux-sampler soaks, a macos-mps
cell only portable-sampler ones, and its page names what that sampler cannot check (pure)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from soakbench.harness.soak.host.portable import PortableSampler
from soakbench.harness.soak.host.sampling import LINUX_CAPABILITIES
from soakbench.matrix.grading.policy import grade_cell
from soakbench.matrix.grading.soak_sampler import platform_note, sampler_of, sampler_problem, unchecked_of
from soakbench.matrix.model import CellKey, SoakBudget
from tests.matrix.test_grading import ALL, CANON, POLICY, SOAK
from tests.matrix.test_render_grid import real_shape_repo

MAC = CellKey("sac", "g1_walk_flat", "mujoco", "macos-mps")
MAC_POLICY = replace(POLICY, key=MAC, test_lane="mps", recommendation=None)
MAC_EVIDENCE = tuple(replace(ev, platform="macos-mps", lane="mps" if ev.lane else None) for ev in ALL)
MAC_SECTION = PortableSampler(Path("/nonexistent-shm-root")).capabilities.describe("portable")
MAC_UNCHECKED = unchecked_of({"sampler": MAC_SECTION})


def test_the_artifact_names_its_sampler_and_what_it_could_not_check() -> None:
    assert sampler_of({}) == "linux" and unchecked_of({}) == ()  # written before samplers: Linux
    assert sampler_of({"sampler": LINUX_CAPABILITIES.describe("linux")}) == "linux"
    assert sampler_of({"sampler": MAC_SECTION}) == "portable"
    assert MAC_UNCHECKED == (
        "resource class eventfd",
        "resource class shared_memory_fd",
        "row orphaned_shm_segments",
    )


def test_each_platform_counts_only_its_own_sampler() -> None:
    assert sampler_problem("linux-cpu", "linux") is None and sampler_problem("macos-mps", "portable") is None
    linux_cell = sampler_problem("linux-cuda", "portable")
    assert linux_cell is not None and linux_cell.startswith("wrong sampler") and "linux sampler" in linux_cell
    mac_cell = sampler_problem("macos-mps", "linux")
    assert mac_cell is not None and "portable sampler" in mac_cell


def test_a_macos_cell_reaches_benchmarked_only_through_a_portable_soak() -> None:
    portable = tuple(
        replace(ev, sampler="portable", unchecked=MAC_UNCHECKED) if ev.kind == "soak" else ev
        for ev in MAC_EVIDENCE
    )
    result = grade_cell(MAC_POLICY, None, None, portable, CANON)
    assert result.grade == "Benchmarked"
    soak = next(v for v in result.evidence if v.kind == "soak")
    assert soak.counts and "portable sampler could not check resource class eventfd" in soak.verdict
    linux = grade_cell(MAC_POLICY, None, None, MAC_EVIDENCE, CANON)  # a soak claiming the Linux sampler
    assert linux.grade == "Tested"
    assert any(v.verdict.startswith("wrong sampler") and not v.counts for v in linux.evidence)


def test_the_macos_page_names_the_unchecked_criteria_and_linux_pages_do_not() -> None:
    note = platform_note("macos-mps")
    assert note is not None
    for criterion in (
        "eventfd",
        "shared_memory_fd",
        "orphaned_shm_segments",
        "No soak has been run on a Mac",
    ):
        assert criterion in note
    result = grade_cell(MAC_POLICY, None, None, (), CANON)
    assert result.notes == (note,)
    assert platform_note("linux-cpu") is None
    assert grade_cell(POLICY, None, None, ALL, CANON).notes == ()


def test_a_portable_soak_never_counts_for_a_linux_cell() -> None:
    evidence = tuple(replace(ev, sampler="portable") if ev.kind == "soak" else ev for ev in ALL)
    result = grade_cell(replace(POLICY, soak=SoakBudget(60, 8, 100)), None, None, evidence, CANON)
    assert result.grade == "Tested"
    assert any(v.id == SOAK.id and v.verdict.startswith("wrong sampler") for v in result.evidence)


def test_both_pages_name_what_the_macos_soaks_cannot_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = real_shape_repo(tmp_path, monkeypatch)
    note = platform_note("macos-mps")
    assert note is not None
    md = (repo / "docs" / "support-matrix.md").read_text()
    [line] = [line for line in md.splitlines() if line.startswith("- Soak evidence for macos-mps")]
    assert (
        "row orphaned_shm_segments" in line
        and "eventfd and shared_memory_fd" in line
        and "sac/g1_walk_flat/mujoco@macos-mps" in line
    )
    assert "@linux-cpu" not in line  # and only the macos-mps cells carry it
    html = (repo / "reports" / "support-matrix.html").read_text()
    sections = re.findall(
        r'<section class="detail" id="[^"]*" data-cell="([^"]+)">(.*?)</section>', html, re.S
    )
    with_note = {label for label, body in sections if "portable (psutil) sampler" in body}
    assert with_note == {label for label, _ in sections if label.endswith("mujoco@macos-mps")}
    assert len(with_note) == 4
