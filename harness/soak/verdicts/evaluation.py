"""The soak pass table (docs/soak-reference.md, "The pass table") as pure logic: observation in, verdict out.

Every row is a ``Criterion`` ``{name, expected, value, result}`` with result ``pass | fail |
not_applicable``; the run passes iff no row fails. Rows, in order of precedence:

==================================  ====================================================  ===============
name                                passes when                                           group
==================================  ====================================================  ===============
monitor_status                      the monitor saw the command through (no start-up      monitor
                                    timeout, stale progress, shutdown hang, cancellation
                                    or monitor error)
trainer_returncode                  the command exited 0                                  trainer
shutdown_contract                   the shutdown block keeps the shutdown contract        shutdown
                                    (harness.soak.verdicts.contract)
run_summary_schema                  run_summary and its manifest validate, both schema    schema
                                    versions the integer 1
run_status                          run_summary.status == "completed"                     run_contract
run_failure                         run_summary.failure_reason and the shutdown           run_contract
                                    exception are both null
inference_drained                   final inference queue depth and publication lag 0     run_contract
replay_final_occupancy              replay final occupancy 0                              run_contract
replay_no_drops                     replay dropped batches and early returns both 0       run_contract
replay_release_sequence             release sequence == published sequence                run_contract
replay_published_sequence           published sequence == total_env_steps / slot_rows     run_contract
replay_invariants                   every replay ingress cross-invariant holds            run_contract
inference_invariants                every inference ring cross-invariant holds            run_contract
shutdown_classification             shutdown classification "normal_completion"           run_contract
shutdown_cleanup_errors             shutdown cleanup errors == []                         run_contract
post_shutdown_residual_processes    no tree process alive after the grace period          resource_leak
orphaned_shm_segments               no /dev/shm segment of the run left behind            resource_leak
                                    (``not_applicable`` where the sampler cannot list
                                    segments)
leak_verdicts                       no judged resource class ``growing``, in the tree or  resource_leak
                                    in a long-lived process (harness.soak.verdicts.per_process)
survival                            no class with a limit ``fails`` against               resource_exhaustion
                                    ``--must-survive`` (harness.soak.verdicts.survival);
                                    ``inconclusive`` when a bound straddles the target;
                                    ``not_applicable`` (each class's time to exhaustion
                                    as information) without a target; absent from an
                                    artifact that recorded no survival section
min_duration                        the run lasted at least the minimum duration          too_short
trend_observation                   every observable resource class has a verdict on at   observation
                                    least ``min_trend_samples`` post-start-up samples
                                    (harness.soak.verdicts.observation)
throughput_drift                    the trainer's env steps/s is not ``declining`` over   throughput_drift
                                    the trend window (harness.soak.verdicts.drift);
                                    ``not_applicable`` unless --fail-on-throughput-drift
oom_kills                           no tree process OOM-killed (harness.soak.verdicts.oom)         oom
gpu_xid_errors                      no critical XID event on the run's GPUs                gpu
                                    (harness.soak.verdicts.gpu)
gpu_ecc_uncorrected                 no GPU's volatile uncorrected ECC count rose           gpu
gpu_throttle                        no sample with a thermal, power-brake or               gpu
                                    hardware-slowdown clock event; ``not_applicable``
                                    (the share as information) unless
                                    --fail-on-gpu-throttle
==================================  ====================================================  ===============

The GPU rows are ``not_applicable`` with NVML's reason where NVML is absent or does not support a query.

In ``monitor`` mode without ``--run-contract`` the schema, shutdown and run_contract rows are
``not_applicable`` (they need a run_summary).

A run that ``--until-decided`` stopped (``stop``: survival decided, or its maximum duration passed) did
not fail for it: ``monitor_status`` passes and names the stop, and ``trainer_returncode``,
``min_duration`` and every row that needs the completed run's summary are ``not_applicable`` (the exit
status and the length are the stop's). A stop
for a decision that the survival verdict, replayed from the samples, does not hold fails
``monitor_status`` as ``monitor_error``.

``failure_classification`` is one of the closed vocabulary ``foundation.vocab.SOAK_FAILURE_CLASSIFICATIONS``; the first failed
row decides it (rows are ordered by precedence):

- ``monitor_status`` fails -> the monitor failure itself: ``timeout/startup``, ``timeout/stale_tick``,
  ``shutdown_hang``, ``external_cancellation`` or ``monitor_error`` (the reason adds ``monitor_detail``);
- ``trainer_returncode`` fails -> the run_summary's shutdown classification when it names a failure
  (``learner_failure``, ``collector_failure``, ``backend_worker_failure``, ``timeout/stale_tick``,
  ``external_cancellation``, ``unknown_failure``), else ``trainer_failure``; when the shutdown contract
  row failed too (a non-zero exit claiming ``normal_completion``), ``shutdown_contract_violation``;
- with no readable run_summary, any row that needs one -> ``run_summary_missing``;
- ``shutdown_contract`` fails -> ``shutdown_contract_violation`` (it precedes the schema row, so a
  shutdown block outside the vocabulary is named as such); ``run_summary_schema`` fails ->
  ``schema_violation``; a ``run_contract`` row fails -> ``run_contract_violation``;
- a ``resource_leak`` row fails -> ``resource_leak``; ``min_duration`` fails -> ``too_short``;
  ``trend_observation`` fails -> ``insufficient_observation``; ``throughput_drift`` fails ->
  ``throughput_drift``;
- ``gpu_xid_errors`` or ``gpu_ecc_uncorrected`` fails -> ``gpu_fault``; ``gpu_throttle`` fails (only under
  its flag) -> ``gpu_throttle``;
- ``gpu_fault`` also decides, whichever row failed first, when a critical XID event arrived during the
  run and the command did not exit 0 (it died, or hung and was stopped): the card explains the crash,
  the stall and whatever the run left behind. A monitor failure of its own kind (``external_cancellation``,
  ``monitor_error``) keeps its class: neither is the card's doing;
- ``survival`` fails -> ``resource_exhaustion``; its reason names the class, the process (pid, role),
  the limit and the projected time to exhaustion;
- no row fails but ``survival`` is ``inconclusive`` -> status ``inconclusive`` (no class; exit code 3);
- ``oom_kills`` fails -> ``oom_killed``, whichever row failed first (the kill explains an exit or a stall);
  it wins over ``gpu_fault`` too: a kernel kill is a proven cause of death, an XID a likely one;
- ``tree_deaths`` fails -> ``tree_process_killed``: a process of the tree died by a signal while the run
  otherwise went on (harness.soak.verdicts.tree_deaths).

``failure_reason`` is one sentence naming the row that decided the class (the first failed row, or the
shutdown contract row for a ``shutdown_contract_violation``), then the names of any other failed rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from soakbench.foundation.vocab import MONITOR_FAILURES, SHUTDOWN_FAILURES
from soakbench.harness.soak.verdicts.criterion import Criterion
from soakbench.harness.soak.verdicts.first_death import FirstDeath, death_sentence
from soakbench.harness.soak.verdicts.gates import Gates
from soakbench.harness.soak.verdicts.gpu import GPU_ROWS, GpuAssessment, died_after_xid, gpu_rows
from soakbench.harness.soak.verdicts.looks import MonitorStop
from soakbench.harness.soak.verdicts.per_process import PerProcessVerdicts, leak_row
from soakbench.harness.soak.verdicts.reasons import UNAVAILABLE, failure_reason, row_reason
from soakbench.harness.soak.verdicts.summary_rows import (
    contract_rows,
    lookup,
    lookup_or_none,
    row,
    summary_rows,
)
from soakbench.harness.soak.verdicts.survival import Survival, survival_value
from soakbench.harness.soak.verdicts.tree_deaths import ROW, deaths_row
from soakbench.harness.soak.verdicts.trends import LeakTrends

CRITERIA: tuple[str, ...] = (
    "monitor_status",
    "trainer_returncode",
    "shutdown_contract",
    "run_summary_schema",
    "run_status",
    "run_failure",
    "inference_drained",
    "replay_final_occupancy",
    "replay_no_drops",
    "replay_release_sequence",
    "replay_published_sequence",
    "replay_invariants",
    "inference_invariants",
    "shutdown_classification",
    "shutdown_cleanup_errors",
    "post_shutdown_residual_processes",
    "orphaned_shm_segments",
    "leak_verdicts",
    "survival",
    "min_duration",
    "trend_observation",
    "throughput_drift",
    "oom_kills",
    *GPU_ROWS,
    ROW,
)
# Rows only a job of several ranks has, right after trainer_returncode (a single-rank table stays as it was).
RANK_ROWS: tuple[str, ...] = ("rank_restarts",)
NEEDS_SUMMARY: frozenset[str] = frozenset(CRITERIA[2:15])
RUN_CONTRACT: frozenset[str] = frozenset(CRITERIA[4:15])
RESOURCE_LEAK: frozenset[str] = frozenset(CRITERIA[15:18])


@dataclass(frozen=True)
class MonitorObservation:
    """What the monitor saw, already reduced to data; the policy it is judged under is apart
    (``harness.soak.verdicts.gates.Gates``).

    ``leak_verdicts`` is the result of ``harness.soak.verdicts.trends.leak_verdicts``. Durations in seconds.
    """

    mode: Literal["run", "monitor"]
    monitor_failure: str | None
    trainer_returncode: int | None
    run_summary: Mapping[str, Any] | None
    residual_processes: Sequence[Mapping[str, Any]]
    orphaned_shm_segments: Sequence[Mapping[str, Any]]
    leak_verdicts: LeakTrends
    duration_s: float
    run_summary_error: str | None = None  # why a run_summary could not be read, when it could not
    observation: Mapping[str, Any] | None = None  # harness.soak.verdicts.observation.observe_classes(...)
    throughput_drift: Mapping[str, Any] | None = None  # harness.soak.verdicts.drift.throughput_drift(...)
    oom_kills: Sequence[
        str
    ] = ()  # harness.soak.verdicts.oom.assess(...): one line per OOM-killed tree process
    monitor_detail: str | None = (
        None  # harness.soak.verdicts.hang.failure_detail(...): only with a monitor failure
    )
    shm_unobservable: str | None = None  # why the sampler could not list /dev/shm segments, if it could not
    per_process: PerProcessVerdicts | None = (
        None  # harness.soak.verdicts.per_process.per_process_verdicts(...)
    )
    gpu_health: GpuAssessment | None = None  # harness.soak.verdicts.gpu.assess_gpu(...); None: no record
    first_death: FirstDeath | None = None  # harness.soak.verdicts.first_death.death_to_name(...)
    rank_restarts: int | None = None  # elastic restarts seen (ranks.restarts_seen); None: no ranks
    tree_exits: Mapping[str, Any] | None = None  # harness.soak.verdicts.tree_deaths.tree_exits_section(...)
    survival: Survival | None = (
        None  # harness.soak.verdicts.survival.assess_survival(...); None: not recorded
    )
    stop: MonitorStop | None = None  # --until-decided stopped the run (not a failure)


@dataclass(frozen=True)
class Evaluation:
    """Verdict of one soak: ``failed`` if a criterion failed, else ``inconclusive`` if one could not
    decide, else ``passed``."""

    status: Literal["passed", "failed", "inconclusive"]
    failure_reason: str | None
    failure_classification: str | None
    criteria: list[Criterion] = field(default_factory=list)

    def criteria_dicts(self) -> list[dict[str, Any]]:
        return [c.as_dict() for c in self.criteria]


_ROW_CLASS = {
    "run_summary_schema": "schema_violation",
    "shutdown_contract": "shutdown_contract_violation",
    "min_duration": "too_short",
    "trend_observation": "insufficient_observation",
    "throughput_drift": "throughput_drift",
    "oom_kills": "oom_killed",
    "survival": "resource_exhaustion",
    "gpu_xid_errors": "gpu_fault",
    "gpu_ecc_uncorrected": "gpu_fault",
    "gpu_throttle": "gpu_throttle",
    "rank_restarts": "rank_failure",
    ROW: "tree_process_killed",
}


def _classify(obs: MonitorObservation, first: Criterion, failed: Sequence[Criterion]) -> str:
    if first.name == "monitor_status":  # evaluate() checked it is in MONITOR_FAILURES; none: a stop
        return str(obs.monitor_failure or "monitor_error")  # the samples do not hold
    if first.name == "trainer_returncode":
        if any(c.name == "shutdown_contract" for c in failed) and obs.run_summary is not None:
            return "shutdown_contract_violation"  # e.g. exit 1 while the summary claims normal_completion
        if job_failure(obs) is not None:
            return "rank_failure"  # a job of several ranks: which rank failed first, not rank 0's view
        shutdown = lookup(obs.run_summary, "runtime_manifest.shutdown.classification")
        return str(shutdown) if shutdown in SHUTDOWN_FAILURES else "trainer_failure"
    if first.name in NEEDS_SUMMARY and obs.run_summary is None:
        return "run_summary_missing"
    if first.name in RUN_CONTRACT:
        return "run_contract_violation"
    if first.name in RESOURCE_LEAK:
        return "resource_leak"
    return _ROW_CLASS[first.name]


_OOM_EXPECTED = "no tree process killed by the kernel OOM killer"


def _judged_summary_rows(obs: MonitorObservation, gates: Gates) -> list[Criterion]:
    """Every row that needs a run_summary, in CRITERIA order; each fails when none could be read."""
    by_name = {c.name: c for c in summary_rows(obs.run_summary)}
    by_name.update(contract_rows(obs.run_summary or {}, obs.trainer_returncode))
    rows = [by_name[name] for name in CRITERIA if name in NEEDS_SUMMARY]
    if not gates.judges_summary(obs.mode):
        return [Criterion(c.name, c.expected, None, "not_applicable") for c in rows]
    if obs.stop is not None:
        why = f"the monitor stopped the run before it completed ({obs.stop.reason})"
        return [Criterion(c.name, c.expected, why, "not_applicable") for c in rows]
    if obs.run_summary is None:
        why = obs.run_summary_error or "no run_summary.json was found in the log dir"
        return [Criterion(c.name, c.expected, f"{UNAVAILABLE}{why}", "fail") for c in rows]
    return rows


def _observation_row(observation: Mapping[str, Any] | None) -> Criterion:
    classes = observation.get("classes") if isinstance(observation, Mapping) else None
    if not isinstance(classes, Mapping):
        return row("trend_observation", "an observation record", "no observation record", False)
    threshold = observation.get("min_trend_samples") if observation else None
    value = {
        name: f"{entry.get('status')} ({entry.get('samples')} samples)"
        if entry.get("status") != "not_observable"
        else f"not_observable ({entry.get('reason')})"
        for name, entry in classes.items()
        if isinstance(entry, Mapping)
    }
    short = [
        n for n, e in classes.items() if not isinstance(e, Mapping) or e.get("status") == "insufficient_data"
    ]
    return row(
        "trend_observation",
        f"every observable resource class has a verdict on >= {threshold} post-start-up samples",
        value,
        not short and bool(classes),
    )


def _resource_rows(obs: MonitorObservation, verdicts: Mapping[str, str], gates: Gates) -> list[Criterion]:
    ruled = obs.survival.ruled_leak_classes if obs.survival is not None else frozenset()
    leak_value, leak_ok = leak_row(verdicts, obs.per_process, ruled)
    return [
        row(
            "post_shutdown_residual_processes",
            "[]",
            [dict(p) for p in obs.residual_processes],
            not obs.residual_processes,
        ),
        _shm_row(obs),
        row("leak_verdicts", "no resource class growing", leak_value, leak_ok),
        *_survival_rows(obs.survival),
        _duration_row(obs, gates),
        _observation_row(obs.observation),
    ]


def _duration_row(obs: MonitorObservation, gates: Gates) -> Criterion:
    """``min_duration``; ``not_applicable`` once ``--until-decided`` stopped the run (its own rule)."""
    expected, duration = f">= {gates.min_duration_s:g} s", round(float(obs.duration_s), 3)
    if obs.stop is not None:
        why = f"{duration} (the monitor stopped the run: {obs.stop.reason})"
        return Criterion("min_duration", expected, why, "not_applicable")
    return row("min_duration", expected, duration, obs.duration_s >= gates.min_duration_s)


def _survival_rows(survival: Survival | None) -> list[Criterion]:
    """The ``survival`` row (none when the artifact recorded no survival section)."""
    if survival is None:
        return []
    value = survival_value(survival)
    if survival.target_seconds is None:
        expected = "no target (--must-survive): each class's time to exhaustion, as information"
        return [Criterion("survival", expected, value, "not_applicable")]
    expected = f"every class with a limit survives {survival.target_seconds / 3600.0:.4g} h (--must-survive)"
    result = {"survives": "pass", "fails": "fail"}.get(survival.verdict, "inconclusive")
    return [Criterion("survival", expected, value, result)]  # type: ignore[arg-type]


_MONITOR_EXPECTED = (
    "completed (no start-up timeout, stale progress, shutdown hang, cancellation or monitor error), or "
    "stopped by --until-decided"
)


def _monitor_rows(obs: MonitorObservation) -> list[Criterion]:
    """``monitor_status`` and ``trainer_returncode``: how the run ended, and whether that was a failure."""
    code = row("trainer_returncode", "0", obs.trainer_returncode, obs.trainer_returncode == 0)
    stop = obs.stop
    if obs.monitor_failure is not None or stop is None:
        failure = obs.monitor_failure
        return [row("monitor_status", _MONITOR_EXPECTED, failure or "completed", failure is None), code]
    said = f"stopped at t={stop.t:g} s: " + (
        f"survival decided ({stop.verdict})" if stop.reason == "survival_decided" else "maximum duration"
    )
    held = stop.reason != "survival_decided" or (
        obs.survival is not None and obs.survival.decided and obs.survival.verdict == stop.verdict
    )
    if not held:
        said += "; the survival verdict replayed from the samples does not decide so"
    why = f"{obs.trainer_returncode} (the exit status of the monitor's stop)"
    return [
        row("monitor_status", _MONITOR_EXPECTED, said, held),
        Criterion("trainer_returncode", "0", why, "not_applicable"),
    ]


def _shm_row(obs: MonitorObservation) -> Criterion:
    if obs.shm_unobservable is not None:
        why = f"not observable: {obs.shm_unobservable}"
        return Criterion("orphaned_shm_segments", "[]", why, "not_applicable")
    segments = [dict(s) for s in obs.orphaned_shm_segments]
    return row("orphaned_shm_segments", "[]", segments, not segments)


def _drift_row(obs: MonitorObservation, gates: Gates) -> Criterion:
    """Fails on ``declining`` and, when asked for, on no verdict at all (a gate that cannot judge)."""
    drift = obs.throughput_drift
    expected = "stable env steps/s over the trend window (harness.soak.verdicts.drift)"
    if not isinstance(drift, Mapping):
        value: Any = None if not gates.fail_on_throughput_drift else "no throughput_drift record"
        ok = False
    else:
        keys = ("verdict", "relative_change_pct", "p_value", "slope_per_hour", "reason")
        value = {k: drift.get(k) for k in keys}
        ok = drift.get("verdict") == "stable"
    if not gates.fail_on_throughput_drift:
        return Criterion("throughput_drift", expected, value, "not_applicable")
    return row("throughput_drift", expected, value, ok)


def evaluate(obs: MonitorObservation, gates: Gates) -> Evaluation:
    """Apply the pass table to one observation under its gates (pure; raises ValueError on an
    out-of-vocabulary input)."""
    if obs.mode not in ("run", "monitor"):
        raise ValueError(f"mode: must be 'run' or 'monitor', got {obs.mode!r}")
    if obs.monitor_failure is not None and obs.monitor_failure not in MONITOR_FAILURES:
        raise ValueError(
            f"monitor_failure: must be null or one of {list(MONITOR_FAILURES)}, got {obs.monitor_failure!r}"
        )
    verdicts = obs.leak_verdicts.verdicts
    rows = [
        *_monitor_rows(obs),
        *_judged_summary_rows(obs, gates),
        *_resource_rows(obs, verdicts, gates),
        _drift_row(obs, gates),
        row("oom_kills", _OOM_EXPECTED, list(obs.oom_kills), not obs.oom_kills),
        *gpu_rows(obs.gpu_health, gates.fail_on_gpu_throttle),
        deaths_row(obs.tree_exits, gates.allow_restarts > 0),
    ]
    rows[2:2] = _rank_rows(obs, gates)  # a hidden crash ranks with the exit code, above what it left behind
    failed = [c for c in rows if c.result == "fail"]
    if not failed:
        undecided = [c for c in rows if c.result == "inconclusive"]
        if undecided:
            why = f"criterion {undecided[0].name} inconclusive: {row_reason(undecided[0])}."
            return Evaluation("inconclusive", why, None, rows)
        return Evaluation("passed", None, None, rows)
    classification, lead = _decide(obs, failed)
    return Evaluation(
        "failed", failure_reason(lead, failed, _detail(obs, classification)), classification, rows
    )


def job_failure(obs: MonitorObservation) -> str | None:
    """The failure sentence of a failed job of several ranks, from its job summary (it names the first
    rank that failed); None for a single process or a job that completed."""
    ranks, why = (lookup_or_none(obs.run_summary, k) for k in ("distributed.ranks", "failure_reason"))
    return str(why) if ranks and why else None


def _detail(obs: MonitorObservation, classification: str) -> str | None:
    """What the reason adds to its lead row: the job summary's sentence naming the first rank that
    failed, else the first death in the tree for a command that failed without saying why, else the
    monitor's own detail."""
    job_reason = job_failure(obs)
    if classification == "rank_failure" and job_reason is not None:
        return job_reason
    if classification in ("trainer_failure", "rank_failure") and obs.first_death is not None:
        return death_sentence(obs.first_death)
    return obs.monitor_detail


def _rank_rows(obs: MonitorObservation, gates: Gates) -> list[Criterion]:
    """The rows only a job of several ranks has (``RANK_ROWS``); none for a single process."""
    if obs.rank_restarts is None:
        return []
    expected = f"<= {gates.allow_restarts} elastic restart(s) (--allow-restarts)"
    return [row(RANK_ROWS[0], expected, obs.rank_restarts, obs.rank_restarts <= gates.allow_restarts)]


def _decide(obs: MonitorObservation, failed: Sequence[Criterion]) -> tuple[str, Criterion]:
    """The failure class and the row the reason leads with (precedence in the module docstring)."""
    classification, lead = _classify(obs, failed[0], failed), failed[0]
    if classification == "shutdown_contract_violation":  # the reason names the contract rule broken
        lead = next(c for c in failed if c.name == "shutdown_contract")
    by_name = {c.name: c for c in failed}
    if obs.oom_kills:
        return "oom_killed", by_name["oom_kills"]
    card = "gpu_xid_errors" in by_name and obs.monitor_failure not in (
        "external_cancellation",
        "monitor_error",
    )
    if card and died_after_xid(obs.gpu_health, obs.trainer_returncode):
        return "gpu_fault", by_name["gpu_xid_errors"]
    if classification == "trainer_failure" and obs.first_death is not None and obs.first_death.interval_ranks:
        return "rank_failure", lead  # a rank of a torchrun job was among the first to die
    return classification, lead
