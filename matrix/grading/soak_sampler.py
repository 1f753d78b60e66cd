"""Which soak monitor sampler a platform's soak evidence must come from, and what that sampler cannot
check (pure; the limits are the samplers' own declarations in harness.soak.host.portable).

Linux cells count only Linux-sampler soaks: that sampler checks every pass-table row and resource
class, so a portable soak, which checks fewer, never stands in for it there. macOS has no ``/proc``,
subreaper or eventfd, so a macos-mps cell reaches Benchmarked only through a portable-sampler soak, and
its page names the criteria that sampler leaves unchecked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soakbench.harness.soak.host.portable import UNOBSERVABLE_CLASSES
from soakbench.harness.soak.verdicts.judgement import declared_limits

PLATFORM_SAMPLER: dict[str, str] = {"linux-cpu": "linux", "linux-cuda": "linux", "macos-mps": "portable"}
# A project's own platform: the sampler the soak monitor uses on its host system.
SYSTEM_SAMPLER: dict[str, str] = {"Linux": "linux", "Darwin": "portable"}
SHM_ROW = "orphaned_shm_segments"


def sampler_of(doc: Mapping[str, Any]) -> str:
    """The sampler a soak artifact names; one written before samplers existed used the Linux one."""
    section = doc.get("sampler")
    name = section.get("name") if isinstance(section, Mapping) else None
    return name if isinstance(name, str) else "linux"


def unchecked_of(doc: Mapping[str, Any]) -> tuple[str, ...]:
    """The criteria a soak artifact's sampler declared it could not check: resource classes
    (``resource class eventfd``) and the ``orphaned_shm_segments`` row."""
    classes, shm_reason = declared_limits(doc.get("sampler"))
    out = [f"resource class {name}" for name in sorted(classes)]
    return (*out, f"row {SHM_ROW}") if shm_reason is not None else tuple(out)


def sampler_problem(platform: str, sampler: str, system: str | None = None) -> str | None:
    """Why a soak from ``sampler`` cannot count for a ``platform`` cell, or None (``system``: the host
    system a project's own platform declares)."""
    want = PLATFORM_SAMPLER.get(platform) or SYSTEM_SAMPLER.get(system or "")
    if want is None or sampler == want:
        return None
    return (
        f"wrong sampler: a {sampler}-sampler soak; {platform} soak evidence must come from the {want} sampler "
        "(docs/soak-reference.md, Samplers)"
    )


def platform_note(platform: str) -> str | None:
    """What this platform's soak evidence cannot check, for the cell's page (None: everything checked)."""
    if PLATFORM_SAMPLER.get(platform) != "portable":
        return None
    classes = " and ".join(sorted(UNOBSERVABLE_CLASSES))
    return (
        f"Soak evidence for {platform} comes from the portable (psutil) sampler, which cannot check the "
        f"resource classes {classes} (psutil counts fds but does not classify them) or the row {SHM_ROW} "
        "(macOS has no /dev/shm to list); its artifacts record them as not_observable / not_applicable, "
        "never as passed. No soak has been run on a Mac yet."
    )
