"""No silent death in the tree: every watched process that a signal killed, while the run went on (pure).

A trainer that carries on after one of its workers is SIGKILLed, and exits 0, would otherwise pass: the
kill is visible only in the samples. Every sampled process other than the root whose exit status is known
(the kernel's exit event, or the monitor's own waitpid of an adopted orphan) is recorded in the
artifact's ``tree_exits``; one killed by a signal fails the row ``tree_deaths``, named with its pid and
role, unless the monitor killed it itself (a timeout or residual clean-up, judged by its own rows; or,
once ``--until-decided`` stopped the run, any exit after the stop), its
role is declared allowed (``--allow-signal-death ROLE``), or it is a rank of a job allowed to restart
(``--allow-restarts``: the launcher stops the ranks of a failed attempt).

Without the process-events connector and with nothing reaped the row is ``not_applicable``: the exit
statuses were not observable, and the section says why.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from soakbench.harness.soak.verdicts.criterion import Criterion
from soakbench.harness.soak.verdicts.first_death import Exits, Identity, process_exits

ROW = "tree_deaths"
EXPECTED = "no tree process killed by a signal (except by the monitor, or of a role declared allowed)"


def _identity_records(samples: Sequence[Mapping[str, Any]]) -> dict[Identity, Mapping[str, Any]]:
    out: dict[Identity, Mapping[str, Any]] = {}
    for sample in samples:
        for proc in sample.get("processes") or []:
            out[(int(proc["pid"]), int(proc["start_ticks"]))] = proc
    return out


@dataclass(frozen=True)
class KnownExits:
    """What the monitor knows of the tree's exits: the kernel's exit events (``exits``, empty without the
    connector, ``connector_reason`` then says why), its own waitpid of adopted orphans (``reaped``), and
    the processes it killed itself."""

    exits: Exits
    reaped: Mapping[Identity, int]
    killed_by_monitor: Iterable[Mapping[str, Any]]
    connector_reason: str | None
    stopped_t: float | None = None  # when --until-decided stopped the run (samples' clock)


def tree_exits_section(
    samples: Sequence[Mapping[str, Any]],
    root_pid: int | None,
    known_exits: KnownExits,
    allowed_roles: Sequence[str] = (),
) -> dict[str, Any]:
    """The artifact's ``tree_exits``: each sampled non-root process with a known exit status."""
    exits, reaped = known_exits.exits, known_exits.reaped
    killed_by_monitor, connector_reason = known_exits.killed_by_monitor, known_exits.connector_reason
    records = _identity_records(samples)
    known = {
        key: (value["returncode"], value["exited_t"], "kernel")
        for key, value in process_exits(samples, exits).items()
    }
    known.update({key: (code, None, "waitpid") for key, code in reaped.items() if key in records})
    by_monitor = {(int(k["pid"]), int(k.get("start_ticks", -1))) for k in killed_by_monitor if "pid" in k}
    listed = []
    for (pid, ticks), (code, exited_t, seen_by) in sorted(known.items()):
        if pid == root_pid:
            continue
        proc = records[(pid, ticks)]
        listed.append(
            {
                "pid": pid,
                "start_ticks": ticks,
                "name": proc.get("name"),
                "role": proc.get("role"),
                "rank": proc.get("rank"),
                "returncode": code,
                "exited_t": exited_t,
                "seen_by": seen_by,
                "killed_by_monitor": (pid, ticks) in by_monitor or _after_stop(exited_t, known_exits),
            }
        )
    return {
        "observable": connector_reason is None or bool(reaped),
        "reason": connector_reason,
        "allowed_roles": sorted(allowed_roles),
        "exits": listed,
    }


def _after_stop(exited_t: float | None, known_exits: KnownExits) -> bool:
    """Whether an exit came after the monitor's ``--until-decided`` stop. An exit with no time (an
    orphan the monitor reaped itself) is not excused: it may have died before the stop."""
    stopped_t = known_exits.stopped_t
    return stopped_t is not None and exited_t is not None and exited_t >= stopped_t


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def silent_deaths(section: Mapping[str, Any], restarts_allowed: bool) -> list[str]:
    """``pid 123 (collector) killed by SIGKILL at t=41.2 s`` for each death the row fails on."""
    allowed = set(section.get("allowed_roles") or [])
    out = []
    for entry in section.get("exits") or []:
        code = entry.get("returncode")
        if not isinstance(code, int) or code >= 0 or entry.get("killed_by_monitor"):
            continue
        if entry.get("role") in allowed or (restarts_allowed and isinstance(entry.get("rank"), int)):
            continue
        rank = f"rank {entry['rank']} " if isinstance(entry.get("rank"), int) else ""
        who = entry.get("role") or entry.get("name") or "?"
        when = f" at t={entry['exited_t']:g} s" if isinstance(entry.get("exited_t"), int | float) else ""
        out.append(f"{rank}pid {entry['pid']} ({who}) killed by {_signal_name(code)}{when}")
    return out


def deaths_row(section: Mapping[str, Any] | None, restarts_allowed: bool) -> Criterion:
    """The pass-table row ``tree_deaths`` (``not_applicable`` when the exits were not observable)."""
    if section is None or not section.get("observable"):
        why = (section or {}).get("reason") or "no exit record"
        return Criterion(ROW, EXPECTED, f"not observable: {why}", "not_applicable")
    deaths = silent_deaths(section, restarts_allowed)
    return Criterion(ROW, EXPECTED, deaths, "fail" if deaths else "pass")
