"""One resource limit as the soak records it: the record the host reads and the verdicts project to.

The host (harness.soak.host.limits) reads each limit where the kernel enforces it; the survival verdict
(harness.soak.verdicts) reads the same records back from an artifact. Neither may import the other, so
the record lives here, with the one way it is written and read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_FIELDS = ("resource", "scope", "value", "source", "in_use", "reason", "path", "usage_file")


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class Limit:
    """One limit: ``value`` in bytes or a count (None when not observable, with ``reason``), ``source``
    where it was read, ``in_use`` what its whole domain used at read time (None where unknown or per
    process), ``path`` the watched path of a ``disk`` limit, ``usage_file`` the file the domain's current
    use is read from at every sample (a cgroup's usage file; None where there is none). ``scope`` is
    ``tree`` (the whole run shares it) or ``process`` (each process has its own)."""

    resource: str
    scope: str
    value: int | None
    source: str
    in_use: int | None
    reason: str | None
    path: str | None = None
    usage_file: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Limit:
        """A record of an artifact's ``limits.limits`` (schema-valid)."""
        return cls(
            resource=str(data["resource"]),
            scope=str(data["scope"]),
            value=_optional_int(data.get("value")),
            source=str(data["source"]),
            in_use=_optional_int(data.get("in_use")),
            reason=_optional_str(data.get("reason")),
            path=_optional_str(data.get("path")),
            usage_file=_optional_str(data.get("usage_file")),
        )
