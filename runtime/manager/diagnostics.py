"""The manifest's optimisation diagnostics: what the backend and the learner were asked to enable, what
they enabled, and why not.

Both payloads have one shape: ``{available: true, <who>, diagnostics: {name: {requested, enabled,
disable_reason}}}`` or an explicit ``{available: false, <who>, unavailable_reason}``; never null, and
building one never raises, so a diagnostic probe cannot fail a run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from soakbench.runtime.backends.contract import (
    BackendDiagnostics,
    diagnostics_payload,
    optimization_entries,
    unavailable_diagnostics,
)


def backend_diagnostics_payload(env: object, backend_type: str | None) -> BackendDiagnostics:
    """The ``backend_diagnostics`` block of ``env.backend`` (``runtime.backends.contract``); an env
    without a readable backend gets the explicit unavailable payload."""
    try:
        return diagnostics_payload(env.backend)  # type: ignore[attr-defined]  # any env; a missing backend is caught
    except Exception as exc:
        return unavailable_diagnostics(backend_type, f"diagnostic probe raised {type(exc).__name__}: {exc}")


def learner_diagnostics_payload(learner: object | None) -> dict[str, Any]:
    """The ``learner_diagnostics`` block from ``learner.runtime_diagnostics()`` (None: never built)."""
    if learner is None:
        return _learner_unavailable(None, "the learner was never built (the run ended during start-up)")
    name = type(learner).__name__
    getter: Callable[[], Mapping[str, Mapping[str, Any]]] | None = getattr(
        learner, "runtime_diagnostics", None
    )
    if getter is None:
        return _learner_unavailable(name, "learner declares no runtime diagnostics")
    try:
        diagnostics = optimization_entries(getter())
    except Exception as exc:  # a broken probe is recorded, never raised
        return _learner_unavailable(name, f"runtime_diagnostics raised {type(exc).__name__}: {exc}")
    if not diagnostics:
        return _learner_unavailable(name, "learner declares no runtime diagnostics")
    return {"available": True, "learner": name, "diagnostics": diagnostics}


def _learner_unavailable(name: str | None, reason: str) -> dict[str, Any]:
    return {"available": False, "learner": name, "unavailable_reason": reason}


def ambient_mps_facts() -> dict[str, Any]:
    """The MPS facts a CUDA run observes in its environment, or the error observing them: recorded in
    the manifest, never allowed to fail the run."""
    try:
        from soakbench.foundation.mps import ambient_facts

        return ambient_facts(os.environ)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
