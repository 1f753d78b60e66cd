"""The gates a soak is judged under, apart from what it observed (pure: the monitor's settings
hold one from the start, and loading it loads no verdict code)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gates:
    """The policy a soak is judged under: what the user asked to fail on and how much to tolerate.

    ``min_duration_s`` in seconds (>= 0); ``min_trend_samples`` post-start-up samples a class needs for
    a verdict (>= 1); ``allow_restarts`` elastic restarts a job may take (>= 0); ``must_survive_s`` the
    run length every class with a limit must survive (``--must-survive``, seconds > 0; None: no
    target); ``warmup_s`` a declared warm-up after start-up (``--warmup-seconds``, seconds >= 0; None:
    a change point finds it); ``first_look_s`` the analysed span of the first look of a soak that stops
    when it has decided (``--until-decided``, seconds > 0, harness.soak.verdicts.looks; None: judged
    once, at the end).
    """

    min_duration_s: float
    min_trend_samples: int
    run_contract: bool = False
    fail_on_throughput_drift: bool = False
    fail_on_gpu_throttle: bool = False
    allow_restarts: int = 0
    must_survive_s: float | None = None
    warmup_s: float | None = None
    first_look_s: float | None = None

    def judges_summary(self, mode: str) -> bool:
        """Whether the trainer's run summary is judged: always by `soak run`, by `soak monitor` only
        under ``--run-contract``."""
        return mode == "run" or self.run_contract
