"""What the runtime says about a cell: registries (Registered) and composition per platform (Configured).

The runtime is imported lazily so that ``matrix`` never imports torch or a physics backend. Platform
facts are stated explicitly per platform (never read from this host), so ``linux-cuda`` is validated
here exactly as it would be on a CUDA host.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from foundation.vocab import ALGOS
from matrix.model import PLATFORM_SYSTEM, CellKey

if TYPE_CHECKING:  # the runtime is imported lazily at run time (see the module docstring)
    from runtime.config import PlatformFacts

# ConfiguredCheck(key) -> None when the owner composes and validates for key.platform, else the reason.
ConfiguredCheck = Callable[[CellKey], "str | None"]


@dataclass(frozen=True)
class Registry:
    """Names the runtime registers: entrypoints (algos), tasks and backends."""

    algos: frozenset[str]
    tasks: frozenset[str]
    backends: frozenset[str]


def load_registry() -> Registry:
    """Read the runtime's registries (``runtime.config.ALGOS``, ``TASKS``, ``BACKENDS``)."""
    from runtime.backends import BACKENDS
    from runtime.tasks import TASKS

    return Registry(algos=frozenset(ALGOS), tasks=frozenset(TASKS), backends=frozenset(BACKENDS))


def platform_facts(platform: str) -> PlatformFacts:
    """``runtime.config.PlatformFacts`` describing ``platform`` (one device; no HIP build)."""
    from runtime.config import PlatformFacts

    return PlatformFacts(
        system=PLATFORM_SYSTEM[platform],
        cuda_available=platform == "linux-cuda",
        cuda_device_count=1 if platform == "linux-cuda" else 0,
        hip_build=False,
        mps_available=platform == "macos-mps",
    )


def runtime_configured(key: CellKey) -> str | None:
    """Compose ``key``'s owner YAML and validate it for ``key.platform``; the first problem or None."""
    from runtime.config import ConfigError, compose, platform_blockers

    try:
        cfg = compose(key.algo, key.task, key.backend)
    except ConfigError as exc:
        return f"compose failed: {exc}"
    problems = platform_blockers(cfg, platform_facts(key.platform))
    return f"not valid on {key.platform}: {problems[0]}" if problems else None
