"""One training session: ``run_training(run_cfg)`` in ``runtime.manager.trainer``.

The main process is the learner and the manager of one collector process (``collector``, reached
through ``link``). Transitions travel collector -> learner through the shared-memory replay ingress
(``ingress``), actor weights learner -> collector through the inference ring (``ring``); both live in
named segments (``shm``) and wake each other with eventfds (``signals``). ``control`` holds the finish
flag and running totals; ``resources`` what a session holds and ``teardown`` how it is all released,
whatever happened; ``shutdown`` classifies how the run ended. ``reporting``, ``telemetry`` and
``heartbeat`` write progress, TensorBoard scalars and the run summary (``job_summary`` for a job of
several ranks, over ``process_group``); ``inputs_record`` records what each process was made of.
May import: foundation, runtime.artifacts, runtime.backends, runtime.config, runtime.distributed,
runtime.learners, runtime.metrics_schema, runtime.manager.
"""
