"""Tests build an observation and its gates from one set of keyword fields, as the pass table's rows
read them; the product keeps the two apart (``MonitorObservation``, ``Gates``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from soakbench.harness.soak.verdicts.evaluation import MonitorObservation
from soakbench.harness.soak.verdicts.gates import Gates
from soakbench.harness.soak.verdicts.judgement import Judgement, judgement_of
from soakbench.harness.soak.verdicts.observation import DEFAULT_MIN_TREND_SAMPLES

GATE_FIELDS = frozenset(f.name for f in dataclasses.fields(Gates))


def split(**fields: Any) -> tuple[MonitorObservation, Gates]:
    """The observation and the gates named among ``fields`` (gates not named: 0 s, the default samples)."""
    gates = {name: fields.pop(name) for name in list(fields) if name in GATE_FIELDS}
    gates.setdefault("min_duration_s", 0.0)
    gates.setdefault("min_trend_samples", DEFAULT_MIN_TREND_SAMPLES)
    return MonitorObservation(**fields), Gates(**gates)


def judged(**fields: Any) -> Judgement:
    """The judgement of the observation and gates named among ``fields``."""
    return judgement_of(*split(**fields))
