"""One MuJoCo physics thread against two under ``probe compare``: a real 1.8x slowdown is called slower and
fails the gate. Its premise is a free second core, so it is ``exclusive``: it runs last in the lane, with
the host to itself (tests/lane.py), and not in the probe-compare group, whose module probes run early."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.probe.test_two_probes import _compare, _probe


def _limit(path: Path) -> float:
    """The median raw-physics control-step rate of a mujoco probe."""
    summary = json.loads(path.read_text())["backends"]["mujoco"]["summary"]
    return float(summary["physics_control_steps_per_s"]["median"])


@pytest.mark.slow
@pytest.mark.exclusive  # its premise is a free second core: under xdist it runs with the host to itself
def test_one_physics_thread_against_two_is_slower_and_fails(tmp_path: Path) -> None:
    """On a 2-core host one MuJoCo thread is about 1.8x slower than two, when the second core is free:
    with other processes holding most of a core, two threads gain little or nothing (measured: 3.2k
    vs 2.9k env steps/s at load 8), and the comparison rightly calls it inconclusive."""
    settings = ("--backends", "mujoco", "--num-envs", "256", "--warmup", "5", "--iters", "40")
    more = ("--rounds", "6", "--processes", "3")
    two = _probe(tmp_path / "two.json", *settings, *more, "--physics-threads", "2")
    one = _probe(tmp_path / "one.json", *settings, *more, "--physics-threads", "1")
    other = json.loads(two.read_text())["contention"]["other_cpu_share"]
    # the premise is a second core free for the second thread; a valid run here measured 58 %
    if other is not None and other > 0.65:
        pytest.skip(f"other processes used {other:.0%} of the CPUs during the 2-thread probe")
    report_path = tmp_path / "report.json"
    done = _compare(two, one, "--fail-on-regression", "--json-file", str(report_path))
    assert done.returncode in (0, 1), done.stderr
    report = json.loads(report_path.read_text())
    assert {"field": "settings.physics_threads", "base": 2, "new": 1} in report["setting_differences"]
    rows = {r["measure"]: r for r in report["measures"]}
    floor = rows["env_control_steps_per_s"]["noise_floor"]
    if any("of the CPUs, more than" in (r["note"] or "") for r in rows.values()):  # the host-load rule
        pytest.skip("the host's load differed between the two probes by more than the compare allows")
    if floor >= 0.8:  # another job overlapped part of a run: its processes differ by more than the effect
        pytest.skip(f"this host could not resolve a 1.8x change in this run (noise floor {floor:.0%})")
    limits = [_limit(path) for path in (two, one)]  # the raw rollout, measured in the same processes
    if limits[0] <= limits[1] * (1 + floor):  # the premise: the second thread found a free core
        pytest.skip(
            f"the second physics thread sped the raw rollout up only x{limits[0] / limits[1]:.2f} "
            f"({limits[0]:,.0f} vs {limits[1]:,.0f} control steps/s), within the noise floor {floor:.0%}: "
            "other processes held the second core"
        )
    print({name: (row["verdict"], row["noise_floor"]) for name, row in rows.items()})
    assert "slower" in {rows["env_control_steps_per_s"]["verdict"], rows["iteration_ms"]["verdict"]}
    assert "faster" not in {rows["env_control_steps_per_s"]["verdict"], rows["iteration_ms"]["verdict"]}
    # the gate reads the headline measures only (an iteration_ms call alone is reported, not gated)
    gated = "slower" in {rows["env_control_steps_per_s"]["verdict"], rows["efficiency"]["verdict"]}
    assert done.returncode == (1 if gated else 0) and report["regression"] is gated, done.stderr
