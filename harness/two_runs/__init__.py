"""The statistics and artifact field reads that probe compare and soak compare share; pure, no I/O. May import: foundation, harness.two_runs."""
