"""``extract-metrics`` at its script path: ``extract_offpolicy_metrics.py RUN_DIR --last 20 --json``.

Same behaviour and exit codes as the ``extract-metrics`` console script (harness/metrics.py).
"""

from __future__ import annotations

from soakbench.harness.metrics import main

if __name__ == "__main__":
    main()
