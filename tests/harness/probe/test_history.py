"""``probe history``: the step detector on known data, then evidence committed to a temporary git repo
and pruned from its tree again (it must still count), two real tiny probes giving the raw samples, and
the page rendered in headless Chromium."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from soakbench.harness.probe.history import (
    HistoryInputError,
    Point,
    detect_steps,
    parse_probe,
    platform_of,
    series,
)
from soakbench.harness.probe.history_io import history_command
from tests.conftest import Chromium
from tests.matrix._fixtures import commit_all, make_repo, probe_artifact

REPO = Path(__file__).resolve().parents[3]
TINY = ("--backends", "mujoco", "--num-envs", "16", "--warmup", "2", "--iters", "10", "--processes", "2")
NAME = "probe-linux-cpu-any_g1_motion_tracking_mujoco-{commit}-{digest}.json"


def _point(commit: str, order: int, center: float | None, seed: int = 0) -> Point:
    groups = None
    if center is not None:
        rng = np.random.default_rng(seed)
        groups = [list(center * (1 + 0.01 * rng.standard_normal(5))) for _ in range(3)]
    value = center or 1000.0
    return Point(
        task="t", platform="p", backend="mujoco", commit=commit, order=(order, 0.0), sources=[commit],
        steps_per_s=(value, None, None), efficiency=(0.9, None, None), groups=groups,
        efficiency_groups=None if groups is None else [[0.9] * 5 for _ in groups],
    )  # fmt: skip


def test_the_step_detector_names_the_first_commit_after_a_change() -> None:
    points = [
        _point("a", 1, 1000.0, 1),
        _point("b", 2, 1002.0, 2),
        _point("c", 3, 800.0, 3),
        _point("d", 4, 801.0, 4),
    ]
    steps = detect_steps(points, 0.05)
    assert [s["commit"] for s in steps] == ["c"] and steps[0]["verdict"] == "slower"
    assert steps[0]["previous"] == "b" and steps[0]["ratio"] == pytest.approx(0.8, rel=0.02)
    assert points[2].step is steps[0] and points[1].step is None


def test_points_without_raw_samples_take_no_part_in_step_detection() -> None:
    points = [_point("a", 1, 1000.0), _point("b", 2, None), _point("c", 3, 500.0)]
    assert detect_steps(points) == []


def test_series_are_in_commit_order_and_one_commit_is_pooled() -> None:
    late, early, again = _point("x", 5, 1000.0, 1), _point("w", 1, 1000.0, 2), _point("x", 6, 1000.0, 3)
    (only,) = series([late, early, again]).values()
    assert [p.commit for p in only] == ["w", "x"]
    assert only[1].groups is not None and len(only[1].groups) == 6 and only[1].sources == ["x", "x"]


def test_platform_comes_from_the_evidence_name_and_bad_artifacts_are_named() -> None:
    assert (
        platform_of("matrix/evidence/probe/" + NAME.format(commit="a" * 12, digest="b" * 12)) == "linux-cpu"
    )
    assert platform_of("/tmp/mine.json") == "given"
    with pytest.raises(HistoryInputError, match="schema_version"):
        parse_probe(json.dumps({"kind": "soakbench.probe", "schema_version": "9"}), "x")
    with pytest.raises(HistoryInputError, match="not valid JSON"):
        parse_probe("{", "x")


def _probe(out: Path, *extra: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "soakbench.harness.probe", *TINY, *extra, "--output", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc: dict[str, object] = json.loads(out.read_text())
    return doc


def _evidence(repo: Path, doc: dict[str, object], commit: str) -> Path:
    doc["context"]["source"]["commit"] = commit  # type: ignore[index]  # a probe artifact's known shape
    path = repo / "matrix" / "evidence" / "probe" / NAME.format(commit=commit[:12], digest=commit[-12:])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.slow
def test_history_reads_pruned_evidence_from_git_and_marks_a_real_step(
    tmp_path: Path, chromium: Chromium
) -> None:
    plain = _probe(tmp_path / "plain.json")
    slow = _probe(tmp_path / "slow.json", "--test-step-sleep-ms", "20")
    repo = make_repo(tmp_path)
    first = commit_all(repo, "base")
    old = _evidence(repo, probe_artifact(first, task="g1_motion_tracking"), first)  # 0.3.0: no samples
    second = commit_all(repo, "old evidence")
    middle = _evidence(repo, plain, second)
    third = commit_all(repo, "plain probe")
    _evidence(repo, slow, third)
    old.unlink()
    middle.unlink()  # both pruned from the tree: only git history still has them
    commit_all(repo, "slow probe, older evidence pruned")
    page = tmp_path / "out" / "probe-history.html"
    page.parent.mkdir()
    assert (
        history_command(
            [], {"task": "g1_motion_tracking", "backend": None, "platform": "linux-cpu"}, 0.05, page, repo
        )
        == 0
    )
    html = page.read_text()
    assert html.count("<img") == 1 and "0.3.0 artifacts" in html
    assert history_command([], {"task": None, "backend": None, "platform": "nowhere"}, 0.05, page, repo) == 1
    cases: list[tuple[dict[str, str | None], float, Path]] = [
        ({"task": "no_such_task", "backend": None, "platform": None}, 0.05, page),
        ({"task": None, "backend": "physx", "platform": None}, 0.05, page),
        ({"task": None, "backend": None, "platform": None}, 1.5, page),
        ({"task": None, "backend": None, "platform": None}, 0.05, tmp_path / "missing" / "page.html"),
        ({"task": None, "backend": None, "platform": None}, 0.05, tmp_path / "page.txt"),
    ]
    for filters, threshold, out in cases:
        assert history_command([], filters, threshold, out, repo) == 2
    assert not (tmp_path / "page.txt").exists()
    done = subprocess.run(
        [sys.executable, "-m", "soakbench.harness.probe", "history", "--output", str(page)],
        cwd=repo, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stderr.splitlines() if "g1_motion_tracking" in line]
    assert [r.split("│")[4].strip() for r in rows] == [first[:12], second[:12], third[:12]]
    assert "(no samples)" in rows[0] and "slower" in rows[2] and "slower" not in rows[1]
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    refused = subprocess.run(
        [sys.executable, "-m", "soakbench.harness.probe", "history", "--output", str(tmp_path / "never.html"), str(bad)],
        cwd=repo, capture_output=True, text=True, timeout=300, check=False, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert refused.returncode == 2 and "kind" in refused.stderr and not (tmp_path / "never.html").exists()
    shot = chromium.screenshot(page.as_uri(), tmp_path / "history.png", "1000,800")
    assert shot.stat().st_size > 10_000  # the plot, not an empty page
