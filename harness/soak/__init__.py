"""The soak monitor: its CLIs and the job from a finished watch to evidence, over the role groups below. May import: foundation, runtime, harness.context, harness.compare, harness.soak."""
