"""A root that carries on after its worker is SIGKILLed and exits 0 (test double):
``survives_killed_worker.py LOG_DIR [DURATION_S]``. The worker marks itself a ``collector``; the root
kills it after a second, reaps it, keeps writing progress for the rest of DURATION_S (default 4) and
exits 0, as a trainer that swallowed a worker's death would."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

from _common import args, heartbeat_loop

WORKER = "from soakbench.foundation.roles import mark_process\nmark_process('collector')\nimport time\nwhile True: time.sleep(1)"

log_dir, (duration,) = args()
worker = subprocess.Popen([sys.executable, "-c", WORKER])
(log_dir / "worker.json").write_text(json.dumps({"pid": worker.pid}))


def kill_after_a_second(tick: int) -> None:
    if tick == 10 and worker.poll() is None:
        worker.send_signal(signal.SIGKILL)
        worker.wait()  # reaped by its parent: only the kernel's exit event shows the signal


heartbeat_loop(log_dir, duration, 0.1, kill_after_a_second)
sys.exit(0)
