"""The phase probe at its script path, for callers that run it as a file:

    uv run scripts/benchmark/torch_env/g1_flashsac_backend.py --backends mjwarp,mujoco --num-envs 2048 \
        --warmup 20 --iters 100 [--acceptance] [--mjwarp-device cpu] --output /abs/path/probe.json

Same flags, behaviour and exit codes as the ``probe`` console script (harness/probe/cli.py; docs/probe.md).
``--output`` must be absolute.
"""

from __future__ import annotations

from soakbench.harness.probe.cli import main

if __name__ == "__main__":
    main()
