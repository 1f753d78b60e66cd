"""The reference clip: committed file, fail-closed loading, kinematic consistency, determinism."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from soakbench.runtime.assets import ASSET_ROOT, MotionClip, MotionClipError, load_model, load_motion
from soakbench.runtime.assets.generate_motion import (
    MOTION,
    SCENE,
    compare_arrays,
    generate_arrays,
    npz_bytes,
    write_npz_atomic,
)
from soakbench.runtime.assets.motion import REGENERATE_COMMAND, load_clip_file


@pytest.fixture(scope="module")
def clip() -> MotionClip:
    return load_motion(MOTION)


@pytest.fixture(scope="module")
def arrays() -> dict[str, np.ndarray]:
    with np.load(ASSET_ROOT / MOTION, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def test_committed_clip_shapes(clip: MotionClip) -> None:
    t, j, b = clip.num_frames, len(clip.joint_names), len(clip.body_names)
    assert (j, clip.body_names[0]) == (29, "pelvis")
    assert clip.joint_pos.shape == clip.joint_vel.shape == (t, j)
    assert clip.body_quat_w.shape == (t, b, 4)
    assert clip.duration_s > 5.0


def test_clip_matches_forward_kinematics_and_limits(clip: MotionClip) -> None:
    model = load_model(SCENE)
    data = mujoco.MjData(model)
    lo, hi = model.jnt_range[1:].T
    assert ((clip.joint_pos >= lo) & (clip.joint_pos <= hi)).all()
    assert clip.joint_names == tuple(model.joint(j).name for j in range(1, model.njnt))
    ids = [model.body(name).id for name in clip.body_names]
    for f in range(0, clip.num_frames, 37):
        data.qpos[:3] = clip.body_pos_w[f, 0]
        data.qpos[3:7] = clip.body_quat_w[f, 0]
        data.qpos[7:] = clip.joint_pos[f]
        mujoco.mj_kinematics(model, data)
        np.testing.assert_allclose(data.xpos[ids], clip.body_pos_w[f], atol=1e-4)
        dots = np.abs((data.xquat[ids] * clip.body_quat_w[f]).sum(-1))
        np.testing.assert_allclose(dots, 1.0, atol=1e-5)


def test_velocities_match_finite_differences(clip: MotionClip) -> None:
    fd = np.gradient(clip.body_pos_w, 1.0 / clip.fps, axis=0)
    assert np.abs(fd[1:-1] - clip.body_lin_vel_w[1:-1]).max() < 0.05
    fd_q = np.gradient(clip.joint_pos, 1.0 / clip.fps, axis=0)
    np.testing.assert_allclose(clip.joint_vel, fd_q, atol=1e-4)


def test_feet_stay_planted(clip: MotionClip) -> None:
    for foot in ("left_ankle_roll_link", "right_ankle_roll_link"):
        pos = clip.body_pos_w[:, clip.body_index(foot)]
        assert np.ptp(pos[:, 0]) < 0.01 and np.ptp(pos[:, 1]) < 0.01 and np.ptp(pos[:, 2]) < 0.01


def test_generator_is_deterministic_and_matches_committed(arrays: dict[str, np.ndarray]) -> None:
    fresh = generate_arrays()
    assert compare_arrays(fresh, arrays) == []
    assert npz_bytes(fresh) == npz_bytes(generate_arrays())  # byte-stable archive (fixed timestamps)


def _write(tmp_path: Path, arrays: dict[str, np.ndarray], **changes: object) -> Path:
    out = {k: v for k, v in arrays.items() if changes.get(k, 0) is not None}
    out.update({k: np.asarray(v) for k, v in changes.items() if v is not None})
    path = tmp_path / "clip.npz"
    write_npz_atomic(path, out)
    return path


def _assert_rejected(path: Path, match: str) -> None:
    with pytest.raises(MotionClipError, match=match) as info:
        load_clip_file(path)
    assert str(path) in str(info.value) and REGENERATE_COMMAND in str(info.value)


def test_missing_clip_names_path_and_command(tmp_path: Path) -> None:
    _assert_rejected(tmp_path / "absent.npz", "does not exist")


def test_corrupt_clip_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "clip.npz"
    path.write_bytes(b"PK\x03\x04 definitely not a zip archive")
    _assert_rejected(path, "unreadable or corrupt")


def test_missing_field_is_rejected(tmp_path: Path, arrays: dict[str, np.ndarray]) -> None:
    _assert_rejected(_write(tmp_path, arrays, body_lin_vel_w=None), "missing field.*body_lin_vel_w")


def test_wrong_shape_is_rejected(tmp_path: Path, arrays: dict[str, np.ndarray]) -> None:
    _assert_rejected(
        _write(tmp_path, arrays, joint_vel=arrays["joint_vel"][:, :28]), "'joint_vel' must have shape"
    )
    _assert_rejected(
        _write(tmp_path, arrays, body_pos_w=arrays["body_pos_w"][:-1]), "'body_pos_w' must have shape"
    )


def test_wrong_dtype_is_rejected(tmp_path: Path, arrays: dict[str, np.ndarray]) -> None:
    _assert_rejected(_write(tmp_path, arrays, joint_pos=arrays["joint_pos"].astype(np.float64)), "float32")


def test_non_finite_is_rejected(tmp_path: Path, arrays: dict[str, np.ndarray]) -> None:
    bad = arrays["body_quat_w"].copy()
    bad[7, 3, 1] = np.nan
    _assert_rejected(_write(tmp_path, arrays, body_quat_w=bad), "non-finite values \\(first at frame 7\\)")


def test_bad_fps_and_quaternions_are_rejected(tmp_path: Path, arrays: dict[str, np.ndarray]) -> None:
    _assert_rejected(_write(tmp_path, arrays, fps=np.float64(0.0)), "'fps' must be finite and > 0")
    _assert_rejected(_write(tmp_path, arrays, body_quat_w=2.0 * arrays["body_quat_w"]), "unit-norm")
