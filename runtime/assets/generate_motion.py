"""Deterministically generate the G1 reference clip ``motions/g1/dance_wave.npz``.

Run: ``uv run --frozen python -m runtime.assets.generate_motion`` (``--check`` compares the committed
clip with a fresh generation instead of writing).

The joint trajectory is a closed-form "dance + wave": a 1 Hz knee bounce with flat feet, a 0.5 Hz
lateral weight shift, torso twist, and both arms waving out of phase. It starts from the ``stand``
keyframe (a 1 s smooth ramp) and is clipped to 95 % of each joint range. The root (pelvis) keeps its
keyframe orientation; its position is solved per frame so that the feet do not slide and the lowest
foot corner touches the floor. Tracked-body poses and velocities then come from MuJoCo forward
kinematics (the model's ``<B>_pos/_quat/_linvel/_angvel`` sensors), so the clip is kinematically
consistent with the model by construction. Every joint offset from the stand pose stays within
1 rad, so it is reachable with ``task.action_scale: 1.0`` (ctrl = default + action_scale * action).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from soakbench.foundation.atomic import write_atomic

SCENE = "robots/g1/scene_flat.xml"
MOTION = "motions/g1/dance_wave.npz"
FPS = 50.0
DURATION_S = 12.0
RAMP_S = 1.0
LIMIT_FRACTION = 0.95
MAX_OFFSET_RAD = 1.0  # reachable with task.action_scale 1.0
TRACKED_BODIES: tuple[str, ...] = (
    "pelvis",
    "left_hip_roll_link",
    "left_knee_link",
    "left_ankle_roll_link",
    "right_hip_roll_link",
    "right_knee_link",
    "right_ankle_roll_link",
    "torso_link",
    "left_shoulder_roll_link",
    "left_elbow_link",
    "left_wrist_yaw_link",
    "right_shoulder_roll_link",
    "right_elbow_link",
    "right_wrist_yaw_link",
)


def _offsets(t: np.ndarray) -> dict[str, np.ndarray]:
    """Joint offsets from the stand pose (rad) at times ``t`` [T] (s), before the ramp-in."""
    two_pi = 2.0 * np.pi
    bounce = 0.5 * (1.0 - np.cos(two_pi * 1.0 * t))  # 0..1 at 1 Hz
    shift = 0.07 * np.sin(two_pi * 0.5 * t)  # lateral weight shift, rad of hip roll
    wave = np.sin(two_pi * 1.0 * t)
    out: dict[str, np.ndarray] = {}
    for side, sign, phase in (("left", 1.0, 0.0), ("right", -1.0, np.pi)):
        hip = -0.18 * bounce
        knee = 0.36 * bounce
        out[f"{side}_hip_pitch_joint"] = hip
        out[f"{side}_knee_joint"] = knee
        out[f"{side}_ankle_pitch_joint"] = -(hip + knee)  # keeps the sole level
        out[f"{side}_hip_roll_joint"] = shift
        out[f"{side}_ankle_roll_joint"] = -shift
        lift = 0.5 * (1.0 - np.cos(two_pi * 0.25 * t + phase))  # 0..1, arms alternate every 2 s
        out[f"{side}_shoulder_roll_joint"] = sign * 0.9 * lift
        out[f"{side}_shoulder_pitch_joint"] = -0.45 * lift + 0.15 * np.sin(two_pi * 0.5 * t + phase)
        out[f"{side}_shoulder_yaw_joint"] = 0.3 * lift * np.sin(two_pi * 1.0 * t + phase)
        out[f"{side}_elbow_joint"] = -0.5 * lift + 0.35 * lift * np.sin(two_pi * 1.0 * t + phase)
        out[f"{side}_wrist_roll_joint"] = 0.5 * lift * wave
        out[f"{side}_wrist_pitch_joint"] = 0.3 * np.sin(two_pi * 1.0 * t + phase)
        out[f"{side}_wrist_yaw_joint"] = 0.2 * np.sin(two_pi * 0.5 * t + phase + 0.7)
    out["waist_yaw_joint"] = 0.35 * np.sin(two_pi * 0.5 * t + 0.4)
    out["waist_roll_joint"] = -0.6 * shift
    out["waist_pitch_joint"] = 0.08 * bounce
    return out


def generate_arrays() -> dict[str, np.ndarray]:
    """Build every clip field (see :class:`runtime.assets.motion.MotionClip`); deterministic."""
    import mujoco

    from soakbench.runtime.assets import load_model

    model = load_model(SCENE)
    data = mujoco.MjData(model)
    key = model.key("stand").id
    stand_qpos = model.key_qpos[key].copy()
    hinge_ids = list(range(1, model.njnt))  # joint 0 is the free base
    joint_names = [model.joint(j).name for j in hinge_ids]
    qadr = np.array([model.jnt_qposadr[j] for j in hinge_ids])
    lo, hi = model.jnt_range[hinge_ids].T
    mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo) * LIMIT_FRACTION

    num = round(DURATION_S * FPS) + 1
    t = np.arange(num) / FPS
    ramp = np.clip(t / RAMP_S, 0.0, 1.0)
    ramp = ramp * ramp * (3.0 - 2.0 * ramp)  # smoothstep: zero slope at both ends
    offsets = _offsets(t)
    unknown = set(offsets) - set(joint_names)
    if unknown:
        raise RuntimeError(f"motion offsets name joints the model lacks: {sorted(unknown)}")
    joint_pos = np.repeat(stand_qpos[qadr][None, :], num, axis=0)
    for col, name in enumerate(joint_names):
        if name in offsets:
            joint_pos[:, col] += ramp * offsets[name]
    joint_pos = np.clip(joint_pos, mid - half, mid + half)
    reach = float(np.abs(joint_pos - stand_qpos[qadr]).max())
    if reach > MAX_OFFSET_RAD:
        raise RuntimeError(f"clip needs a {reach:.3f} rad offset from the stand pose (> {MAX_OFFSET_RAD})")

    foot_geoms = [model.geom("left_foot").id, model.geom("right_foot").id]
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
    qpos = np.repeat(stand_qpos[None, :], num, axis=0)
    qpos[:, qadr] = joint_pos
    for f in range(num):
        # Root at the origin first; then translate so the feet midpoint stays at its stand
        # location (no sliding) and the lowest foot corner is on the floor.
        data.qpos[:] = qpos[f]
        data.qpos[:3] = 0.0
        mujoco.mj_kinematics(model, data)
        mids = np.mean([data.geom_xpos[g] for g in foot_geoms], axis=0)
        lowest = min(
            float(
                data.geom_xpos[g][2]
                + (data.geom_xmat[g].reshape(3, 3)[2] @ (corners * model.geom_size[g]).T).min()
            )
            for g in foot_geoms
        )
        if f == 0:
            anchor_xy = stand_qpos[:2] + mids[:2]
        qpos[f, :2] = anchor_xy - mids[:2]
        qpos[f, 2] = -lowest

    qvel = np.zeros((num, model.nv))
    qvel[:, :3] = np.gradient(qpos[:, :3], 1.0 / FPS, axis=0)  # root orientation is constant
    qvel[:, 6:] = np.gradient(joint_pos, 1.0 / FPS, axis=0)

    body_pos = np.zeros((num, len(TRACKED_BODIES), 3))
    body_quat = np.zeros((num, len(TRACKED_BODIES), 4))
    body_lin = np.zeros((num, len(TRACKED_BODIES), 3))
    body_ang = np.zeros((num, len(TRACKED_BODIES), 3))

    def sensor(name: str) -> np.ndarray:
        s = model.sensor(name)
        values: np.ndarray = data.sensordata[s.adr[0] : s.adr[0] + s.dim[0]]
        return values

    for f in range(num):
        data.qpos[:] = qpos[f]
        data.qvel[:] = qvel[f]
        mujoco.mj_forward(model, data)
        for b, body in enumerate(TRACKED_BODIES):
            body_pos[f, b] = sensor(f"{body}_pos")
            body_quat[f, b] = sensor(f"{body}_quat")
            body_lin[f, b] = sensor(f"{body}_linvel")
            body_ang[f, b] = sensor(f"{body}_angvel")
    body_quat *= np.where(body_quat[..., :1] < 0, -1.0, 1.0)  # canonical hemisphere (w >= 0)
    return {
        "fps": np.asarray(FPS, dtype=np.float64),
        "joint_pos": joint_pos.astype(np.float32),
        "joint_vel": qvel[:, 6:].astype(np.float32),
        "body_pos_w": body_pos.astype(np.float32),
        "body_quat_w": body_quat.astype(np.float32),
        "body_lin_vel_w": body_lin.astype(np.float32),
        "body_ang_vel_w": body_ang.astype(np.float32),
        "body_names": np.asarray(TRACKED_BODIES),
        "joint_names": np.asarray(joint_names),
    }


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An uncompressed npz archive of ``arrays`` with fixed member timestamps, so the same arrays
    always give the same bytes (regenerating the committed clip leaves git clean)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def write_npz_atomic(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` as an npz at ``path`` (world-readable: the clip is a shared, committed asset)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, npz_bytes(arrays), mode=0o644)


def compare_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray], atol: float = 1e-6) -> list[str]:
    """Names of fields that differ between two clip array dicts (pure)."""
    diffs = sorted(set(a) ^ set(b))
    for name in sorted(set(a) & set(b)):
        x, y = np.asarray(a[name]), np.asarray(b[name])
        same = x.shape == y.shape and (
            np.array_equal(x, y) if x.dtype.kind == "U" else bool(np.allclose(x, y, atol=atol, rtol=0.0))
        )
        if not same:
            diffs.append(name)
    return diffs


app = typer.Typer(add_completion=False, help=__doc__)


@app.command()
def generate(
    out: Annotated[Path | None, typer.Option(help="output npz (default: the committed clip)")] = None,
    check: Annotated[bool, typer.Option(help="compare the committed clip with a fresh generation")] = False,
) -> None:
    """Generate (or check) the G1 dance/wave reference clip."""
    from soakbench.runtime.assets import ASSET_ROOT
    from soakbench.runtime.assets.motion import MotionClipError, load_clip_file, validate_clip_arrays

    target = out if out is not None else ASSET_ROOT / MOTION
    arrays = generate_arrays()
    clip = validate_clip_arrays(arrays, "<generated>")
    if check:
        try:
            load_clip_file(target)
            with np.load(target, allow_pickle=False) as npz:
                committed = {k: npz[k] for k in npz.files}
        except MotionClipError as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(2) from exc
        diffs = compare_arrays(arrays, committed)
        if diffs:
            typer.echo(f"{target} differs from a fresh generation in {diffs}", err=True)
            raise typer.Exit(1)
        typer.echo(f"{target} matches a fresh generation")
        return
    write_npz_atomic(target, arrays)
    typer.echo(f"wrote {target}: {clip.num_frames} frames at {clip.fps:g} fps, {len(clip.body_names)} bodies")


def main() -> None:
    """Console entry point."""
    app()


if __name__ == "__main__":
    main()
