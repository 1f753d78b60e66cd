"""The canonical owner-routed FlashSAC / g1_motion_tracking / MJWarp long soak at its script path.

    uv run --no-sync scripts/benchmark/torch_env/g1_flashsac_soak.py \\
      --num-envs 1024 --iterations 65000 --min-duration-seconds 1800 --sample-interval-seconds 5 \\
      --startup-timeout-seconds 900 --stale-progress-seconds 300 --post-shutdown-grace-seconds 10 \\
      --extra-override algo.save_interval=10000 \\
      --log-dir /absolute/run-dir --output /absolute/soak.json

Exactly `soak run` with the same flags and defaults (see docs/soak-reference.md, "`soak run`"); this file
only forwards argv.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # run from any cwd without installing
    from soakbench.harness.soak.cli import main

    main(["run", *sys.argv[1:]])
