"""The user-owned CUDA MPS daemon: lifecycle CLI and doctor. May import: foundation, harness.cumps."""
