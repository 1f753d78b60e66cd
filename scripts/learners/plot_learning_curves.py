"""Plot episode length and reward against env steps for training runs, read back with extract-metrics.

    uv run --frozen python scripts/learners/plot_learning_curves.py docs/img/learning_curves.png \
        sac/g1_walk_flat=/abs/run1 flashsac/g1_walk_flat=/abs/run2

Each point is one schema-v1 window (``episode/length_mean``, ``episode/reward_mean`` at step =
total_env_steps); windows without finished episodes are skipped. Also prints per-run summaries
(the mean episode length of the prefill windows = uniform-random policy, and of the last 20 %).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from soakbench.harness.metrics import extract_metrics


def curve(run_dir: Path) -> list[tuple[int, float, float, float]]:
    """[(env_steps, episode count, mean length, mean reward)] for windows with finished episodes."""
    data = extract_metrics(run_dir, last=10**9)
    out = []
    for w in data["windows"]:
        m = w["metrics"]
        if m.get("episode/count") and m.get("episode/length_mean") is not None:
            out.append(
                (w["step"], m["episode/count"], m["episode/length_mean"], m.get("episode/reward_mean") or 0.0)
            )
    return out


def weighted_length(points: list[tuple[int, float, float, float]]) -> float | None:
    total = sum(c for _, c, _, _ in points)
    return sum(c * length for _, c, length, _ in points) / total if total else None


def summary(run_dir: Path, prefill_steps: int) -> dict[str, Any]:
    """Random-policy (prefill) vs last-20 % mean episode length of one run."""
    pts = curve(run_dir)
    late = pts[int(len(pts) * 0.8) :]
    return {
        "run_dir": str(run_dir),
        "random_prefill_length": weighted_length([p for p in pts if p[0] <= prefill_steps]),
        "late_length": weighted_length(late),
        "late_reward": sum(p[1] * p[3] for p in late) / max(sum(p[1] for p in late), 1),
        "env_steps": pts[-1][0] if pts else 0,
    }


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib.pyplot as plt

    out = Path(argv[0])
    fig, (ax_len, ax_rew) = plt.subplots(1, 2, figsize=(11, 4))
    for spec in argv[1:]:
        label, _, path = spec.partition("=")
        pts = curve(Path(path))
        if not pts:
            print(f"{label}: no finished episodes in {path}", file=sys.stderr)
            return 2
        steps = [p[0] for p in pts]
        ax_len.plot(steps, [p[2] for p in pts], label=label)
        ax_rew.plot(steps, [p[3] for p in pts], label=label)
    ax_len.set(xlabel="env steps", ylabel="mean episode length (control steps)", title="episode length")
    ax_rew.set(xlabel="env steps", ylabel="mean episode return", title="episode reward")
    for ax in (ax_len, ax_rew):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    tmp = out.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=90)
    tmp.replace(out)  # atomic
    print(json.dumps({"written": str(out)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
