"""A stand-in trainer that dies the way a CUDA program does after its GPU fell off the bus: it writes
progress until MARKER exists (the fake NVML writes it when the monitor drains the XID event), then says
so on stderr and exits 1.

``python gpu_fault_trainer.py LOG_DIR MARKER [GIVE_UP_S]``: exits 3 if MARKER never appears.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from _common import progress

log_dir, marker = Path(sys.argv[1]), Path(sys.argv[2])
give_up = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
log_dir.mkdir(parents=True, exist_ok=True)
end = time.monotonic() + give_up
i = 0
while time.monotonic() < end:
    if marker.exists():
        print("CUDA error: unspecified launch failure (the GPU has fallen off the bus)", file=sys.stderr)
        sys.exit(1)
    progress(log_dir, i)
    i += 1
    time.sleep(0.05)
print(f"{marker} never appeared", file=sys.stderr)
sys.exit(3)
