"""Suite-wide pytest wiring: `cuda` tests skip cleanly on hosts without a CUDA device."""

from __future__ import annotations

import functools

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_cuda = pytest.mark.skip(reason="needs a CUDA device; none is visible on this host")
    for item in items:
        if "cuda" in item.keywords and not _cuda_available():
            item.add_marker(skip_cuda)
