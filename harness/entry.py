"""The harness's console scripts that need the training extra, checked before their modules load."""

from __future__ import annotations

from soakbench.foundation.extras import METRICS, TRAIN, require


def probe() -> None:
    """`probe`: exit 2 naming the extra when the training stack is missing, else the probe's CLI."""
    require(TRAIN, "probe")
    from soakbench.harness.probe.cli import main

    main()


def extract_metrics() -> None:
    """`extract-metrics`: exit 2 naming the extra when TensorBoard is missing, else the extractor."""
    require(METRICS, "extract-metrics")
    from soakbench.harness.metrics import main

    main()
