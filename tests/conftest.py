"""Suite-wide pytest wiring: `cuda` tests skip cleanly on hosts without a CUDA device, `linux_only`
tests (Linux /proc, os.eventfd, prctl, /dev/shm, the Linux soak sampler) on other platforms."""

from __future__ import annotations

import functools
import sys

import pytest

# Records @pytest.mark.cell bindings and run facts in JUnit XML (inactive without --junitxml).
pytest_plugins = ["matrix.pytest_cell"]


@functools.cache
def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "linux_only: needs Linux /proc, os.eventfd, prctl or /dev/shm; skipped elsewhere"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_cuda = pytest.mark.skip(reason="needs a CUDA device; none is visible on this host")
    skip_linux = pytest.mark.skip(
        reason=f"needs Linux (/proc, os.eventfd, prctl or /dev/shm); this host is {sys.platform}"
    )
    for item in items:
        if "cuda" in item.keywords and not _cuda_available():
            item.add_marker(skip_cuda)
        if "linux_only" in item.keywords and not sys.platform.startswith("linux"):
            item.add_marker(skip_linux)
