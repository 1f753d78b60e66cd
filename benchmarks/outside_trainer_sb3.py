"""A trainer nobody here wrote, for the survival verdict's false-alarm figures: Stable-Baselines3's PPO on
gymnasium's CartPole (both from PyPI), soaked with `soak monitor` as any user's job would be.

This file only starts it and appends one ``progress.jsonl`` record per rollout to the log dir (the
monitor's liveness and its iterations and env steps); the training loop, the policy, the rollout buffer
and the logger are Stable-Baselines3's. Stable-Baselines3 is not a dependency of soakbench: install it in
a separate environment that sees the project's torch, for example

    python3 -m venv /tmp/outside
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/outside/lib/python3.11/site-packages/project.pth
    /tmp/outside/bin/pip install --no-deps stable-baselines3 gymnasium cloudpickle farama-notifications \\
        pandas pytz tzdata
    uv run --frozen soak monitor --must-survive 72h --log-dir /abs/run --output /abs/soak.json \\
        --sample-interval-seconds 1 -- /tmp/outside/bin/python benchmarks/outside_trainer_sb3.py /abs/run 600

Arguments: LOG_DIR, then the seconds to train for (default 600) and the seed (default 0).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import gymnasium
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback


class Progress(BaseCallback):  # type: ignore[misc]  # Stable-Baselines3 is not installed for mypy
    """One progress record per rollout; stops training once the time budget is spent."""

    def __init__(self, log_dir: Path, seconds: float) -> None:
        super().__init__()
        self.path = log_dir / "progress.jsonl"
        self.deadline = time.monotonic() + seconds
        self.rollouts = 0

    def _on_step(self) -> bool:
        return time.monotonic() < self.deadline

    def _on_rollout_end(self) -> None:
        self.rollouts += 1
        record = {"time": time.time(), "iteration": self.rollouts, "total_env_steps": int(self.num_timesteps)}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


def main() -> None:
    log_dir = Path(sys.argv[1])
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 600.0
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    log_dir.mkdir(parents=True, exist_ok=True)
    env = gymnasium.make("CartPole-v1")
    model = PPO("MlpPolicy", env, seed=seed, verbose=0, tensorboard_log=str(log_dir / "tb"), device="cpu")
    model.learn(total_timesteps=10**9, callback=Progress(log_dir, seconds))
    model.save(log_dir / "ppo_cartpole")
    with (log_dir / "progress.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"time": time.time(), "phase": "finalize", "final": True}) + "\n")


if __name__ == "__main__":
    main()
