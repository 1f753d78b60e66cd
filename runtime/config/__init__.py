"""The typed, once-validated configuration of ``train``.

    compose(algo, task, sim, overrides) -> ComposedConfig        owner YAMLs + overrides, typed and bounded
    validate_for_run(cfg, PlatformFacts.detect()) -> RunConfig   host prerequisites, learner device, MPS
    run_training(run_cfg)                                        (runtime.manager.trainer) takes only a RunConfig

Sections and their fields (docstring, unit, bounds): ``runtime.config.sections``; the generated reference
is docs/settings.md (``python -m runtime.config.settings_doc --write``). Importing this package reads no
file and imports no torch.
May import: foundation, runtime.backends, runtime.tasks, runtime.config.
"""

from soakbench.foundation.vocab import ALGOS
from soakbench.runtime.config.composition import (
    OWNER_KEYS,
    REMOVED_KEYS,
    compose,
    load_run_config,
    parse_override_value,
    split_override,
)
from soakbench.runtime.config.fields import ConfigError
from soakbench.runtime.config.host import (
    LEARNER_THREADS_CAP,
    PlatformFacts,
    platform_blockers,
    process_sharing_environment,
    resolve_learner_device,
    resolve_learner_threads,
    validate_for_run,
)
from soakbench.runtime.config.sections import (
    ComposedConfig,
    CudaProcessSharing,
    FlashSacConfig,
    G1MotionTrackingConfig,
    G1WalkFlatConfig,
    HostResolvedConfig,
    LearnerConfig,
    MpsValidation,
    OwnerConfig,
    ResolvedConfig,
    RunConfig,
    SacConfig,
    Settings,
    TaskConfig,
    TrainingConfig,
)

__all__ = [
    "ALGOS",
    "LEARNER_THREADS_CAP",
    "OWNER_KEYS",
    "REMOVED_KEYS",
    "ComposedConfig",
    "ConfigError",
    "CudaProcessSharing",
    "FlashSacConfig",
    "G1MotionTrackingConfig",
    "G1WalkFlatConfig",
    "HostResolvedConfig",
    "LearnerConfig",
    "MpsValidation",
    "OwnerConfig",
    "PlatformFacts",
    "ResolvedConfig",
    "RunConfig",
    "SacConfig",
    "Settings",
    "TaskConfig",
    "TrainingConfig",
    "compose",
    "load_run_config",
    "parse_override_value",
    "platform_blockers",
    "process_sharing_environment",
    "resolve_learner_device",
    "resolve_learner_threads",
    "split_override",
    "validate_for_run",
]
