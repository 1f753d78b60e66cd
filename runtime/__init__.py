"""The training runtime that soakbench exercises: ``train --algo --task --sim``.

Rooms, by role:

- ``runtime.config``: the typed, once-validated configuration (``compose`` -> ``validate_for_run``);
- ``runtime.assets``: the G1 humanoid model and its motion clips (nothing downloaded);
- ``runtime.backends``: the physics backends (MuJoCo CPU, MuJoCo Warp), registered by name;
- ``runtime.tasks``: the batched, tensor-native G1 tasks over a backend;
- ``runtime.learners``: SAC and FlashSAC behind one ``Learner`` interface;
- ``runtime.manager``: one training session: the trainer, its collector process, the shared-memory
  replay ingress and inference ring, shutdown and the run summary.

Its top-level modules are the ``train`` CLI (``cli``), the owner-route choices (``choices``), the run
artifacts (``artifacts``), the env factory (``env``), the TensorBoard tag set (``metrics_schema``),
phase timing (``timing``) and one rank of a torchrun job (``distributed``). The runtime never imports
the harness that tests it.
May import: foundation, runtime.
"""
