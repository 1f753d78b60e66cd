"""Which tree processes the kernel's OOM killer took: the evidence rule, as pure logic on recorded data.

A *reading* is one host block (harness.soak.host.pressure) with the tree identities alive when it was read:
every sample is one, and the monitor adds two after the loop (when the command exited, before any
signal of its own, and after the post-shutdown grace). A tree process is ``oom_killed`` when all hold:

1. it was alive in reading L and gone in the next reading N, and the monitor had sent no signal to the
   tree before N;
2. where its exit status is known, it is SIGKILL: the monitor's own child and the orphans it reaped as
   their subreaper from ``waitpid``, the trainer's collector from ``run_summary.json``; other descendants
   are reaped by their own parents, so the monitor only sees their PID vanish;
3. ``/proc/vmstat`` ``oom_kill`` or the ``oom_kill`` of a memory cgroup watched in both readings rose
   between the reading before L (L itself when there is none) and N: the kernel counts the kill when it
   picks the victim, and the victim can still be listed, exiting, in reading L;
4. where the kernel log is readable and holds OOM-kill records found in that interval, one of them names
   its PID (the log then says who the victims were; the counters alone cannot).

The last RSS/PSS reported is from the last sample that saw the process holding memory (an exiting
victim is listed with RSS 0).

A process no sample saw (it lived less than one sample interval) is judged from the kernel's own
reports instead (``unsampled_kills``): the process-events connector says it descended from the root by
fork and died by SIGKILL, the kernel log names its PID as an OOM victim, and the counters rose between
the reading before the one whose kernel-log poll found that record and that reading.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Identity = tuple[int, int]  # (pid, start_ticks)
RULE = (
    "SIGKILL the monitor did not send (or an unknown exit of a descendant), while /proc/vmstat oom_kill "
    "or a watched memory cgroup's oom_kill rose between the reading before the last that saw the process "
    "alive and the first that found it gone; where the kernel log names OOM victims in that interval, it "
    "must name this PID"
)
MIB = float(1 << 20)


@dataclass(frozen=True)
class Reading:
    """One host block and who was alive then; ``records`` holds a sample's process records (tail
    readings have none)."""

    t: float
    host: Mapping[str, Any]
    alive: frozenset[Identity]
    records: Mapping[Identity, Mapping[str, Any]] = field(default_factory=dict)
    monitor_signalled: bool = False


@dataclass(frozen=True)
class KnownExit:
    """An exit status the monitor knows: ``source`` says how (``waitpid``, ``run_summary``)."""

    returncode: int
    source: str
    role: str | None = None


def readings_of(samples: Sequence[Mapping[str, Any]], tail: Sequence[Mapping[str, Any]]) -> list[Reading]:
    """Readings from the samples that carry a host block, then the tail readings
    (``{"t", "host", "alive": [[pid, start_ticks]], "monitor_signalled"}``)."""
    readings = []
    for sample in samples:
        if not isinstance(sample.get("host"), Mapping):
            continue
        records = {(int(p["pid"]), int(p["start_ticks"])): p for p in sample.get("processes", [])}
        readings.append(Reading(float(sample["t"]), sample["host"], frozenset(records), records))
    for entry in tail:
        alive = frozenset((int(pid), int(ticks)) for pid, ticks in entry["alive"])
        readings.append(
            Reading(
                float(entry["t"]), entry["host"], alive, monitor_signalled=bool(entry["monitor_signalled"])
            )
        )
    return readings


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def counter_rise(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """How the OOM-kill counters moved between two host blocks: ``vmstat`` delta (None when either is
    unreadable) and the cgroups (watched in both) whose counter rose."""
    vm_before, vm_after = _int(before.get("oom_kill_count")), _int(after.get("oom_kill_count"))
    earlier = {c["path"]: _int(c.get("oom_kill")) for c in before.get("cgroups", [])}
    cgroups = []
    for entry in after.get("cgroups", []):
        old, new = earlier.get(entry["path"]), _int(entry.get("oom_kill"))
        if old is not None and new is not None and new > old:
            cgroups.append({"path": entry["path"], "delta": new - old})
    vmstat = vm_after - vm_before if vm_before is not None and vm_after is not None else None
    return {"vmstat_delta": vmstat, "cgroups": cgroups}


def _rose(rise: Mapping[str, Any]) -> bool:
    return (rise["vmstat_delta"] or 0) > 0 or bool(rise["cgroups"])


def _kmsg_window(
    kills: Sequence[Mapping[str, Any]], since: Reading, gone: Reading
) -> list[Mapping[str, Any]]:
    """The kernel-log kills found by the readings from ``since`` to ``gone``, both included."""
    lo, hi = _int(since.host.get("reading")), _int(gone.host.get("reading"))
    if lo is None or hi is None:
        return []
    return [k for k in kills if lo <= int(k["reading"]) <= hi]


@dataclass(frozen=True)
class ExitEvidence:
    """What the monitor knows of its tree's exits beyond the samples: the statuses of the adopted orphans
    it reaped (``waitpid``), and the fork-events block (harness.soak.host.forks; None where not watched)."""

    reaped: Mapping[tuple[int, int], int] = field(default_factory=dict)
    fork_events: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class OomInputs:
    """Everything the rule looks at. ``kernel_log_used`` is False where /dev/kmsg could not be read."""

    readings: Sequence[Reading]
    known_exits: Mapping[int, KnownExit] = field(default_factory=dict)
    kernel_kills: Sequence[Mapping[str, Any]] = ()
    kernel_log_used: bool = False


def _death_interval(identity: Identity, readings: Sequence[Reading]) -> tuple[int, int, int] | None:
    """Indexes of (the baseline reading, the last reading that saw ``identity`` alive, the first that
    found it gone), or None if it was alive in the last reading."""
    last = max(i for i, r in enumerate(readings) if identity in r.alive)
    return (max(0, last - 1), last, last + 1) if last + 1 < len(readings) else None


def _judge(identity: Identity, inputs: OomInputs, record: Mapping[str, Any]) -> dict[str, Any] | None:
    interval = _death_interval(identity, inputs.readings)
    if interval is None:
        return None
    base, last, gone = (inputs.readings[i] for i in interval)
    known = inputs.known_exits.get(identity[0])
    if gone.monitor_signalled or (known is not None and known.returncode != -signal.SIGKILL):
        return None
    rise = counter_rise(base.host, gone.host)
    if not _rose(rise):
        return None
    window = _kmsg_window(inputs.kernel_kills, base, gone)
    named = next((k for k in window if k["pid"] == identity[0]), None)
    if inputs.kernel_log_used and window and named is None:
        return None  # the kernel log names other victims in this interval
    return _kill_record(identity, record, known, rise, named, (last.t, gone.t))


def _kill_record(
    identity: Identity,
    record: Mapping[str, Any],
    known: KnownExit | None,
    rise: Mapping[str, Any],
    named: Mapping[str, Any] | None,
    interval: tuple[float, float],
) -> dict[str, Any]:
    role = record.get("role") or (known.role if known is not None else None)
    return {
        "pid": identity[0],
        "start_ticks": identity[1],
        "name": record.get("name"),
        "role": role,
        "cmdline": list(record.get("cmdline", [])),
        "last_rss_bytes": _int(record.get("rss_bytes")),
        "last_pss_bytes": _int(record.get("pss_bytes")),
        "last_seen_t": interval[0],
        "gone_by_t": interval[1],
        "exit": None
        if known is None
        else {"returncode": known.returncode, "signal": "SIGKILL", "source": known.source},
        "counters": dict(rise),
        "kernel_log": named["text"] if named is not None else None,
        **({"rank": record["rank"]} if isinstance(record.get("rank"), int) else {}),  # a torchrun rank's
    }


def _reading_at(readings: Sequence[Reading], index: int) -> int | None:
    """Position of the reading whose host block has ``reading`` = ``index``."""
    return next((i for i, r in enumerate(readings) if _int(r.host.get("reading")) == index), None)


def unsampled_kills(
    inputs: OomInputs, sigkilled: Sequence[Mapping[str, Any]], sampled: Mapping[int, int | None]
) -> list[dict[str, Any]]:
    """Descendants no sample saw that the OOM killer took (module docstring). ``sigkilled`` are the
    fork-event records (``pid``, ``parent``, ``forked_t``, ``exited_t``) of descendants that died by
    SIGKILL; ``sampled`` the PIDs any sample saw, with the torchrun rank each belonged to (or None). A
    victim forked by a rank's process, or by another unsampled victim of one, belongs to that rank."""
    parents = {int(v["pid"]): int(v["parent"]) for v in sigkilled}
    out = []
    for victim in sigkilled:
        if victim["pid"] in sampled:
            continue  # the sampled rule judges it
        record = next((k for k in inputs.kernel_kills if k["pid"] == victim["pid"]), None)
        at = _reading_at(inputs.readings, int(record["reading"])) if record is not None else None
        if record is None or at is None:
            continue
        rise = counter_rise(inputs.readings[max(0, at - 1)].host, inputs.readings[at].host)
        if not _rose(rise):
            continue
        out.append(
            {
                "pid": victim["pid"], "start_ticks": None, "name": record["comm"], "role": None,
                "cmdline": [], "last_rss_bytes": None, "last_pss_bytes": None,
                "last_seen_t": victim["forked_t"], "gone_by_t": victim["exited_t"],
                "exit": {"returncode": -signal.SIGKILL, "signal": "SIGKILL", "source": "fork_events"},
                "counters": dict(rise), "kernel_log": record["text"], "parent": victim["parent"],
                **_rank_of_parent(int(victim["parent"]), parents, sampled),
            }
        )  # fmt: skip
    return out


def _rank_by_pid(samples: Sequence[Mapping[str, Any]]) -> dict[int, int | None]:
    """Each sampled PID's rank; None for a PID of no rank, or one whose processes (a reused PID) were of
    different ranks, since a fork parent known by PID alone cannot be told apart."""
    ranks: dict[int, set[int | None]] = {}
    for sample in samples:
        for proc in sample.get("processes", []):
            rank = proc["rank"] if isinstance(proc.get("rank"), int) else None
            ranks.setdefault(int(proc["pid"]), set()).add(rank)
    return {pid: next(iter(found)) if len(found) == 1 else None for pid, found in ranks.items()}


def _rank_of_parent(
    parent: int, parents: Mapping[int, int], sampled: Mapping[int, int | None]
) -> dict[str, int]:
    """``{"rank": R}`` when the first sampled process up the fork chain belongs to rank R, else ``{}``."""
    for _ in range(len(parents) + 1):  # a chain of unsampled victims is at most that long
        if parent in sampled:
            rank = sampled[parent]
            return {"rank": rank} if rank is not None else {}
        if parent not in parents:
            return {}
        parent = parents[parent]
    return {}


def oom_kills(inputs: OomInputs) -> list[dict[str, Any]]:
    """Every tree process the rule (module docstring) says the OOM killer took, in order of death."""
    last_record: dict[Identity, Mapping[str, Any]] = {}  # the last record holding memory
    for reading in inputs.readings:
        for identity, record in reading.records.items():
            if identity not in last_record or (_int(record.get("rss_bytes")) or 0) > 0:
                last_record[identity] = record
    kills = [_judge(identity, inputs, record) for identity, record in last_record.items()]
    return sorted((k for k in kills if k is not None), key=lambda k: (k["gone_by_t"], k["pid"]))


def describe(kill: Mapping[str, Any]) -> str:
    """One line naming the process, its role, the evidence and its last memory."""
    role = kill["role"]
    who = f"{role} (pid {kill['pid']}, {kill['name']})" if role else f"pid {kill['pid']} ({kill['name']})"
    exit_info = kill["exit"]
    how = (
        f"SIGKILL ({exit_info['source']})"
        if exit_info is not None
        else "vanished (a descendant: exit status unseen)"
    )
    when = f"between t={kill['last_seen_t']:g} s and t={kill['gone_by_t']:g} s"
    if isinstance(kill.get("parent"), int):  # never sampled: known from the kernel's fork and exit events
        who = f"pid {kill['pid']} ({kill['name']}; forked by pid {kill['parent']}, never sampled)"
        when = f"between its fork at t={kill['last_seen_t']:g} s and its exit at t={kill['gone_by_t']:g} s"
    if isinstance(kill.get("rank"), int):
        who = f"rank {kill['rank']} {who}"
    counters = kill["counters"]
    moved = [f"vmstat oom_kill +{counters['vmstat_delta']}"] if counters["vmstat_delta"] else []
    moved += [f"{c['path']} oom_kill +{c['delta']}" for c in counters["cgroups"]]
    memory = f"last RSS {kill['last_rss_bytes'] / MIB:.1f} MiB" if kill["last_rss_bytes"] is not None else ""
    if kill["last_pss_bytes"] is not None:
        memory += f", PSS {kill['last_pss_bytes'] / MIB:.1f} MiB"
    logged = "; the kernel log names it" if kill["kernel_log"] else ""
    return f"{who} was OOM-killed: {how} {when} while {', '.join(moved)}{logged}; {memory or 'RSS unknown'}"


def collector_exit(run_summary: Mapping[str, Any] | None) -> dict[int, KnownExit]:
    """The collector's exit status from the trainer's ``run_summary`` (manifest ``collector`` block)."""
    manifest = (run_summary or {}).get("runtime_manifest")
    block = manifest.get("collector") if isinstance(manifest, Mapping) else None
    if not isinstance(block, Mapping):
        return {}
    pid, code = _int(block.get("pid")), _int(block.get("exitcode"))
    if pid is None or code is None:
        return {}
    return {pid: KnownExit(code, "run_summary", "collector")}


def shutdown_cause(kills: Sequence[Mapping[str, Any]], run_summary: Mapping[str, Any] | None) -> str | None:
    """``oom_killed`` when the trainer reported ``collector_failure`` and the collector is among ``kills``."""
    shutdown = ((run_summary or {}).get("runtime_manifest") or {}).get("shutdown") or {}
    if shutdown.get("classification") != "collector_failure":
        return None
    collectors = set(collector_exit(run_summary))
    return "oom_killed" if any(k["pid"] in collectors for k in kills) else None


def _pressure_summary(readings: Sequence[Reading]) -> dict[str, Any]:
    hosts = [r.host for r in readings]
    available = [v for v in (_int(h.get("mem_available_bytes")) for h in hosts) if v is not None]
    vmstat = [v for v in (_int(h.get("oom_kill_count")) for h in hosts) if v is not None]

    def psi_max(kind: str) -> float | None:
        values = [float(h["psi_memory"][kind]["avg10"]) for h in hosts if h.get("psi_memory")]
        return max(values) if values else None

    return {
        "mem_available_min_bytes": min(available) if available else None,
        "psi_some_avg10_max": psi_max("some"),
        "psi_full_avg10_max": psi_max("full"),
        "vmstat_oom_kill_first": vmstat[0] if vmstat else None,
        "vmstat_oom_kill_last": vmstat[-1] if vmstat else None,
        "cgroups_watched": sorted({c["path"] for h in hosts for c in h.get("cgroups", [])}),
    }


def oom_section(
    inputs: OomInputs,
    kills: Sequence[Mapping[str, Any]],
    kernel_log: Mapping[str, Any],
    cause: str | None,
) -> dict[str, Any]:
    """The artifact's ``oom`` object (docs/soak-artifact.md)."""
    return {
        "rule": RULE,
        "kills": [dict(k) for k in kills],
        "shutdown_cause": cause,
        "host": _pressure_summary(inputs.readings),
        "kernel_log": {**kernel_log, "kills": [dict(k) for k in inputs.kernel_kills]},
    }


def assess(
    samples: Sequence[Mapping[str, Any]],
    tail: Sequence[Mapping[str, Any]],
    kernel_log: Mapping[str, Any],
    root: tuple[int | None, int | None],
    run_summary: Mapping[str, Any] | None,
    exits: ExitEvidence | None = None,
) -> tuple[list[str], dict[str, Any]]:
    """The pass-table lines (one per kill) and the artifact's ``oom`` section of one watched run.

    ``root`` is (pid, returncode) of the monitor's own child; ``kernel_log`` is ``KmsgTail.status()``
    plus its ``kills``; ``exits`` what the monitor knows of the tree's exits beyond the samples.
    """
    exits = exits or ExitEvidence()
    known = collector_exit(run_summary)
    known.update({pid: KnownExit(code, "waitpid") for (pid, _ticks), code in exits.reaped.items()})
    pid, returncode = root
    if pid is not None and returncode is not None:
        known[pid] = KnownExit(returncode, "waitpid")
    inputs = OomInputs(
        readings=readings_of(samples, tail),
        known_exits=known,
        kernel_kills=list(kernel_log.get("kills", [])),
        kernel_log_used=bool(kernel_log.get("used")),
    )
    kills = oom_kills(inputs)
    sampled = _rank_by_pid(samples)
    kills += unsampled_kills(inputs, (exits.fork_events or {}).get("sigkilled", []), sampled)
    kills.sort(key=lambda k: (k["gone_by_t"], k["pid"]))
    status = {k: v for k, v in kernel_log.items() if k != "kills"}
    section = oom_section(inputs, kills, status, shutdown_cause(kills, run_summary))
    if exits.fork_events:
        section["fork_events"] = dict(exits.fork_events)
    return [describe(k) for k in kills], section
