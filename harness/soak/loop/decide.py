"""``--until-decided`` in the sampling loop: take each look as its sample arrives, and say when to stop.

The looks and the error each spends are harness.soak.verdicts.looks's; this module only holds the clock
between samples. A look runs the survival projection over every sample so far (a fraction of a second
for a few dozen series), so the loop takes it inline: the next sample waits that long, once per look.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from soakbench.harness.soak.evidence.live import LiveView
from soakbench.harness.soak.loop.settings import MonitorSettings
from soakbench.harness.soak.verdicts.looks import LookClock, MonitorStop, SurvivalInputs, first_look_s, look
from soakbench.harness.soak.verdicts.survival import duration_text


class UntilDecided:
    """The stop rule of one run under ``--until-decided`` (``settings.until_decided_s`` set)."""

    def __init__(self, settings: MonitorSettings, limits: Mapping[str, Any] | None, view: LiveView) -> None:
        if settings.until_decided_s is None:
            raise ValueError("UntilDecided needs --until-decided")
        self.max_s = settings.until_decided_s
        self.first_s = first_look_s(settings.sample_interval_s)
        self.inputs = SurvivalInputs(
            limits=limits, target_s=settings.must_survive_s, warmup_s=settings.warmup_s
        )
        self.view = view
        self.clock: LookClock | None = None

    def check(self, samples: Sequence[Mapping[str, Any]], startup_end_t: float | None) -> MonitorStop | None:
        """After the newest of ``samples`` was recorded: the stop it calls for, or None to go on."""
        sample = samples[-1]
        t = float(sample["t"])
        if startup_end_t is not None:
            if self.clock is None:
                self.clock = LookClock(self.first_s, startup_end_t)
            for index in self.clock.due(sample):
                verdict = look(samples, t_start=startup_end_t, t_end=t, index=index, inputs=self.inputs)
                self.view.note(f"look {index} at {duration_text(t / 3600.0)}: survival {verdict.verdict}")
                if verdict.decided:
                    return MonitorStop("survival_decided", t, verdict.verdict)
        if t >= self.max_s:
            return MonitorStop("max_duration", t, None)
        return None
