"""The G1-class MJCF: structure, sensors, passive standing and robustness under random targets."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from soakbench.runtime.assets import ASSET_ROOT, AssetError, load_model, resolve
from soakbench.runtime.assets.generate_motion import TRACKED_BODIES

SCENE = "robots/g1/scene_flat.xml"


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return load_model(SCENE)


def test_dimensions_and_joint_layout(model: mujoco.MjModel) -> None:
    assert (model.nq, model.nv, model.nu) == (36, 35, 29)
    assert model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    assert all(model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE for j in range(1, model.njnt))
    names = [model.joint(j).name for j in range(1, model.njnt)]
    assert sum(n.startswith(("left_hip", "left_knee", "left_ankle")) for n in names) == 6
    assert sum(n.startswith("waist") for n in names) == 3
    assert sum(n.startswith(("left_shoulder", "left_elbow", "left_wrist")) for n in names) == 7
    # One position actuator per hinge, in qpos order, limited to the joint range.
    assert [int(model.actuator_trnid[a, 0]) for a in range(model.nu)] == list(range(1, model.njnt))
    np.testing.assert_allclose(model.actuator_ctrlrange, model.jnt_range[1:])
    assert (model.actuator_gainprm[:, 0] > 0).all() and (model.dof_armature[6:] > 0).all()
    assert model.opt.timestep == pytest.approx(0.005)


def test_mass_is_g1_like(model: mujoco.MjModel) -> None:
    assert 30.0 < float(model.body_mass.sum()) < 40.0


def test_sensors_present(model: mujoco.MjModel) -> None:
    names = {model.sensor(i).name for i in range(model.nsensor)}
    assert {"imu_gyro", "imu_acc", "imu_quat"} <= names
    for body in TRACKED_BODIES:
        assert {f"{body}_pos", f"{body}_quat", f"{body}_linvel", f"{body}_angvel"} <= names


def test_only_floor_contacts_are_possible(model: mujoco.MjModel) -> None:
    floor = model.geom("floor").id
    for g in range(model.ngeom):
        for h in range(g + 1, model.ngeom):
            collide = (model.geom_contype[g] & model.geom_conaffinity[h]) or (
                model.geom_contype[h] & model.geom_conaffinity[g]
            )
            if collide:
                assert floor in (g, h), (model.geom(g).name, model.geom(h).name)


def test_stand_keyframe_holds_for_two_seconds(model: mujoco.MjModel) -> None:
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("stand").id)
    start = data.qpos[:3].copy()
    for _ in range(400):  # 2 s at 0.005 s, ctrl = keyframe targets
        mujoco.mj_step(model, data)
    assert np.isfinite(data.qpos).all()
    assert abs(data.qpos[2] - start[2]) < 0.03
    assert np.linalg.norm(data.qpos[:2] - start[:2]) < 0.05
    assert data.qpos[3] > 0.99  # still upright (quaternion w)


def test_random_targets_stay_finite(model: mujoco.MjModel) -> None:
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    lo, hi = model.actuator_ctrlrange.T
    mujoco.mj_resetDataKeyframe(model, data, model.key("stand").id)
    for _ in range(250):  # 5 s of full-range random targets, 4 substeps each
        data.ctrl[:] = rng.uniform(lo, hi)
        for _ in range(4):
            mujoco.mj_step(model, data)
    assert np.isfinite(data.qpos).all() and np.isfinite(data.sensordata).all()
    assert all(w.number == 0 for w in data.warning)


def test_missing_scene_and_escaping_paths_fail_closed() -> None:
    with pytest.raises(AssetError, match="does not exist"):
        load_model("robots/g1/nope.xml")
    with pytest.raises(AssetError, match="relative"):
        resolve("../etc/passwd")
    assert resolve(SCENE) == ASSET_ROOT / SCENE
