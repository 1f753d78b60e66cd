"""Where the shipped assets live, and the one way to name one: a path relative to the asset root."""

from __future__ import annotations

from pathlib import Path

ASSET_ROOT: Path = Path(__file__).resolve().parent


class AssetError(ValueError):
    """A requested asset is missing or cannot be compiled; the message names the path."""


def resolve(rel: str) -> Path:
    """Resolve ``rel`` (e.g. ``"robots/g1/scene_flat.xml"``) under :data:`ASSET_ROOT`.

    Absolute paths and ``..`` escapes are rejected so configuration can only name shipped assets."""
    candidate = Path(rel)
    if candidate.is_absolute() or ".." in candidate.parts:
        raise AssetError(f"asset path {rel!r} must be relative to {ASSET_ROOT} without '..'")
    return ASSET_ROOT / candidate
