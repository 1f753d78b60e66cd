"""Suite-wide pytest wiring: `cuda` tests skip cleanly on hosts without a CUDA device, `linux_only`
tests (Linux /proc, os.eventfd, prctl, /dev/shm, the Linux soak sampler) on other platforms, and the
``chromium`` fixture every page-rendering test drives headless Chromium through (such a test fails,
naming chromium, where it is missing: `make test` installs it)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# Records @pytest.mark.cell bindings and run facts in JUnit XML (inactive without --junitxml).
pytest_plugins = ["soakbench.matrix.pytest_cell", "tests.lane"]


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


CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")  # the Makefile's chromium step too
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)  # fmt: skip
CHROMIUM_MISSING = (
    "chromium is not installed (none of {names} is on PATH), and the page-rendering tests need it: "
    "`make test` installs it (as root, with apt-get), or install it yourself: apt-get install -y chromium"
)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
KEEP_SCREENSHOTS = "SOAKBENCH_KEEP_SCREENSHOTS"  # a folder: every screenshot taken is copied there


@dataclass(frozen=True)
class Chromium:
    """Headless Chromium for one test: ``binary``, a private profile under ``workdir``, and the test's
    ``name`` (screenshots kept under ``$SOAKBENCH_KEEP_SCREENSHOTS`` are named after it)."""

    binary: str
    workdir: Path
    name: str

    def run(self, *args: str, profile: str = "chromium-profile") -> subprocess.CompletedProcess[str]:
        """Chromium with ``args``; a non-zero exit fails the test with Chromium's stderr."""
        command = [self.binary, *CHROMIUM_FLAGS, f"--user-data-dir={self.workdir / profile}", *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
        if done.returncode != 0:
            pytest.fail(f"chromium {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
        return done

    def dump_dom(self, url: str, *args: str) -> str:
        """The DOM of ``url`` after its scripts ran (``--dump-dom``)."""
        return self.run(*args, "--dump-dom", url, profile="chromium-profile-dom").stdout

    def screenshot(self, url: str, shot: Path, size: str) -> Path:
        """A PNG of ``url`` in a ``size`` (``W,H``) window; fails unless Chromium wrote one."""
        self.run(f"--screenshot={shot}", f"--window-size={size}", url, profile="chromium-profile-png")
        assert shot.is_file() and shot.read_bytes()[:8] == PNG_SIGNATURE, f"chromium wrote no PNG at {shot}"
        import matplotlib.image

        pixels = matplotlib.image.imread(str(shot))
        assert pixels.reshape(-1, pixels.shape[-1]).std(axis=0).max() > 0, f"{shot} is one flat colour"
        keep = os.environ.get(KEEP_SCREENSHOTS)
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(keep) / f"{self.name}-{shot.name}")
        return shot


def find_chromium() -> str | None:
    """The first Chromium binary on PATH, or None."""
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


@pytest.fixture
def chromium(tmp_path: Path, request: pytest.FixtureRequest) -> Chromium:
    """Headless Chromium; the test fails (never skips) where it is missing, naming it and its install."""
    binary = find_chromium()
    if binary is None:
        pytest.fail(CHROMIUM_MISSING.format(names=", ".join(CHROMIUM_NAMES)), pytrace=False)
    return Chromium(binary, tmp_path, re.sub(r"[^\w.-]+", "_", request.node.name))
