"""A root with three long-lived workers, as a vector env's subprocess pool has (test double):
``worker_pool.py LOG_DIR``. The root writes progress and the workers' PIDs (``LOG_DIR/workers.json``);
when any worker dies it stops the others and exits 1, as a pool whose pipe broke does."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from _common import args, progress

log_dir, _ = args()
workers = [
    subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)"]) for _ in range(3)
]
(log_dir / "workers.json").write_text(json.dumps([w.pid for w in workers]))
tick = 0
while all(w.poll() is None for w in workers):
    progress(log_dir, tick)
    tick += 1
    time.sleep(0.2)
time.sleep(0.5)  # the pool notices, then tears down what is left
for w in workers:
    w.kill()
    w.wait()
sys.exit(1)
