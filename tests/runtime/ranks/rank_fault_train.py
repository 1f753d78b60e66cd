"""A torchrun target for the rank tests: the real trainer, with training.test_fault=learner_exception
added on the rank named by FAULT_RANK at iteration FAULT_ITERATION."""

from __future__ import annotations

import os
import sys

from runtime.cli import main

if __name__ == "__main__":  # the collector is spawned, and spawning imports this file again
    if os.environ.get("RANK") == os.environ["FAULT_RANK"]:
        sys.argv += [
            "training.test_fault=learner_exception",
            f"training.test_fault_iteration={os.environ['FAULT_ITERATION']}",
        ]
    main()
