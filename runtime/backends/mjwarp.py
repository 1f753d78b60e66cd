"""MuJoCo Warp backend (``device`` data plane): all worlds live in Warp arrays on one device.

``num_envs`` is MJWarp's ``nworld``. Warp arrays are shared with torch zero-copy (``wp.to_torch``),
so ``step`` writes ``ctrl`` in place on the device, runs ``decimation`` substeps and returns views of
``qpos``/``qvel``/``sensordata``/``actuator_force``: no host copy anywhere in the stepping loop.

* CUDA: the decimation substeps are captured ONCE into a CUDA graph (``wp.ScopedCapture``) and
  replayed every control step. A failed capture is not hidden: the backend steps eagerly and
  ``cuda_graph`` reports ``enabled: false`` with the capture error as ``disable_reason``.
* CPU (explicit diagnostic lane, ``training.mjwarp_device=cpu``): Warp's CPU device, eager
  launches; ``cuda_graph`` reports ``enabled: false`` naming the CPU device. Never production evidence.

Selected-row reset stays on the device: a per-world mask drives ``mjw.reset_data``, torch index
writes put ``qpos``/``qvel`` into the zero-copy views, one ``mjw.forward`` recomputes derived state,
and the published ``sensordata``/``actuator_force`` of rows NOT reset are restored from a device
snapshot, so those rows publish and continue bit-identically (``forward`` never touches
``qpos``/``qvel``/``qacc_warmstart``, the state ``step`` starts from).

The published :class:`PublicState` tensors are live views, valid until the next ``step``/
``reset_rows``: clone what you keep. Float32 throughout (MJWarp's precision).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import mujoco
import torch

from soakbench.runtime.backends._layout import StateLayout
from soakbench.runtime.backends.base import PublicState, SimBackend
from soakbench.runtime.backends.contract import BackendCapabilities, OptimizationDiagnostic, PlatformView
from soakbench.runtime.backends.validation import check_ctrl, check_reset_args

INSTALL_HINT = "install the MJWarp extra with `uv sync --extra mjwarp`"

NO_RESET_RANDOMIZATION = (
    "no reset randomization is configured: the mjwarp owners are a domain-randomization-free "
    "baseline (model parameters are identical in every world; reset states come from the task)"
)


class MjwarpUnavailableError(ImportError):
    """``warp``/``mujoco_warp`` cannot be imported; the message says how to install them."""


def import_warp() -> tuple[ModuleType, ModuleType]:
    """Import ``(warp, mujoco_warp)`` or raise :class:`MjwarpUnavailableError` (never a fallback)."""
    try:
        import mujoco_warp as mjw
        import warp as wp
    except ImportError as exc:
        raise MjwarpUnavailableError(
            f"the mjwarp backend needs warp-lang and mujoco-warp ({exc}); {INSTALL_HINT}"
        ) from exc
    return wp, mjw


def warp_device_name(device: torch.device) -> str:
    """Warp device string for a torch device: ``cpu`` or ``cuda:<index>``; other types are refused."""
    if device.type == "cpu":
        return "cpu"
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("mjwarp device cuda requested but torch sees no CUDA device")
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index}"
    raise ValueError(f"mjwarp device must be cuda or cpu (explicit diagnostic lane), got {device.type!r}")


class MjwarpBackend(SimBackend):
    """N = ``nworld`` MuJoCo Warp worlds on one device behind the tensor contract.

    Args:
        model: compiled ``mujoco.MjModel`` (uploaded once with ``mjw.put_model``).
        num_envs: N worlds.
        device: ``cuda`` (production) or ``cpu`` (explicit diagnostic lane).
        decimation: physics substeps per control step.

    ``mjw.make_data`` sizes the contact and constraint buffers with MJWarp's defaults for the model and
    world count, so the probe's physics-limit reference (built the same way) steps identical buffers.
    """

    backend_type = "mjwarp"
    data_plane = "device"

    @classmethod
    def capabilities(cls, platform: PlatformView) -> BackendCapabilities:
        """Production runs on Linux with a CUDA device, where the substeps are captured as a CUDA graph;
        Warp's CPU device is a diagnostic lane, so it is not offered as a physics device."""
        cuda = platform.system == "Linux" and platform.cuda_available
        return BackendCapabilities(
            data_plane=cls.data_plane,
            physics_device="cuda" if cuda else None,
            unavailable_reason=None if cuda else "needs Linux with a CUDA device",
            process_model="spawned collector; all worlds in Warp arrays on one device, zero-copy views",
            cuda_graph_requested=True,
            cuda_graph_possible=cuda,
            host_transfers=cls.host_transfers_by_phase(),
        )

    def __init__(
        self,
        model: mujoco.MjModel,
        num_envs: int,
        device: torch.device,
        decimation: int,
    ) -> None:
        super().__init__(model, num_envs, device, decimation)
        self._wp, self._mjw = import_warp()
        wp, mjw = self._wp, self._mjw
        self.warp_device = warp_device_name(device)
        self.device = torch.device(self.warp_device)
        self.layout = StateLayout.of(model)
        self._closed = False
        wp.config.quiet = True  # Warp prints one line per compiled module otherwise
        wp.init()
        with wp.ScopedDevice(self.warp_device):
            self._m = mjw.put_model(model)
            self._d = mjw.make_data(model, nworld=num_envs)
            self._stream = wp.get_stream() if self.device.type == "cuda" else None
        # torch's handle on Warp's stream, so torch and Warp work can be ordered without host syncs
        self._torch_side = wp.stream_to_torch(self._stream) if self._stream is not None else None
        d = self._d
        # zero-copy torch views of the Warp state (float32, [N, width])
        self._ctrl = wp.to_torch(d.ctrl)
        self._qpos = wp.to_torch(d.qpos)
        self._qvel = wp.to_torch(d.qvel)
        self._sens = wp.to_torch(d.sensordata)
        self._force = wp.to_torch(d.actuator_force)
        self._public = PublicState(
            qpos=self._qpos, qvel=self._qvel, sensordata=self._sens, actuator_force=self._force
        )
        self._mask = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self._mask_wp = wp.from_torch(self._mask, dtype=wp.bool)
        self._graph: Any = None
        self._graph_reason: str | None = None
        # Warm-up: compile every kernel of step/reset/forward now (capture cannot compile), then
        # return all worlds to the model defaults with current sensors.
        self._run(lambda: self._substeps())
        self._run(lambda: (mjw.reset_data(self._m, self._d), mjw.forward(self._m, self._d)))
        self._sync()
        if self.device.type == "cuda":
            self._capture()
        else:
            self._graph_reason = (
                "warp device is cpu (explicit CPU diagnostic lane): CUDA graphs need a CUDA device"
            )

    # -- device plumbing ----------------------------------------------------------------------------
    def _substeps(self) -> None:
        for _ in range(self.decimation):
            self._mjw.step(self._m, self._d)

    def _run(self, fn: Callable[[], object]) -> None:
        """Run Warp work on this backend's device and stream, ordered after torch's current stream."""
        wp = self._wp
        if self._stream is None or self._torch_side is None:
            with wp.ScopedDevice(self.warp_device):
                fn()
            return
        torch_side = self._torch_side
        current = torch.cuda.current_stream(self.device)
        torch_side.wait_stream(current)  # torch writes (ctrl, reset rows) happen-before the physics
        with wp.ScopedDevice(self.warp_device), wp.ScopedStream(self._stream):
            fn()
        current.wait_stream(torch_side)  # torch reads of the views happen-after the physics

    def _capture(self) -> None:
        wp = self._wp
        try:
            with wp.ScopedDevice(self.warp_device), wp.ScopedCapture(stream=self._stream) as capture:
                self._substeps()
            self._graph = capture.graph
        except Exception as exc:  # reported through diagnostics, stepping stays eager
            self._graph = None
            self._graph_reason = f"CUDA graph capture failed: {type(exc).__name__}: {exc}"

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _check_device(self, name: str, tensor: torch.Tensor) -> None:
        if tensor.device != self.device:
            raise ValueError(
                f"{name} must be on the backend device {self.device} (no implicit host copies), "
                f"got {tensor.device}"
            )

    # -- contract -------------------------------------------------------------------------------
    def step(self, ctrl: torch.Tensor) -> PublicState:
        """Write ``ctrl`` [N, nu] (on ``device``) in place and run ``decimation`` substeps."""
        self._check_open()
        check_ctrl(ctrl, self.num_envs, self.layout.nu)
        self._check_device("ctrl", ctrl)
        self._ctrl.copy_(ctrl.detach())
        if self._graph is not None:
            graph = self._graph
            self._run(lambda: self._wp.capture_launch(graph, stream=self._stream))
        else:
            self._run(self._substeps)
        return self._public

    def reset_rows(self, rows: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> PublicState:
        """Reset worlds ``rows`` [k] on the device (no host round trip); other rows untouched.

        Shapes/dtypes/devices are checked; row values are not (that would sync the host)."""
        self._check_open()
        check_reset_args(
            rows, qpos, qvel, self.num_envs, (self.layout.nq, self.layout.nv), check_values=False
        )
        for name, tensor in (("rows", rows), ("qpos", qpos), ("qvel", qvel)):
            self._check_device(name, tensor)
        if rows.numel() == 0:
            return self._public
        mjw = self._mjw
        self._mask.zero_()
        self._mask[rows] = True
        keep = ~self._mask.unsqueeze(1)
        sens_before = self._sens.clone()
        force_before = self._force.clone()
        self._run(lambda: mjw.reset_data(self._m, self._d, self._mask_wp))
        self._qpos[rows] = qpos.detach().to(torch.float32)
        self._qvel[rows] = qvel.detach().to(torch.float32)
        self._run(lambda: mjw.forward(self._m, self._d))
        # publish the refreshed sensors only for the reset rows; the others keep their values
        self._sens.copy_(torch.where(keep, sens_before, self._sens))
        self._force.copy_(torch.where(keep, force_before, self._force))
        return self._public

    def public_state(self) -> PublicState:
        """Zero-copy views of the device state (valid until the next step/reset_rows)."""
        return self._public

    def get_tensor_runtime_diagnostics(self) -> dict[str, OptimizationDiagnostic]:
        graph_on = self._graph is not None
        return {
            "cuda_graph": OptimizationDiagnostic(
                requested=True, enabled=graph_on, disable_reason=None if graph_on else self._graph_reason
            ),
            "selected_reset_sensor_refresh": OptimizationDiagnostic(
                requested=True, enabled=True, disable_reason=None
            ),
            "device_reset_randomization": OptimizationDiagnostic(
                requested=False, enabled=False, disable_reason=NO_RESET_RANDOMIZATION
            ),
        }

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._graph = None

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("MjwarpBackend used after close()")
