"""The soak's host edge: /proc, psutil, /dev/shm, memory pressure, py-spy and NVML reads. May import: foundation, harness.soak.verdicts, harness.soak.host."""
