"""The control segment: the trainer's ``finish`` flag and the collector's running totals.

One small shared header next to the ingress and the ring. The trainer creates it and writes only
``finish``; the collector attaches and writes everything else (iterations done, the adopted actor
version, finished episodes and where its time went). Each field has one writer (see shm.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from soakbench.runtime.manager.shm import CountersSpec, SharedCounters

CONTROL_INT_FIELDS: tuple[str, ...] = ("finish", "iterations", "episodes", "actor_version")
CONTROL_FLOAT_FIELDS: tuple[str, ...] = (
    "episode_return_sum",
    "episode_length_sum",
    "env_step_s",
    "inference_s",
    "publish_s",
)


class ControlStats(TypedDict):
    """Every control field as read at one moment."""

    finish: int
    iterations: int
    episodes: int
    actor_version: int
    episode_return_sum: float
    episode_length_sum: float
    env_step_s: float
    inference_s: float
    publish_s: float


@dataclass(frozen=True)
class StepTiming:
    """Seconds one collector vector step spent in policy inference, env stepping and publication."""

    inference_s: float
    env_step_s: float
    publish_s: float


class ControlSegment:
    """One end of the control header (the trainer creates it, the collector attaches)."""

    def __init__(self, counters: SharedCounters) -> None:
        self._counters = counters

    @classmethod
    def create(cls) -> ControlSegment:
        return cls(SharedCounters.create("control", CONTROL_INT_FIELDS, CONTROL_FLOAT_FIELDS))

    @classmethod
    def attach(cls, spec: CountersSpec) -> ControlSegment:
        return cls(SharedCounters.attach(spec))

    @property
    def spec(self) -> CountersSpec:
        return self._counters.spec

    # -- trainer ------------------------------------------------------------------------------
    def request_finish(self) -> None:
        """The final weights are published: the collector may adopt them and exit."""
        self._counters.set("finish", 1)

    # -- collector ----------------------------------------------------------------------------
    def finish_requested(self) -> bool:
        return bool(self._counters.get("finish"))

    def record_actor_version(self, version: int) -> None:
        self._counters.set("actor_version", version)

    def record_episodes(self, count: int, return_sum: float, length_sum: float) -> None:
        """Add ``count`` finished episodes with their summed returns and lengths (control steps)."""
        c = self._counters
        c.add("episodes", count)
        c.addf("episode_return_sum", return_sum)
        c.addf("episode_length_sum", length_sum)

    def record_step(self, iterations_done: int, timing: StepTiming) -> None:
        """Account one finished vector step: its timing, then the new iteration count."""
        c = self._counters
        c.addf("inference_s", timing.inference_s)
        c.addf("env_step_s", timing.env_step_s)
        c.addf("publish_s", timing.publish_s)
        c.set("iterations", iterations_done)

    # -- both ---------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True once :meth:`close` released this end's mapping."""
        return self._counters.closed

    def stats(self) -> ControlStats:
        c = self._counters
        return ControlStats(
            finish=c.get("finish"),
            iterations=c.get("iterations"),
            episodes=c.get("episodes"),
            actor_version=c.get("actor_version"),
            episode_return_sum=c.getf("episode_return_sum"),
            episode_length_sum=c.getf("episode_length_sum"),
            env_step_s=c.getf("env_step_s"),
            inference_s=c.getf("inference_s"),
            publish_s=c.getf("publish_s"),
        )

    def close(self) -> None:
        """Release the mapping (and unlink it on the creating side); idempotent."""
        self._counters.close()
