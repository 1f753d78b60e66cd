"""Learning is real: a short CPU SAC run of the real trainer on g1_walk_flat must clearly lengthen
episodes over the uniform-random policy, read back from TensorBoard through extract-metrics.

Budget: 32 envs, 60 prefill iterations with uniform-random actions (the in-run baseline, ~1 900 env
steps, ~20-35 finished episodes of ~50-57 control steps), then SAC with 4 updates per iteration for
ITERATIONS iterations in total; the mean episode length of the last quarter of the windows must exceed
the in-run random baseline by MIN_RATIO. Both figures are printed so a failure shows the measured gap.

Calibration status (honest): MIN_RATIO comes from in-process runs of the same learner settings on the
2-core host (1 000-1 200 iterations x 32 envs: random ~55-57 steps -> SAC ~63-66, ratio ~1.15-1.2; see
docs/learners.md "Learning curves"). A full trainer run of this budget could not be completed on the
shared, overloaded host within the session (the trainer ran at ~1 iteration/s there), so the wall time
of this test (target <= ~4 min on 2 idle cores) is not yet measured; re-calibrate ITERATIONS/MIN_RATIO
from a trainer run before relying on it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.metrics import extract_metrics

NUM_ENVS = 32
PREFILL = 60
ITERATIONS = 1500
MIN_RATIO = 1.15


def _weighted_length(windows: list[dict]) -> tuple[float, int]:
    pairs = [
        (w["metrics"]["episode/count"], w["metrics"]["episode/length_mean"])
        for w in windows
        if w["metrics"].get("episode/count") and w["metrics"].get("episode/length_mean") is not None
    ]
    count = sum(c for c, _ in pairs)
    return (sum(c * length for c, length in pairs) / count if count else 0.0), int(count)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.cell("sac", "g1_walk_flat", "mujoco")
def test_sac_lengthens_episodes_over_random_policy(tmp_path: Path) -> None:
    log_dir = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "runtime.cli", "--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco",
        f"algo.num_envs={NUM_ENVS}", f"algo.max_iterations={ITERATIONS}", f"algo.prefill_iterations={PREFILL}",
        f"algo.learning_starts={NUM_ENVS * PREFILL}", "algo.updates_per_iteration=4", "algo.actor_lr=0.001",
        "algo.critic_lr=0.001", "algo.tau=0.02", "algo.init_alpha=0.01", f"algo.save_interval={ITERATIONS}",
        "training.no_play=true", "training.collector_metrics_interval=20", f"log_dir={log_dir}",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1700)
    assert proc.returncode == 0, proc.stderr[-3000:]
    windows = extract_metrics(log_dir, last=10**9)["windows"]
    random_len, random_n = _weighted_length([w for w in windows if w["step"] <= NUM_ENVS * PREFILL])
    late_len, late_n = _weighted_length(windows[-len(windows) // 4 :])
    print(f"random policy: {random_len:.1f} steps ({random_n} episodes); SAC late: {late_len:.1f} ({late_n})")
    assert random_n >= 10 and late_n >= 10
    assert late_len >= MIN_RATIO * random_len
