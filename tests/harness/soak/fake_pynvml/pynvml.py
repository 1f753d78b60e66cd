"""Test double: a ``pynvml`` module for a real ``soak monitor`` subprocess (lives only under tests/).

Put this directory first on the subprocess's PYTHONPATH and name a JSON script in
``SOAKBENCH_FAKE_NVML_SCRIPT``: the monitor then imports this file as ``pynvml``, and every NVML call it
makes is answered by ``tests/harness/fake_nvml.ScriptedNvml`` following that script. The product has no
hook for it: it imports ``pynvml`` as it always does.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

_FAKE = Path(__file__).resolve().parents[2] / "fake_nvml.py"
_spec = importlib.util.spec_from_file_location("_soakbench_fake_nvml", _FAKE)
assert _spec is not None and _spec.loader is not None
_fake = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _fake  # dataclasses resolve their module by name
_spec.loader.exec_module(_fake)

_nvml = _fake.ScriptedNvml.from_file(os.environ["SOAKBENCH_FAKE_NVML_SCRIPT"])
NVMLError = _fake.NVMLError
for _name in dir(_nvml):
    if _name.startswith(("nvml", "NVML_")):
        globals()[_name] = getattr(_nvml, _name)
