"""Reading fields of schema-versioned artifacts (soak, probe) by dotted path, and the settings and hosts
two of them differ in. Pure: mappings in, values out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def dig(doc: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted path, None where any part is missing."""
    node: Any = doc
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def setting_differences(
    base: Mapping[str, Any], new: Mapping[str, Any], fields: Sequence[str]
) -> list[dict[str, Any]]:
    """``{field, base, new}`` for each dotted ``fields`` entry that differs between two artifacts, then
    for every dependency version in ``context.software`` that differs."""
    out = [
        {"field": f, "base": dig(base, f), "new": dig(new, f)} for f in fields if dig(base, f) != dig(new, f)
    ]
    old_versions, new_versions = base["context"]["software"], new["context"]["software"]
    for name in sorted(set(old_versions) | set(new_versions)):
        if old_versions.get(name) != new_versions.get(name):
            field = f"context.software.{name}"
            out.append({"field": field, "base": old_versions.get(name), "new": new_versions.get(name)})
    return out


def host_identity(artifact: Mapping[str, Any]) -> dict[str, Any]:
    """What makes two measurements the same machine: CPU model, logical cores, GPU UUIDs."""
    host, gpu = artifact["context"]["host"], artifact["context"]["gpu"]
    return {
        "cpu_model": host["cpu_model"],
        "cores": host["cores"],
        "gpu_uuids": sorted(d["uuid"] for d in gpu["devices"]),
    }


def host_differences(base: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    old, now = host_identity(base), host_identity(new)
    return [f"{key}: {old[key]!r} vs {now[key]!r}" for key in old if old[key] != now[key]]
