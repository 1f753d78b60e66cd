"""The verdict on the console: the failure reason first, then one line per criterion with a short name
and a shortened value; the detail is in the HTML report. Fits 80 columns: no criterion wraps."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from soakbench.harness.soak.verdicts.evaluation import NEEDS_SUMMARY

#: the pass-table rows under names a person scans at a glance (each at most 18 characters)
SHORT_NAMES: dict[str, str] = {
    "monitor_status": "monitor",
    "trainer_returncode": "exit code",
    "shutdown_contract": "shutdown contract",
    "run_summary_schema": "summary schema",
    "run_status": "run status",
    "run_failure": "run failure",
    "inference_drained": "inference drained",
    "replay_final_occupancy": "replay occupancy",
    "replay_no_drops": "replay drops",
    "replay_release_sequence": "replay released",
    "replay_published_sequence": "replay published",
    "replay_invariants": "replay invariants",
    "inference_invariants": "inference invars",
    "shutdown_classification": "shutdown class",
    "shutdown_cleanup_errors": "cleanup errors",
    "post_shutdown_residual_processes": "residual procs",
    "orphaned_shm_segments": "orphaned shm",
    "leak_verdicts": "leaks",
    "survival": "survival",
    "min_duration": "min duration",
    "trend_observation": "trend samples",
    "throughput_drift": "throughput drift",
    "oom_kills": "OOM kills",
    "gpu_xid_errors": "GPU XID errors",
    "gpu_ecc_uncorrected": "GPU ECC errors",
    "gpu_throttle": "GPU throttle",
    "rank_restarts": "restarts",
    "tree_deaths": "signal deaths",
}
_RESULT = {
    "pass": ("pass", "green"),
    "fail": ("FAIL", "bold red"),
    "not_applicable": ("n/a", "dim"),
    "inconclusive": ("undec.", "bold yellow"),
}
_STATUS_STYLE = {"passed": "green", "failed": "bold red", "inconclusive": "bold yellow"}


def short_value(name: str, value: Any) -> str:
    """A row's value in a few words (the whole value is in the artifact and the report)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "-"
    if name == "min_duration" and isinstance(value, int | float):
        return f"{value:.1f} s"
    if isinstance(value, list):
        return "none" if not value else f"{len(value)}: " + _compact(value[0])
    if name == "leak_verdicts" and isinstance(value, Mapping):
        growing = value.get("growing") or []
        return "growing: " + ", ".join(growing) if growing else "none growing"
    if name == "trend_observation" and isinstance(value, Mapping):
        observed = sum(str(v).startswith("observed") for v in value.values())
        return f"{observed} of {len(value)} classes observed"
    if name == "throughput_drift" and isinstance(value, Mapping):
        change = value.get("relative_change_pct")
        return f"{value.get('verdict')}" + ("" if change is None else f" ({change:+.1f} %)")
    if name in _MAPPING_VALUES and isinstance(value, Mapping):
        return _MAPPING_VALUES[name](value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_compact(v)}" for k, v in value.items())
    return _compact(value)


def _survival_value(value: Mapping[str, Any]) -> str:
    """``fails: fds of pid 12 ...``: the verdict, then the first class that decides it."""
    classes = value.get("classes") or []
    target = value.get("target_hours")
    head = str(value.get("verdict")) + ("" if target is None else f" (target {target:g} h)")
    return head + (f": {classes[0]}" if classes else "")


def _xid_value(value: Mapping[str, Any]) -> str:
    events = value.get("events") or []
    if not events:
        return "wait failed" if value.get("event_errors") else "none"
    first = events[0]
    more = f" (+{len(events) - 1} more)" if len(events) > 1 else ""
    return f"XID {first.get('xid')} on GPU {first.get('index')} by t={first.get('t')} s{more}"


def _ecc_value(value: Mapping[str, Any]) -> str:
    rose = [
        f"GPU {gpu}: +{e['increase']}"
        for gpu, e in value.items()
        if isinstance(e, Mapping) and isinstance(e.get("increase"), int) and e["increase"] > 0
    ]
    return ", ".join(rose) if rose else "no increase"


def _throttle_value(value: Mapping[str, Any]) -> str:
    share = value.get("share")
    reasons = ", ".join(value.get("reasons") or {})
    return ("-" if share is None else f"{100.0 * share:.1f} % of samples") + (
        f" ({reasons})" if reasons else ""
    )


_MAPPING_VALUES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "gpu_xid_errors": _xid_value,
    "gpu_ecc_uncorrected": _ecc_value,
    "gpu_throttle": _throttle_value,
    "survival": _survival_value,
}


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)


#: the folded line's name: the rows only a trainer with this runtime's run summary can be judged on
CONTRACT_FOLD = "run_contract_rows"
SHORT_NAMES[CONTRACT_FOLD] = "run contract"


def folded_rows(artifact: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pass table with the rows that need this runtime's run summary folded into one line where none
    of them was judged (`soak monitor` of another trainer, without --run-contract): 13 lines of ``n/a``
    say nothing one line does not."""
    rows = list(artifact.get("criteria", []))
    idle = [
        r
        for r in rows
        if r["name"] in NEEDS_SUMMARY and r["result"] == "not_applicable" and r["value"] is None
    ]
    if len(idle) < 2:
        return rows
    first = rows.index(idle[0])
    line = {
        "name": CONTRACT_FOLD,
        "expected": "the trainer's run summary, judged against this runtime's contract",
        "result": "not_applicable",
        "value": f"{len(idle)} rows: no run summary judged (soak monitor without --run-contract)",
        "folded": [r["name"] for r in idle],
    }
    kept = [r for r in rows if r not in idle]
    return [*kept[:first], line, *kept[first:]]


def verdict_table(artifact: Mapping[str, Any], width: int = 80) -> Table:
    """One line per criterion: result, short name, short value (cut with an ellipsis to fit ``width``
    columns, never wrapped)."""
    name_width = max(len(n) for n in SHORT_NAMES.values())
    table = Table(box=None, padding=(0, 1), show_edge=False, expand=False)
    table.add_column("result", no_wrap=True, width=6)
    table.add_column("criterion", no_wrap=True, width=name_width)
    # what is left of the width after the two columns and one space of padding each side of each column
    table.add_column("value", no_wrap=True, overflow="ellipsis", max_width=max(10, width - name_width - 12))
    for row in folded_rows(artifact):
        word, style = _RESULT[row["result"]]
        name = SHORT_NAMES.get(row["name"], row["name"])
        table.add_row(f"[{style}]{word}[/]", name, escape(short_value(row["name"], row["value"])))
    return table


def print_verdict(artifact: Mapping[str, Any], console: Console) -> None:
    """The headline, the failure reason (wrapped, above the table), then the table."""
    status = artifact["status"]
    head = f"soak {artifact['mode']}: [{_STATUS_STYLE.get(status, 'bold red')}]{status.upper()}[/]"
    if status == "failed":
        head += f" ({escape(str(artifact['failure_classification']))})"
    elif status == "inconclusive":
        head += " (undecided: exit code 3)"
    console.print(head)
    if artifact["status"] != "passed":
        console.print(f"[bold]why:[/] {escape(str(artifact['failure_reason']))}")
    console.print(verdict_table(artifact, console.width))
