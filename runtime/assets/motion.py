"""Reference motion clips: the on-disk npz format and its fail-closed loader (numpy only).

A clip is a kinematically consistent trajectory of the G1 model sampled at ``fps``: joint positions
and velocities, plus world-frame poses and velocities of the tracked bodies obtained by MuJoCo
forward kinematics of that joint trajectory (see ``runtime/assets/generate_motion.py``).
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REGENERATE_COMMAND = "uv run --frozen python -m runtime.assets.generate_motion"

# Field name -> (dtype kind, trailing shape); "T" frames, "J" joints, "B" bodies.
_ARRAY_FIELDS: dict[str, tuple[str, ...]] = {
    "joint_pos": ("T", "J"),
    "joint_vel": ("T", "J"),
    "body_pos_w": ("T", "B", "3"),
    "body_quat_w": ("T", "B", "4"),
    "body_lin_vel_w": ("T", "B", "3"),
    "body_ang_vel_w": ("T", "B", "3"),
}
REQUIRED_FIELDS: tuple[str, ...] = ("fps", *_ARRAY_FIELDS, "body_names", "joint_names")


class MotionClipError(ValueError):
    """A clip is missing, unreadable or malformed; the message names the path and the fix."""


@dataclass(frozen=True)
class MotionClip:
    """One reference motion. Shapes: T frames, J hinge joints (model order), B tracked bodies.

    fps:            frames per second (float, > 0)
    joint_pos:      [T, J] float32, rad, within the model's joint limits
    joint_vel:      [T, J] float32, rad/s
    body_pos_w:     [T, B, 3] float32, m, world frame (body frame origin)
    body_quat_w:    [T, B, 4] float32, unit quaternions (w, x, y, z), world frame
    body_lin_vel_w: [T, B, 3] float32, m/s, world frame
    body_ang_vel_w: [T, B, 3] float32, rad/s, world frame
    body_names:     B body names; body_names[0] is the root (pelvis, the free-joint body)
    joint_names:    J hinge joint names in model (qpos) order
    """

    fps: float
    joint_pos: np.ndarray
    joint_vel: np.ndarray
    body_pos_w: np.ndarray
    body_quat_w: np.ndarray
    body_lin_vel_w: np.ndarray
    body_ang_vel_w: np.ndarray
    body_names: tuple[str, ...]
    joint_names: tuple[str, ...]

    @property
    def num_frames(self) -> int:
        """Number of frames T."""
        return int(self.joint_pos.shape[0])

    @property
    def duration_s(self) -> float:
        """Duration in seconds between the first and the last frame."""
        return (self.num_frames - 1) / self.fps

    def body_index(self, name: str) -> int:
        """Index of body ``name`` in the body axis."""
        try:
            return self.body_names.index(name)
        except ValueError:
            raise KeyError(f"body {name!r} is not tracked by this clip; tracked: {self.body_names}") from None


class _Malformed(Exception):
    """What is wrong with the arrays; :func:`validate_clip_arrays` adds the source and the fix."""


def validate_clip_arrays(arrays: dict[str, np.ndarray], where: str) -> MotionClip:
    """Validate raw npz arrays and build a :class:`MotionClip`; raise :class:`MotionClipError`.

    Pure: checks presence, dtypes, consistent shapes, finiteness and unit quaternions. ``where``
    names the source in messages."""
    try:
        return _checked_clip(arrays)
    except _Malformed as exc:
        raise MotionClipError(
            f"motion clip {where}: {exc}; regenerate it with `{REGENERATE_COMMAND}`"
        ) from None


def _checked_clip(arrays: dict[str, np.ndarray]) -> MotionClip:
    missing = [f for f in REQUIRED_FIELDS if f not in arrays]
    if missing:
        raise _Malformed(f"missing field(s) {missing}; required: {list(REQUIRED_FIELDS)}")
    fps = _checked_fps(arrays["fps"])
    body_names = _checked_names(arrays, "body_names")
    joint_names = _checked_names(arrays, "joint_names")
    dims = {"B": len(body_names), "J": len(joint_names), "3": 3, "4": 4}
    checked = {field: _checked_array(arrays, field, axes, dims) for field, axes in _ARRAY_FIELDS.items()}
    if dims["T"] < 2:
        raise _Malformed(f"needs at least 2 frames, got {dims['T']}")
    norm_err = np.abs(np.linalg.norm(checked["body_quat_w"], axis=-1) - 1.0).max()
    if norm_err > 1e-3:
        raise _Malformed(f"field 'body_quat_w' is not unit-norm (max |norm-1| = {norm_err:.3g})")
    return MotionClip(
        fps=fps,
        joint_pos=checked["joint_pos"],
        joint_vel=checked["joint_vel"],
        body_pos_w=checked["body_pos_w"],
        body_quat_w=checked["body_quat_w"],
        body_lin_vel_w=checked["body_lin_vel_w"],
        body_ang_vel_w=checked["body_ang_vel_w"],
        body_names=body_names,
        joint_names=joint_names,
    )


def _checked_fps(raw: np.ndarray) -> float:
    fps_arr = np.asarray(raw)
    if fps_arr.shape != () or fps_arr.dtype.kind not in "fi":
        raise _Malformed(
            f"field 'fps' must be a numeric scalar, got dtype {fps_arr.dtype} shape {fps_arr.shape}"
        )
    fps = float(fps_arr)
    if not np.isfinite(fps) or fps <= 0:
        raise _Malformed(f"field 'fps' must be finite and > 0, got {fps}")
    return fps


def _checked_names(arrays: dict[str, np.ndarray], field: str) -> tuple[str, ...]:
    arr = np.asarray(arrays[field])
    if arr.ndim != 1 or arr.dtype.kind != "U" or arr.size == 0:
        raise _Malformed(f"field {field!r} must be a non-empty 1-D string array, got {arr.dtype} {arr.shape}")
    values = tuple(str(v) for v in arr)
    if len(set(values)) != len(values):
        raise _Malformed(f"field {field!r} has duplicate names")
    return values


def _checked_array(
    arrays: dict[str, np.ndarray], field: str, axes: tuple[str, ...], dims: dict[str, int]
) -> np.ndarray:
    """``arrays[field]`` as float32 of shape ``axes``; the first array checked sets ``dims["T"]``."""
    arr = np.asarray(arrays[field])
    if arr.dtype != np.float32:
        raise _Malformed(f"field {field!r} must be float32, got {arr.dtype}")
    if arr.ndim != len(axes):
        raise _Malformed(f"field {field!r} must have shape [{', '.join(axes)}], got {arr.shape}")
    dims.setdefault("T", arr.shape[0])
    expected = tuple(dims[a] for a in axes)
    if arr.shape != expected:
        raise _Malformed(f"field {field!r} must have shape {expected} ([{', '.join(axes)}]), got {arr.shape}")
    if not np.isfinite(arr).all():
        bad = int(np.argwhere(~np.isfinite(arr))[0][0])
        raise _Malformed(f"field {field!r} has non-finite values (first at frame {bad})")
    return arr


def load_clip_file(path: Path) -> MotionClip:
    """Load and validate the npz clip at ``path``."""
    hint = f"; regenerate it with `{REGENERATE_COMMAND}`"
    if not path.is_file():
        raise MotionClipError(f"motion clip {path} does not exist{hint}")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise MotionClipError(f"motion clip {path} is unreadable or corrupt ({exc}){hint}") from exc
    return validate_clip_arrays(arrays, str(path))


def load_motion(motion_rel: str) -> MotionClip:
    """Load the clip ``motion_rel`` (e.g. ``"motions/g1/dance_wave.npz"``) from the asset root."""
    from soakbench.foundation.inputs import note_data_file
    from soakbench.runtime.assets.paths import resolve

    path = resolve(motion_rel)
    note_data_file(path)
    return load_clip_file(path)
