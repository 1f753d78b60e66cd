"""The test harness over the runtime: soak monitor, phase probe, cumps, run context and metric extraction. May import: foundation, runtime, harness."""
