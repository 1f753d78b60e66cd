"""The OOM-kill evidence rule (harness/soak/verdicts/oom.py) on data, and how the pass table and the artifact carry
its verdict: ``oom_killed`` wins over the exit code or stall the kill caused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from soakbench.harness.soak.evidence.artifact import MonitorRecord, build_artifact, validation_errors
from soakbench.harness.soak.verdicts.evaluation import MonitorObservation, evaluate
from soakbench.harness.soak.verdicts.gates import Gates
from soakbench.harness.soak.verdicts.judgement import judgement_of
from soakbench.harness.soak.verdicts.oom import ExitEvidence, assess, counter_rise
from soakbench.harness.soak.verdicts.trends import LeakTrends
from tests.harness.soak._observations import split

FIXTURES = Path(__file__).parents[1] / "fixtures"
ROOT, CHILD, OTHER = (100, 5), (101, 6), (102, 7)
CGROUP = "/sys/fs/cgroup/memory/run/limited"


def _host(reading: int, vmstat: int, cgroup: int | None = None) -> dict[str, Any]:
    cgroups = [] if cgroup is None else [{"path": CGROUP, "version": 1, "oom_kill": cgroup}]
    return {
        "reading": reading,
        "mem_available_bytes": 1 << 30,
        "psi_memory": {"some": {"avg10": 2.0}, "full": {"avg10": 1.0}},
        "oom_kill_count": vmstat,
        "cgroup_oom_kill_count": cgroup,
        "cgroups": cgroups,
        "reasons": {},
    }


def _proc(identity: tuple[int, int], name: str, rss: int = 64 << 20, **extra: Any) -> dict[str, Any]:
    return {"pid": identity[0], "start_ticks": identity[1], "name": name, "rss_bytes": rss, **extra}


def _sample(t: float, host: dict[str, Any], *procs: dict[str, Any]) -> dict[str, Any]:
    return {"t": t, "processes": list(procs), "host": host}


def _run(vmstat_after: int = 1, cgroup_after: int | None = 1, **child: Any) -> list[dict[str, Any]]:
    """Root + child alive in three samples, then the child is gone (counters as given)."""
    return [
        _sample(0.0, _host(0, 0, 0), _proc(ROOT, "sh"), _proc(CHILD, "python3", **child)),
        _sample(1.0, _host(1, 0, 0), _proc(ROOT, "sh"), _proc(CHILD, "python3", **child)),
        _sample(2.0, _host(2, 0, 0), _proc(ROOT, "sh"), _proc(CHILD, "python3", **child)),
        _sample(3.0, _host(3, vmstat_after, cgroup_after), _proc(ROOT, "sh")),
    ]


def _tail(reading: int, vmstat: int, alive: list[tuple[int, int]], signalled: bool = False) -> dict[str, Any]:
    return {
        "t": 4.0,
        "host": _host(reading, vmstat, 1),
        "alive": [list(a) for a in alive],
        "monitor_signalled": signalled,
    }


NO_LOG: dict[str, Any] = {"used": False, "reason": "unreadable", "lost_records": 0, "kills": []}


def test_a_descendant_gone_while_the_counters_rose_is_oom_killed() -> None:
    lines, section = assess(_run(pss_bytes=32 << 20), [_tail(4, 1, [])], NO_LOG, (ROOT[0], 0), None)
    (kill,) = section["kills"]
    assert (kill["pid"], kill["name"], kill["exit"]) == (CHILD[0], "python3", None)
    assert (kill["last_seen_t"], kill["gone_by_t"]) == (2.0, 3.0)
    assert kill["last_rss_bytes"] == 64 << 20 and kill["last_pss_bytes"] == 32 << 20
    assert kill["counters"] == {"vmstat_delta": 1, "cgroups": [{"path": CGROUP, "delta": 1}]}
    assert lines == [
        f"pid {CHILD[0]} (python3) was OOM-killed: vanished (a descendant: exit status unseen) between "
        f"t=2 s and t=3 s while vmstat oom_kill +1, {CGROUP} oom_kill +1; last RSS 64.0 MiB, PSS 32.0 MiB"
    ]


def test_the_role_is_named_when_the_sample_record_has_one() -> None:
    lines, section = assess(_run(role="worker"), [], NO_LOG, (None, None), None)
    assert section["kills"][0]["role"] == "worker" and lines[0].startswith(
        f"worker (pid {CHILD[0]}, python3)"
    )


def test_a_rank_of_a_torchrun_job_is_named_by_its_rank() -> None:
    lines, section = assess(_run(role="trainer", rank=1), [], NO_LOG, (None, None), None)
    assert section["kills"][0]["rank"] == 1
    assert lines[0].startswith(f"rank 1 trainer (pid {CHILD[0]}, python3) was OOM-killed")
    _, single = assess(_run(role="trainer"), [], NO_LOG, (None, None), None)
    assert "rank" not in single["kills"][0]  # a single-rank artifact stays as it was


def test_a_victim_still_listed_after_the_kernel_counted_the_kill_is_oom_killed() -> None:
    # the kernel counts the kill when it picks the victim; the next sample can still list it, exiting,
    # with RSS 0, and the sample after that finds it gone with no further rise
    samples = _run(vmstat_after=1, cgroup_after=1)
    samples[2]["host"] = _host(2, 1, 1)
    samples[2]["processes"][1]["rss_bytes"] = 0
    lines, section = assess(samples, [], NO_LOG, (None, None), None)
    (kill,) = section["kills"]
    assert (kill["last_seen_t"], kill["gone_by_t"], kill["last_rss_bytes"]) == (2.0, 3.0, 64 << 20)
    assert "last RSS 64.0 MiB" in lines[0]


def test_an_exit_without_a_counter_rise_is_not_an_oom_kill() -> None:
    _, section = assess(_run(vmstat_after=0, cgroup_after=0), [_tail(4, 0, [])], NO_LOG, (ROOT[0], 0), None)
    assert section["kills"] == []


def test_a_cgroup_rise_alone_is_enough_where_vmstat_is_unreadable() -> None:
    samples = _run(cgroup_after=1)
    for sample in samples:
        sample["host"]["oom_kill_count"] = None
    _, section = assess(samples, [], NO_LOG, (None, None), None)
    assert section["kills"][0]["counters"]["vmstat_delta"] is None


def test_a_process_the_monitor_signalled_is_never_oom_killed() -> None:
    samples = _run(vmstat_after=0, cgroup_after=0)[:3]
    tail = [_tail(3, 0, [ROOT, CHILD]), _tail(4, 1, [], signalled=True)]
    _, section = assess(samples, tail, NO_LOG, (ROOT[0], -9), None)
    assert section["kills"] == []


def test_the_root_needs_sigkill_from_waitpid() -> None:
    samples = [
        _sample(1.0, _host(0, 0, 0), _proc(ROOT, "python3")),
        _sample(2.0, _host(1, 0, 0), _proc(ROOT, "python3")),
    ]
    tail = [_tail(2, 1, [])]
    _, killed = assess(samples, tail, NO_LOG, (ROOT[0], -9), None)
    assert killed["kills"][0]["exit"] == {"returncode": -9, "signal": "SIGKILL", "source": "waitpid"}
    _, exited = assess(samples, tail, NO_LOG, (ROOT[0], 1), None)  # exit 1 while a host OOM happened
    assert exited["kills"] == []


def test_a_kernel_log_that_names_other_victims_clears_the_process() -> None:
    log = {
        **NO_LOG,
        "used": True,
        "reason": None,
        "kills": [{"pid": 999, "comm": "x", "reading": 3, "text": "Killed process 999 (x)"}],
    }
    _, other = assess(_run(), [], log, (None, None), None)
    assert other["kills"] == []
    log["kills"].append(
        {"pid": CHILD[0], "comm": "python3", "reading": 3, "text": f"Killed process {CHILD[0]} (python3)"}
    )
    lines, named = assess(_run(), [], log, (None, None), None)
    assert named["kills"][0]["kernel_log"] == f"Killed process {CHILD[0]} (python3)"
    assert "the kernel log names it" in lines[0]
    assert [k["pid"] for k in named["kernel_log"]["kills"]] == [999, CHILD[0]]


def test_kernel_log_records_outside_the_death_interval_do_not_count() -> None:
    log = {
        **NO_LOG,
        "used": True,
        "reason": None,
        "kills": [{"pid": 999, "comm": "x", "reading": 0, "text": "t"}],
    }
    _, section = assess(_run(), [], log, (None, None), None)
    assert [k["pid"] for k in section["kills"]] == [CHILD[0]]  # the log is silent in readings 1 to 3


def test_counter_rise_ignores_a_cgroup_first_watched_in_the_later_reading() -> None:
    rise = counter_rise(_host(0, 3), _host(1, 3, 5))
    assert rise == {"vmstat_delta": 0, "cgroups": []}


def _collector_summary(exitcode: int) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((FIXTURES / "run_summary_collector_failure.json").read_text())
    summary["runtime_manifest"]["collector"]["pid"] = CHILD[0]
    summary["runtime_manifest"]["collector"]["exitcode"] = exitcode
    return summary


def test_a_collector_oom_is_a_collector_failure_caused_by_oom_killed() -> None:
    summary = _collector_summary(-9)
    _, section = assess(_run(), [_tail(4, 1, [])], NO_LOG, (ROOT[0], 1), summary)
    (kill,) = section["kills"]
    assert kill["role"] == "collector" and kill["exit"]["source"] == "run_summary"
    assert section["shutdown_cause"] == "oom_killed"
    _, exited = assess(_run(), [_tail(4, 1, [])], NO_LOG, (ROOT[0], 1), _collector_summary(3))
    assert exited["kills"] == [] and exited["shutdown_cause"] is None


def _observation(
    summary: dict[str, Any] | None, lines: list[str], **kw: Any
) -> tuple[MonitorObservation, Gates]:
    verdicts = json.loads((FIXTURES / "artifact_clean.json").read_text())["resource_summary"]
    base: dict[str, Any] = {
        "mode": "run",
        "monitor_failure": None,
        "trainer_returncode": 1,
        "run_summary": summary,
        "residual_processes": [],
        "orphaned_shm_segments": [],
        "leak_verdicts": LeakTrends(verdicts=verdicts["leak_verdicts"], trends=verdicts["trends"]),
        "duration_s": 100.0,
        "min_duration_s": 1.0,
        "oom_kills": lines,
    }
    return split(**{**base, **kw})


def test_oom_killed_outranks_the_collector_failure_it_caused() -> None:
    summary = _collector_summary(-9)
    lines, _ = assess(_run(), [_tail(4, 1, [])], NO_LOG, (ROOT[0], 1), summary)
    evaluation = evaluate(*_observation(summary, lines))
    assert evaluation.failure_classification == "oom_killed"
    assert evaluation.failure_reason is not None
    assert evaluation.failure_reason.startswith(f"criterion oom_kills failed: collector (pid {CHILD[0]}")
    assert "trainer_returncode" in evaluation.failure_reason  # still named as also failed
    assert evaluate(*_observation(summary, [])).failure_classification == "collector_failure"


def test_oom_killed_outranks_a_stall_and_a_clean_run_has_a_passing_row() -> None:
    stalled = evaluate(
        *_observation(
            None, ["pid 1 (x) was OOM-killed"], mode="monitor", monitor_failure="timeout/stale_tick"
        )
    )
    assert stalled.failure_classification == "oom_killed"
    row = next(
        c
        for c in evaluate(*_observation(None, [], mode="monitor", trainer_returncode=0)).criteria
        if c.name == "oom_kills"
    )
    assert (row.result, row.value) == ("pass", [])


def _artifact(obs: MonitorObservation, samples: list[dict[str, Any]], oom: dict[str, Any]) -> dict[str, Any]:
    """The artifact a monitor would write for ``obs`` with this ``oom`` section."""
    record = MonitorRecord(
        samples=samples,
        samples_path="/tmp/samples.jsonl",
        timing={"sample_interval_s": 1, "startup_timeout_s": 1, "stale_progress_s": 1, "post_shutdown_grace_s": 0,
                "min_duration_s": 1, "duration_s": 100, "started_at": 0, "finished_at": 1},
        command=["train"],
        log_dir="/tmp/run",
        startup_end_t=1.0,
        oom=oom,
    )  # fmt: skip
    context = json.loads((FIXTURES / "context.json").read_text())
    return build_artifact(judgement=judgement_of(*obs), record=record, context=context)


def test_the_artifact_records_the_oom_section_and_the_shutdown_cause() -> None:
    summary = _collector_summary(-9)
    lines, section = assess(_run(), [_tail(4, 1, [])], NO_LOG, (ROOT[0], 1), summary)
    artifact = _artifact(_observation(summary, lines), _run(), section)
    assert validation_errors(artifact) == []
    assert artifact["failure_classification"] == "oom_killed"
    assert artifact["shutdown"]["classification"] == "collector_failure"
    assert artifact["shutdown"]["cause"] == "oom_killed"
    assert artifact["oom"]["kills"][0]["pid"] == CHILD[0]


def test_an_orphan_the_monitor_reaped_is_judged_by_its_exit_status() -> None:
    _, exited = assess(_run(), [], NO_LOG, (None, None), None, ExitEvidence({CHILD: 0}))
    assert exited["kills"] == []
    _, killed = assess(_run(), [], NO_LOG, (None, None), None, ExitEvidence({CHILD: -9}))
    assert killed["kills"][0]["exit"] == {"returncode": -9, "signal": "SIGKILL", "source": "waitpid"}


# -- a process no sample saw: the kernel's fork/exit events and its log --------------------------------
BRIEF = 103


def _brief_run(vmstat_after: int = 1) -> list[dict[str, Any]]:
    """Only the root is ever sampled; the counters rise between readings 1 and 2."""
    return [
        _sample(0.0, _host(0, 0, 0), _proc(ROOT, "python3")),
        _sample(1.0, _host(1, 0, 0), _proc(ROOT, "python3")),
        _sample(2.0, _host(2, vmstat_after, 0), _proc(ROOT, "python3")),
    ]


def _log(*pids: int, reading: int = 2) -> dict[str, Any]:
    kills = [
        {
            "pid": p,
            "comm": "python3",
            "reading": reading,
            "text": f"Killed process {p} (python3) total-vm:1kB",
        }
        for p in pids
    ]
    return {"used": True, "reason": None, "lost_records": 0, "kills": kills}


def _forks(*pids: int) -> dict[str, Any]:
    killed = [{"pid": p, "parent": ROOT[0], "forked_t": 1.2, "exited_t": 1.7} for p in pids]
    return {"used": True, "reason": None, "forks": 3, "lost": 0, "sigkilled": killed}


def _brief(
    samples: list[dict[str, Any]], log: dict[str, Any], forks: dict[str, Any]
) -> tuple[list[str], dict[str, Any]]:
    return assess(samples, [], log, (ROOT[0], 1), None, ExitEvidence(fork_events=forks))


def test_a_descendant_killed_between_two_samples_is_named_from_the_kernels_reports() -> None:
    lines, section = _brief(_brief_run(), _log(BRIEF), _forks(BRIEF))
    (kill,) = section["kills"]
    assert kill["pid"] == BRIEF and kill["parent"] == ROOT[0] and kill["start_ticks"] is None
    assert kill["exit"] == {"returncode": -9, "signal": "SIGKILL", "source": "fork_events"}
    assert (kill["last_seen_t"], kill["gone_by_t"]) == (1.2, 1.7)
    assert section["fork_events"]["sigkilled"][0]["pid"] == BRIEF
    (line,) = lines
    assert line.startswith(f"pid {BRIEF} (python3; forked by pid {ROOT[0]}, never sampled) was OOM-killed")
    assert "between its fork at t=1.2 s and its exit at t=1.7 s" in line and "the kernel log names it" in line


def test_an_unsampled_victim_forked_under_a_rank_is_named_with_that_rank() -> None:
    # the rank's process (CHILD, rank 1) is sampled; it forks BRIEF, which forks 104: both never sampled
    samples = [
        _sample(t, _host(i, 0 if i < 2 else 1, 0), _proc(ROOT, "python3"), _proc(CHILD, "python3", rank=1))
        for i, t in enumerate((0.0, 1.0, 2.0))
    ]
    forks = {
        "used": True, "reason": None, "forks": 3, "lost": 0,
        "sigkilled": [{"pid": BRIEF, "parent": CHILD[0], "forked_t": 1.2, "exited_t": 1.7},
                      {"pid": 104, "parent": BRIEF, "forked_t": 1.3, "exited_t": 1.6}],
    }  # fmt: skip
    lines, section = _brief(samples, _log(BRIEF, 104), forks)
    assert [(k["pid"], k.get("rank")) for k in section["kills"]] == [(104, 1), (BRIEF, 1)]
    assert lines[1].startswith(f"rank 1 pid {BRIEF} (python3; forked by pid {CHILD[0]}, never sampled)")
    outside = _brief(_brief_run(), _log(BRIEF), _forks(BRIEF))[1]["kills"]
    assert "rank" not in outside[0]  # forked by the root, which is no rank's


def test_without_every_piece_of_the_kernels_word_no_unsampled_process_is_named() -> None:
    assert _brief(_brief_run(), _log(OTHER[0]), _forks(BRIEF))[1]["kills"] == []  # the log names another
    assert _brief(_brief_run(), _log(BRIEF), _forks(OTHER[0]))[1]["kills"] == []  # not a SIGKILLed descendant
    assert _brief(_brief_run(vmstat_after=0), _log(BRIEF), _forks(BRIEF))[1]["kills"] == []  # no counter rose
    assert _brief(_brief_run(), _log(BRIEF, reading=9), _forks(BRIEF))[1]["kills"] == []  # no such reading


def test_a_sampled_process_is_judged_by_the_sampled_rule_not_twice() -> None:
    samples = _run()  # CHILD sampled, then gone while the counters rose
    lines, section = _brief(samples, _log(CHILD[0], reading=3), _forks(CHILD[0]))
    (kill,) = section["kills"]
    assert kill["pid"] == CHILD[0] and kill["start_ticks"] == CHILD[1] and "parent" not in kill
    assert len(lines) == 1


def test_an_artifact_with_an_unsampled_kill_and_fork_events_is_schema_valid() -> None:
    lines, section = _brief(_brief_run(), _log(BRIEF), _forks(BRIEF))
    artifact = _artifact(
        _observation(None, lines, mode="monitor", trainer_returncode=1), _brief_run(), section
    )
    assert validation_errors(artifact) == []
    assert artifact["failure_classification"] == "oom_killed"
    assert artifact["oom"]["kills"][0]["exit"]["source"] == "fork_events"
