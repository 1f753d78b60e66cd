"""The request one probe worker measures: written as JSON by ``harness.probe.cli``, parsed by ``harness.probe.worker``.

Parsing is strict (the launcher writes every field; anything else is a bug to report, not to guess
around): a bad spec raises :class:`SpecError` naming the field and what is allowed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

MAX_SEED = 2**31 - 1


class SpecError(ValueError):
    """The worker spec is malformed; the message names the field and what it allows."""


@dataclass(frozen=True)
class WorkerSpec:
    """One backend measurement: the owner config to compose and the loop sizes.

    ``overrides`` are the dotted config overrides the launcher's precondition check composed with
    (``harness.probe.cli.config_overrides``); ``rounds`` is clamped to ``iters`` by the worker.
    """

    backend: str
    algo: str
    task: str
    overrides: tuple[str, ...]
    warmup: int
    iters: int
    seed: int
    torch_threads: int
    rounds: int
    step_sleep_ms: float = 0.0  # test-only: a fixed sleep inside every timed env step (a known slowdown)

    def to_json(self) -> dict[str, object]:
        """The JSON object :func:`parse_spec` reads back."""
        return {**asdict(self), "overrides": list(self.overrides)}


FIELDS: tuple[str, ...] = tuple(f.name for f in fields(WorkerSpec))
# (low, high) for every integer field; high None = unbounded
INT_RANGES: dict[str, tuple[int, int | None]] = {
    "warmup": (0, None),
    "iters": (1, None),
    "seed": (0, MAX_SEED),
    "torch_threads": (1, None),
    "rounds": (1, None),
}


def parse_spec(raw: object) -> WorkerSpec:
    """Validate the decoded spec JSON; raise :class:`SpecError` on the first problem."""
    if not isinstance(raw, dict):
        raise SpecError(
            f"the spec must be a JSON object with fields {list(FIELDS)}, got {type(raw).__name__}"
        )
    missing = [name for name in FIELDS if name not in raw]
    if missing:
        raise SpecError(f"spec is missing field(s) {missing}; required: {list(FIELDS)}")
    unknown = sorted(str(name) for name in raw if name not in FIELDS)
    if unknown:
        raise SpecError(f"spec has unknown field(s) {unknown}; allowed: {list(FIELDS)}")
    return WorkerSpec(
        backend=_text(raw, "backend"),
        algo=_text(raw, "algo"),
        task=_text(raw, "task"),
        overrides=_texts(raw, "overrides"),
        warmup=_integer(raw, "warmup"),
        iters=_integer(raw, "iters"),
        seed=_integer(raw, "seed"),
        torch_threads=_integer(raw, "torch_threads"),
        rounds=_integer(raw, "rounds"),
        step_sleep_ms=_milliseconds(raw, "step_sleep_ms"),
    )


def _text(raw: dict[str, object], name: str) -> str:
    value = raw[name]
    if not isinstance(value, str) or not value:
        raise SpecError(f"spec field {name!r} must be a non-empty string, got {value!r}")
    return value


def _texts(raw: dict[str, object], name: str) -> tuple[str, ...]:
    value = raw[name]
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise SpecError(f"spec field {name!r} must be a list of non-empty strings, got {value!r}")
    return tuple(value)


def _milliseconds(raw: dict[str, object], name: str) -> float:
    value = raw[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        raise SpecError(f"spec field {name!r} must be a finite number >= 0, got {value!r}")
    return float(value)


def _integer(raw: dict[str, object], name: str) -> int:
    value = raw[name]
    low, high = INT_RANGES[name]
    allowed = f"an integer >= {low}" if high is None else f"an integer in {low}..{high}"
    # bool is an int subclass, and true/false in a spec is a bug, not a count
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"spec field {name!r} must be {allowed}, got {value!r}")
    if value < low or (high is not None and value > high):
        raise SpecError(f"spec field {name!r} must be {allowed}, got {value}")
    return value
