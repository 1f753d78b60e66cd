"""Project-authored assets: the G1-class humanoid MJCF and its reference motion clips.

Nothing here is downloaded. MuJoCo is imported lazily inside :func:`load_model`, so importing this
package (e.g. to resolve a scene path for ``--print-config``) pulls in no physics.
May import: foundation, runtime.assets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from soakbench.foundation.inputs import note_data_file
from soakbench.runtime.assets.motion import MotionClip, MotionClipError, load_motion
from soakbench.runtime.assets.paths import ASSET_ROOT, AssetError, resolve

if TYPE_CHECKING:
    import mujoco

__all__ = [
    "ASSET_ROOT",
    "AssetError",
    "MotionClip",
    "MotionClipError",
    "load_model",
    "load_motion",
    "resolve",
]


def load_model(scene_rel: str) -> mujoco.MjModel:
    """Compile the MJCF scene ``scene_rel`` (relative to :data:`ASSET_ROOT`) into an ``MjModel``."""
    import mujoco

    path = resolve(scene_rel)
    note_data_file(path.parent)  # MuJoCo's C loader reads the scene's includes and meshes beside it
    if not path.is_file():
        raise AssetError(f"scene {path} does not exist (task.scene={scene_rel!r})")
    try:
        return mujoco.MjModel.from_xml_path(str(path))
    except ValueError as exc:  # mujoco reports XML/compile errors as ValueError
        raise AssetError(f"scene {path} failed to compile: {exc}") from exc
