"""The soak's one judgement: samples, recorded facts and gates in; a frozen ``Judgement`` out (pure).

Every verdict of a soak is made here and nowhere else. The monitor calls ``judge`` on what it watched;
the matrix calls it on a filed artifact's samples, with the facts and gates that artifact recorded
(``facts_from_artifact``, ``gates_from_artifact``), and diffs the result with what was filed. Nothing
else assembles the observation that the pass table evaluates, so the two can only differ where the
artifact does not record a fact (the exit statuses the monitor reaped, the kernel's exit events: they
change the first death's sentence, never its class).

How the pieces relate, in the order ``judge`` runs them:

- ``trends.leak_verdicts``: each resource class's leak verdict and trend over the analysed window;
- ``observation.observe_classes``: whether each class had enough samples to be judged at all;
- ``per_process.per_process_verdicts``: the same trends for each long-lived process;
- ``gpu.assess_gpu``: XID, ECC and throttle summaries from the GPU record and the samples;
- ``drift.throughput_drift`` (annotated with the GPU's throttling): the trainer's env steps/s trend;
- ``ranks.restarts_seen`` and ``first_death.death_to_name``: a job's elastic restarts and the first
  death worth naming;
- ``survival.assess_survival``: each class with a limit projected to it, against ``--must-survive``
  (over the post-start-up samples, before the finalize phase and teardown: ``trends.analysis_span``);
  for a soak that ran ``--until-decided``, ``looks.replay`` takes its looks again, as the monitor did;
- ``evaluation.evaluate``: the pass table over all of the above, its failure class and reason.

May import: foundation, harness.two_runs, harness.soak.verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from soakbench.harness.soak.verdicts.criterion import Criterion
from soakbench.harness.soak.verdicts.drift import throughput_drift
from soakbench.harness.soak.verdicts.evaluation import Evaluation, MonitorObservation, evaluate
from soakbench.harness.soak.verdicts.first_death import Exits, Identity, Restarts, death_to_name
from soakbench.harness.soak.verdicts.gates import Gates
from soakbench.harness.soak.verdicts.gpu import GPU_ROWS, GpuAssessment, annotate_drift, assess_gpu
from soakbench.harness.soak.verdicts.looks import MonitorStop, SurvivalInputs, replay
from soakbench.harness.soak.verdicts.observation import declared_limits, observe_classes
from soakbench.harness.soak.verdicts.oom import describe
from soakbench.harness.soak.verdicts.per_process import per_process_verdicts
from soakbench.harness.soak.verdicts.ranks import restarts_seen
from soakbench.harness.soak.verdicts.summary_sections import summary_sections
from soakbench.harness.soak.verdicts.survival import Survival, assess_survival
from soakbench.harness.soak.verdicts.trends import LeakTrends, analysis_span, leak_verdicts
from soakbench.harness.two_runs.fields import dig

#: Sections an artifact older than the section does not record (name -> where the artifact holds it);
#: ``judge`` leaves them out for it, so an old artifact is judged on the rows it has evidence for.
OPTIONAL_SECTIONS: dict[str, tuple[str, ...]] = {
    "per_process": ("resource_summary", "per_process"),
    "throughput_drift": ("throughput_drift",),
    "survival": ("survival",),
}

__all__ = [
    "GPU_ROWS",
    "OPTIONAL_SECTIONS",
    "Gates",
    "GpuAssessment",
    "Judgement",
    "LeakTrends",
    "RecordedFacts",
    "declared_limits",
    "facts_from_artifact",
    "gates_from_artifact",
    "judge",
    "judgement_of",
    "summary_sections",
    "survival_of",
]


@dataclass(frozen=True)
class RecordedFacts:
    """What the monitor observed outside the samples file, as the artifact records it.

    Durations and times in seconds (times on the samples' clock). ``reaped`` and ``exits`` are known to
    the monitor alone (an artifact does not record them); ``absent`` names the ``OPTIONAL_SECTIONS`` an
    older artifact lacks.
    """

    mode: Literal["run", "monitor"]
    root_pid: int | None
    trainer_returncode: int | None
    monitor_failure: str | None
    duration_s: float
    startup_end_t: float | None
    run_summary: Mapping[str, Any] | None = None
    run_summary_error: str | None = None
    residual_processes: Sequence[Mapping[str, Any]] = ()
    orphaned_shm_segments: Sequence[Mapping[str, Any]] = ()
    oom_kills: Sequence[str] = ()
    monitor_detail: str | None = None
    tree_exits: Mapping[str, Any] | None = None
    gpu_record: Mapping[str, Any] | None = None
    sampler: Mapping[str, Any] | None = None
    limits: Mapping[str, Any] | None = (
        None  # harness.soak.host.limits.HostLimits.to_json(): the artifact's ``limits``
    )
    stop: MonitorStop | None = None  # --until-decided stopped the run (the artifact's ``monitor.stop``)
    reaped: Mapping[Identity, int] = field(default_factory=dict)
    exits: Exits | None = None
    absent: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Judgement:
    """One soak's verdicts: what was observed, the gates it was judged under, and the pass table."""

    observation: MonitorObservation
    gates: Gates
    evaluation: Evaluation

    @property
    def leak(self) -> LeakTrends:
        """Each resource class's leak verdict and trend (``trends.leak_verdicts``)."""
        return self.observation.leak_verdicts

    @property
    def classes(self) -> Mapping[str, Any]:
        """Whether each class had enough samples for a verdict (``observation.observe_classes``)."""
        return self.observation.observation or {}

    @property
    def gpu(self) -> GpuAssessment | None:
        return self.observation.gpu_health

    @property
    def drift(self) -> Mapping[str, Any] | None:
        return self.observation.throughput_drift

    @property
    def survival(self) -> Survival | None:
        """Each class projected to its limit (``survival.assess_survival``); None when not recorded."""
        return self.observation.survival

    @property
    def status(self) -> Literal["passed", "failed", "inconclusive"]:
        return self.evaluation.status

    @property
    def failure_classification(self) -> str | None:
        return self.evaluation.failure_classification

    @property
    def rows(self) -> list[Criterion]:
        return self.evaluation.criteria


def judgement_of(observation: MonitorObservation, gates: Gates) -> Judgement:
    """The pass table over an observation already assembled (``judge`` assembles it from samples)."""
    return Judgement(observation=observation, gates=gates, evaluation=evaluate(observation, gates))


def judge(samples: Sequence[Mapping[str, Any]], *, facts: RecordedFacts, gates: Gates) -> Judgement:
    """Every verdict of one soak from its samples (in order), its recorded facts and its gates."""
    startup = facts.startup_end_t
    leak = leak_verdicts(samples, startup)  # trends ends its window before finalize
    unobservable, shm_reason = declared_limits(facts.sampler)
    classes = observe_classes(samples, leak, gates.min_trend_samples, unobservable)
    gpu = assess_gpu(facts.gpu_record, samples)
    drift = None
    if "throughput_drift" not in facts.absent:
        drift = annotate_drift(throughput_drift(samples, startup), gpu.throttle if gpu is not None else None)
    per_process = None if "per_process" in facts.absent else per_process_verdicts(samples, startup)
    survival = None if "survival" in facts.absent else survival_of(samples, facts=facts, gates=gates)
    restarts = restarts_seen(samples)
    death = death_to_name(
        samples,
        facts.root_pid,
        facts.reaped,
        facts.trainer_returncode,
        Restarts(restarts, gates.allow_restarts),
        facts.exits,
    )
    observation = MonitorObservation(
        mode=facts.mode,
        monitor_failure=facts.monitor_failure,
        trainer_returncode=facts.trainer_returncode,
        run_summary=facts.run_summary,
        residual_processes=facts.residual_processes,
        orphaned_shm_segments=facts.orphaned_shm_segments,
        leak_verdicts=leak,
        duration_s=facts.duration_s,
        run_summary_error=facts.run_summary_error,
        observation=classes,
        throughput_drift=drift,
        oom_kills=tuple(facts.oom_kills),
        monitor_detail=facts.monitor_detail,
        first_death=death,
        rank_restarts=restarts,
        shm_unobservable=shm_reason,
        per_process=per_process,
        tree_exits=facts.tree_exits,
        gpu_health=gpu,
        survival=survival,
        stop=facts.stop,
    )
    return judgement_of(observation, gates)


def survival_of(samples: Sequence[Mapping[str, Any]], *, facts: RecordedFacts, gates: Gates) -> Survival:
    """The survival projection over the post-start-up samples that precede the finalize phase and the
    teardown tail (the leak window's end; its start is the warm-up cut, not the later two thirds)."""
    startup = facts.startup_end_t
    span = analysis_span(samples, startup) if startup is not None and samples else None
    window = None if span is None or startup is None else (startup, float(span["t_end"]))
    if gates.first_look_s is not None:
        inputs = SurvivalInputs(limits=facts.limits, target_s=gates.must_survive_s, warmup_s=gates.warmup_s)
        return replay(samples, window=window, first_s=gates.first_look_s, inputs=inputs)
    return assess_survival(
        samples, limits=facts.limits, window=window, target_s=gates.must_survive_s, warmup_s=gates.warmup_s
    )


def _section(artifact: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    value = artifact.get(name)
    return value if isinstance(value, Mapping) else None


def _holds(artifact: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    node: Any = artifact
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False
        node = node[key]
    return True


def _absent(artifact: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(name for name, path in OPTIONAL_SECTIONS.items() if not _holds(artifact, path))


def facts_from_artifact(artifact: Mapping[str, Any]) -> RecordedFacts:
    """The facts a filed soak artifact recorded (schema-valid 0.3.0 or 0.4.0), for judging its samples
    again."""
    timing = _section(artifact, "timing") or {}
    return RecordedFacts(
        mode=artifact["mode"],
        root_pid=dig(artifact, "monitor.root_pid"),
        trainer_returncode=artifact.get("trainer_returncode"),
        monitor_failure=artifact.get("monitor_failure"),
        duration_s=float(timing.get("duration_s", 0.0)),
        startup_end_t=dig(artifact, "resource_summary.startup_end_t"),
        run_summary=_section(artifact, "run_summary"),
        residual_processes=artifact.get("post_shutdown_residual_processes") or [],
        orphaned_shm_segments=artifact.get("orphaned_shm_segments") or [],
        oom_kills=tuple(describe(kill) for kill in dig(artifact, "oom.kills") or []),
        tree_exits=_section(artifact, "tree_exits"),
        gpu_record=_section(artifact, "gpu_health"),
        sampler=_section(artifact, "sampler"),
        limits=_section(artifact, "limits"),
        stop=MonitorStop.from_json(dig(artifact, "monitor.stop")),
        absent=_absent(artifact),
    )


def gates_from_artifact(artifact: Mapping[str, Any]) -> Gates:
    """The gates a filed soak artifact was judged under."""
    timing = _section(artifact, "timing") or {}
    threshold = dig(artifact, "resource_summary.observation.min_trend_samples")
    if not isinstance(threshold, int):  # the matrix refuses such an artifact before (rederive.REQUIRED)
        raise ValueError(f"resource_summary.observation.min_trend_samples: an integer, got {threshold!r}")
    return Gates(
        min_duration_s=float(timing.get("min_duration_s", 0.0)),
        min_trend_samples=threshold,
        run_contract=artifact.get("run_contract") is True,
        fail_on_throughput_drift=dig(artifact, "throughput_drift.fails_run") is True,
        fail_on_gpu_throttle=dig(artifact, "gpu_health.fails_on_throttle") is True,
        # the schema holds ranks.allowed_restarts to an integer >= 0 (absent: not a job of several ranks)
        allow_restarts=int(dig(artifact, "ranks.allowed_restarts") or 0),
        must_survive_s=_number_or_none(dig(artifact, "survival.target_seconds")),
        warmup_s=_number_or_none(dig(artifact, "survival.warmup_seconds")),
        first_look_s=_number_or_none(dig(artifact, "survival.looks.first_look_s")),
    )


def _number_or_none(value: Any) -> float | None:
    return None if value is None or isinstance(value, bool) else float(value)
