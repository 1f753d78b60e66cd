"""The portable sampler against the Linux sampler on the same fault programs: the same verdict wherever
both observe a class, and ``not_observable`` (with the reason) where the portable one cannot. Real
processes, short runs (~3-6 s each, two per program)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soakbench.matrix.grading.rederive import disagreements
from tests.harness.soak._soakrun import SoakOutcome, assert_nothing_left, remove_fault_segments, soak_monitor

# The Linux sampler is half of every comparison; the fault programs use os.eventfd and /dev/shm.
pytestmark = [pytest.mark.soak, pytest.mark.linux_only]

FD_CLASSES_PSUTIL_CANNOT_SEE = {"eventfd", "shared_memory_fd"}

#: program, its arguments, the expected classification, the class (or row) that must catch it
CASES = [
    ("healthy_plateau.py", ("6",), None, None),
    ("leak_child_rss.py", ("4",), "resource_leak", "rss"),
    ("leak_eventfd.py", ("4",), "resource_leak", "fd_total"),
    ("daemon_orphan.py", ("4",), "resource_leak", "post_shutdown_residual_processes"),
    ("shm_unlinked.py", ("held", "4"), "resource_leak", "orphaned_shm_segments"),
]


def _soak(tmp: Path, program: str, args: tuple[str, ...], sampler: str) -> tuple[SoakOutcome, dict[str, Any]]:
    (tmp / sampler).mkdir()
    outcome = soak_monitor(tmp / sampler, program, *args, sampler=sampler)
    try:
        artifact = outcome.artifact
        assert_nothing_left(outcome)
    finally:
        if program == "shm_unlinked.py":
            remove_fault_segments(outcome)
    return outcome, artifact


def _rederives(artifact: dict[str, Any]) -> bool:
    """The matrix re-derives every verdict from the samples and the declared sampler limits."""
    lines = Path(artifact["samples_path"]).read_text().splitlines()
    found = disagreements(artifact, [json.loads(line) for line in lines])
    assert found == []
    return True


def _last_sample(artifact: dict[str, Any]) -> dict[str, Any]:
    sample: dict[str, Any] = json.loads(Path(artifact["samples_path"]).read_text().splitlines()[-1])
    return sample


def _assert_same_sample_shape(linux: dict[str, Any], portable: dict[str, Any]) -> None:
    """Both samplers write one record shape, the signals of the run's limits included (the zombies, the
    run's /dev/shm, its disk, each process's mapping count and open-files limit)."""
    a, b = _last_sample(linux), _last_sample(portable)
    assert a.keys() == b.keys() and {"zombies", "shm", "disk"} <= a.keys()
    assert a["totals"].keys() == b["totals"].keys() and {"zombies", "map_count"} <= a["totals"].keys()
    assert a["shm"].keys() == b["shm"].keys() and a["shm"]["fs_size_bytes"] == b["shm"]["fs_size_bytes"]
    assert [d.keys() for d in a["disk"]] == [d.keys() for d in b["disk"]] and len(a["disk"]) == 1
    # ``detail`` (fds and threads by family) is the Linux sampler's sparse record: every 12th sample
    keys = {frozenset(p) - {"detail"} for p in a["processes"] + b["processes"]}
    assert len(keys) == 1 and {"map_count", "fd_limit"} <= next(iter(keys)), keys
    # the same program under the same monitor: every process inherits one open-files limit
    assert {p["fd_limit"] for p in a["processes"]} == {p["fd_limit"] for p in b["processes"]}


def _observed(artifact: dict[str, Any]) -> dict[str, str]:
    classes = artifact["resource_summary"]["observation"]["classes"]
    verdicts = artifact["resource_summary"]["leak_verdicts"]
    return {name: verdicts[name] for name, entry in classes.items() if entry["status"] == "observed"}


@pytest.mark.parametrize(("program", "args", "classification", "catcher"), CASES)
def test_portable_verdicts_agree_with_linux(
    tmp_path: Path, program: str, args: tuple[str, ...], classification: str | None, catcher: str | None
) -> None:
    linux_outcome, linux = _soak(tmp_path, program, args, "linux")
    portable_outcome, portable = _soak(tmp_path, program, args, "portable")
    assert linux["sampler"]["name"] == "linux" and portable["sampler"]["name"] == "portable"
    for art, outcome in ((linux, linux_outcome), (portable, portable_outcome)):
        assert art["failure_classification"] == classification, (
            art["failure_reason"],
            outcome.stderr[-2000:],
        )
        assert outcome.returncode == (0 if classification is None else 1)

    classes = portable["resource_summary"]["observation"]["classes"]
    for name in FD_CLASSES_PSUTIL_CANNOT_SEE:
        assert classes[name]["status"] == "not_observable"
        assert "cannot classify" in classes[name]["reason"]
    both = _observed(linux).keys() & _observed(portable).keys()
    assert "rss" in both and (catcher not in _observed(portable) or catcher in both), (linux, portable)
    verdicts = {c: (_observed(linux)[c], _observed(portable)[c]) for c in both}
    assert all(a == b for a, b in verdicts.values()), verdicts

    assert _rederives(linux) and _rederives(portable)
    _assert_same_sample_shape(linux, portable)

    # Every row agrees (/dev/shm is listed under both here) but trend_observation: two runs of a
    # 4-second program on a loaded host may differ in how many samples a class got, not in its verdict.
    rows = {r["name"]: r["result"] for r in linux["criteria"] if r["name"] != "trend_observation"}
    assert rows == {r["name"]: r["result"] for r in portable["criteria"] if r["name"] != "trend_observation"}
    if catcher in rows:
        assert rows[catcher] == "fail"
    elif catcher is not None:
        assert _observed(portable)[catcher] == "growing" and rows["leak_verdicts"] == "fail"
    if program == "leak_eventfd.py":  # what only the Linux sampler can name
        assert _observed(linux)["eventfd"] == "growing" and linux["sampler"]["unobservable_classes"] == {}
