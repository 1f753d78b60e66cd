"""The soak's pure verdicts over recorded data: data in, data out, no I/O. May import: foundation, harness.compare, harness.soak.verdicts."""
