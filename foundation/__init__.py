"""The foundation layer under both the training runtime and the harness that tests it.

It holds what both sides need and neither may own: GPU facts from NVML, CUDA MPS resolution, the one
atomic file writer, JSON Schema validators over the schemas shipped as package data, and the closed
vocabularies (algorithms, shutdown and soak failure classes). It imports nothing from ``runtime``,
``harness`` or ``matrix``, and nothing heavy (no torch) at import time, so the soak monitor stays light.
"""
