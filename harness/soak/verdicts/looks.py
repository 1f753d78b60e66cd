"""When a soak that runs ``--until-decided`` may stop: its looks, and the error each look spends (pure).

A soak judged once, at its end, bounds each growth rate at one-sided 95 %: a healthy class is called
``fails`` (or a leaking one ``survives``) at most 5 % of the time. A soak that checks that verdict after
every sample and stops on the first decision gets no such promise: each look is another 5 % chance that
noise pushes a bound across the lethal rate, and over hundreds of looks a false decision becomes likely.

So the looks are few and each spends a share of the 5 %:

- **A geometric schedule.** Look k comes at the first sample whose analysed span (seconds since the end
  of start-up) reaches ``first_look_s · LOOK_RATIO^(k-1)``; ``first_look_s`` is ``FIRST_LOOK_SAMPLES``
  sample intervals. A 72 h soak at 5 s samples looks 12 times; a 20 min soak at 1 s, 6 times. Each
  look then adds as much data as all the looks before it, so few looks are wasted.
- **Alpha spending by a union bound.** Look k bounds every rate at one-sided ``1 - α_k`` with
  ``α_k = TOTAL_ALPHA / (k (k + 1))``. The shares sum to ``TOTAL_ALPHA`` over any number of looks
  (the sum telescopes: ``1/(k(k+1)) = 1/k - 1/(k+1)``), so the chance that *any* look decides wrongly
  is at most 5 % (Bonferroni), whenever the soak stops: the bound is valid at any stopping time, which
  is what a soak that stops on its own decision needs.
- **A last look.** A soak that ends undecided (its command exits, or ``--until-decided``'s maximum
  duration passes) is judged once more over the whole analysed window, as the next look.

A look happens only before the trainer reports its finalize phase (the leak window ends there too), so
whether a sample is a look depends on the samples up to it alone: the monitor, looking as samples
arrive, and the judgement, replaying the samples file (``replay``), take the same looks on the same
samples and reach the same verdict. The matrix re-derives it that way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from soakbench.foundation.vocab import MonitorStopReason
from soakbench.harness.soak.verdicts.projection import CONFIDENCE
from soakbench.harness.soak.verdicts.survival import Survival, assess_survival

#: the error the whole sequence of looks may spend: that of a soak judged once at its end
TOTAL_ALPHA = round(1.0 - CONFIDENCE, 12)
#: each look comes when the analysed span has grown by this factor: each adds as much data as all before
LOOK_RATIO = 2.0
#: the first look comes after this many sample intervals of analysed span: fewer leave too few bins for
#: a rate bound at the resolutions the projection fits (projection.MIN_BINS of the coarsest)
FIRST_LOOK_SAMPLES = 24
SPENDING_RULE = (
    "look k at an analysed span of first_look_s * 2^(k-1) spends alpha_k = 0.05 / (k (k+1)) "
    "(every look's bound one-sided at 1 - alpha_k; the shares sum to 0.05 over any number of looks)"
)


def first_look_s(sample_interval_s: float) -> float:
    """The analysed span of the first look, in seconds, for samples ``sample_interval_s`` apart."""
    return FIRST_LOOK_SAMPLES * sample_interval_s


def look_alpha(index: int) -> float:
    """The error look ``index`` (1-based) may spend: ``TOTAL_ALPHA / (index (index + 1))``."""
    if index < 1:
        raise ValueError(f"look index: must be >= 1, got {index}")
    return TOTAL_ALPHA / (index * (index + 1))


def look_span_s(index: int, first_s: float) -> float:
    """The analysed span (seconds) at which look ``index`` (1-based) comes."""
    return first_s * LOOK_RATIO ** (index - 1)


def _finishing(sample: Mapping[str, Any]) -> bool:
    progress = sample.get("progress")
    return isinstance(progress, Mapping) and (
        progress.get("phase") == "finalize" or progress.get("final") is True
    )


class LookClock:
    """Which looks fall due as samples arrive (the monitor's loop and ``replay`` each hold one)."""

    def __init__(self, first_s: float, t_start: float) -> None:
        if not first_s > 0:
            raise ValueError(f"first look: must be a span > 0 s, got {first_s}")
        self.first_s = first_s
        self.t_start = t_start
        self.next_index = 1
        self.closed = False  # the trainer reported its finalize phase: no more looks

    def due(self, sample: Mapping[str, Any]) -> list[int]:
        """The looks (1-based indices) that fall due at ``sample``, the samples' next in time order."""
        if self.closed or _finishing(sample):
            self.closed = True
            return []
        span = float(sample["t"]) - self.t_start
        indices = []
        while span >= look_span_s(self.next_index, self.first_s):
            indices.append(self.next_index)
            self.next_index += 1
        return indices


@dataclass(frozen=True)
class LookRecord:
    """The look whose verdict stands: ``index`` (1-based; the looks taken, it included), the samples'
    time ``t`` it came at, whether it decided and whether it was the last look at the run's end."""

    first_look_s: float
    index: int
    t: float | None
    decided: bool
    final: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": SPENDING_RULE,
            "first_look_s": self.first_look_s,
            "ratio": LOOK_RATIO,
            "total_alpha": TOTAL_ALPHA,
            "count": self.index,
            "alpha": look_alpha(self.index),
            "t": self.t,
            "decided": self.decided,
            "final": self.final,
        }


@dataclass(frozen=True)
class SurvivalInputs:
    """What every look projects besides the samples: the limits section, ``--must-survive`` and
    ``--warmup-seconds`` in seconds (None: not given)."""

    limits: Mapping[str, Any] | None
    target_s: float | None
    warmup_s: float | None


def look(
    samples: Sequence[Mapping[str, Any]], *, t_start: float, t_end: float, index: int, inputs: SurvivalInputs
) -> Survival:
    """The survival verdict at look ``index`` over ``samples`` (those up to the look), window
    ``(t_start, t_end)``, every bound at the look's confidence."""
    return assess_survival(
        samples,
        limits=inputs.limits,
        window=(t_start, t_end),
        target_s=inputs.target_s,
        warmup_s=inputs.warmup_s,
        confidence=1.0 - look_alpha(index),
    )


def _recorded(survival: Survival, record: LookRecord) -> Survival:
    return replace(survival, looks=record.to_json())


def replay(
    samples: Sequence[Mapping[str, Any]],
    *,
    window: tuple[float, float] | None,
    first_s: float,
    inputs: SurvivalInputs,
) -> Survival:
    """The verdict of a soak that ran ``--until-decided``: its looks taken again in order over the
    samples (as the monitor took them), stopping at the first that decided; else the last look over
    ``window`` (the analysed window of the whole run, or None when none remains)."""
    if window is None:
        last = assess_survival(
            samples, limits=inputs.limits, window=None, target_s=inputs.target_s, warmup_s=inputs.warmup_s
        )
        return _recorded(last, LookRecord(first_s, 1, None, False, True))
    t_start, t_end = window
    clock = LookClock(first_s, t_start)
    for position, sample in enumerate(samples):
        t = float(sample["t"])
        if t < t_start:
            continue
        for index in clock.due(sample):
            verdict = look(samples[: position + 1], t_start=t_start, t_end=t, index=index, inputs=inputs)
            if verdict.decided:
                return _recorded(verdict, LookRecord(first_s, index, t, True, False))
    index = clock.next_index
    last = look(samples, t_start=t_start, t_end=t_end, index=index, inputs=inputs)
    return _recorded(last, LookRecord(first_s, index, t_end, last.decided, True))


@dataclass(frozen=True)
class MonitorStop:
    """Why the monitor stopped a run that had not failed (``--until-decided``): ``survival_decided`` (a
    look decided; ``verdict`` is its ``survives`` or ``fails``) or ``max_duration`` (``--until-decided``'s
    maximum passed undecided); ``t`` on the samples' clock. Not a failure: the rows judge the run up to
    the stop, and the exit status that the stop caused is the stop's."""

    reason: MonitorStopReason
    t: float
    verdict: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason, "t": self.t, "verdict": self.verdict}

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> MonitorStop | None:
        """The artifact's ``monitor.stop`` (schema-valid), or None."""
        if not isinstance(value, Mapping):
            return None
        verdict = value.get("verdict")
        return cls(value["reason"], float(value["t"]), None if verdict is None else str(verdict))
