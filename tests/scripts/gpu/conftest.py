"""The bundle package lives in scripts/gpu, not on the project path: that folder goes on sys.path for these tests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts" / "gpu"))
