"""Shared fixtures: a tiny floating-base MJCF (fast, has contacts, sensors and PD actuators)."""

from __future__ import annotations

import mujoco
import pytest

TINY_MJCF = """
<mujoco model="tiny_walker">
  <option timestep="0.005" integrator="implicitfast"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="torso" pos="0 0 0.45">
      <freejoint name="root"/>
      <geom type="box" size="0.1 0.08 0.05" mass="4"/>
      <site name="imu"/>
      <body name="left_leg" pos="0 0.06 -0.05">
        <joint name="left_hip" type="hinge" axis="0 1 0" range="-1.5 1.5" armature="0.01" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="0.6"/>
        <body name="left_foot" pos="0 0 -0.32">
          <joint name="left_ankle" type="hinge" axis="0 1 0" range="-0.8 0.8" armature="0.01"/>
          <geom name="left_sole" type="box" size="0.06 0.03 0.015" mass="0.2"/>
        </body>
      </body>
      <body name="right_leg" pos="0 -0.06 -0.05">
        <joint name="right_hip" type="hinge" axis="0 1 0" range="-1.5 1.5" armature="0.01" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" mass="0.6"/>
        <body name="right_foot" pos="0 0 -0.32">
          <joint name="right_ankle" type="hinge" axis="0 1 0" range="-0.8 0.8" armature="0.01"/>
          <geom name="right_sole" type="box" size="0.06 0.03 0.015" mass="0.2"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="left_hip" joint="left_hip" kp="40" kv="1" ctrlrange="-1.5 1.5"/>
    <position name="left_ankle" joint="left_ankle" kp="20" kv="0.5" ctrlrange="-0.8 0.8"/>
    <position name="right_hip" joint="right_hip" kp="40" kv="1" ctrlrange="-1.5 1.5"/>
    <position name="right_ankle" joint="right_ankle" kp="20" kv="0.5" ctrlrange="-0.8 0.8"/>
  </actuator>
  <sensor>
    <gyro name="imu_gyro" site="imu"/>
    <accelerometer name="imu_acc" site="imu"/>
    <framequat name="imu_quat" objtype="site" objname="imu"/>
    <framepos name="torso_pos" objtype="body" objname="torso"/>
  </sensor>
</mujoco>
"""


@pytest.fixture(scope="session")
def tiny_model() -> mujoco.MjModel:
    """nq=11, nv=10, nu=4, nsensordata=13; drops onto the floor, so contacts are exercised."""
    return mujoco.MjModel.from_xml_string(TINY_MJCF)
