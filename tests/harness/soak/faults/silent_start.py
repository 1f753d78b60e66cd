"""Fault: never writes anything under the log dir (start-up never completes)."""

from __future__ import annotations

import sys
import time

time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 600.0)
