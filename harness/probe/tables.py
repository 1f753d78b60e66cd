"""Rich tables a person reads in seconds: one probe's summary and a probe comparison's verdicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

# Other processes' CPU share differing by more than this between BASE and NEW is pointed out.
CONTENTION_NOTE = 0.10
SHORT_NAMES = {"env_control_steps_per_s": "env steps/s", "iteration_ms": "iteration ms"}
VERDICT_STYLE = {"faster": "green", "slower": "bold red", "no_change": "dim", "inconclusive": "yellow"}


def print_summary(artifact: Mapping[str, Any], console: Console) -> None:
    """Per backend: medians over every process's rounds, their spread and the stability flag."""
    settings = artifact["settings"]
    table = Table(
        title=f"probe {settings['task']} @ {settings['num_envs']} envs, "
        f"{settings['processes']} processes x {settings['rounds']} rounds"
    )
    for column in ("backend", "device", "env steps/s (CV)", "limit control steps/s", "efficiency",
                   "iter ms p50", "auto-resets", "stability"):  # fmt: skip
        table.add_column(column)
    for name, entry in artifact["backends"].items():
        summary, first = entry["summary"], entry["processes"][0]
        env = summary["env_control_steps_per_s"]
        resets = [p["physics_warnings"] for p in entry["processes"]]
        table.add_row(
            name,
            first["device"],
            f"{env['median']:,.0f} ({env['cv']:.1%})",
            f"{summary['physics_control_steps_per_s']['median']:,.0f}",
            f"{summary['efficiency']['median']:.3f}",
            f"{summary['phases']['iteration_ms']['median']:.3f}",
            "-" if resets[0] is None else str(sum(w["auto_resets"] for w in resets)),
            "[red]UNSTABLE" if entry["stability"]["unstable"] else "stable",
        )
    console.print(table)
    for name, entry in artifact["backends"].items():
        for reason in entry["stability"]["reasons"]:
            console.print(f"[red]{name} unstable: {reason}")
    load = artifact["contention"]
    console.print(
        f"host: load {_load(load['loadavg_start'])} -> {_load(load['loadavg_end'])}, other processes "
        f"used {_share(load['other_cpu_share'])} of the CPUs during the run"
    )


def _load(values: list[float] | None) -> str:
    return "n/a" if values is None else " ".join(f"{v:.2f}" for v in values)


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def print_comparison(report: Mapping[str, Any], console: Console) -> None:
    """The verdict table of ``probe compare``, differences and host notes first."""
    if report["cross_host"]:
        console.print(
            "[bold yellow]comparison ACROSS HOSTS (--allow-cross-host): "
            + "; ".join(report["host_differences"])
        )
    old, new = report["base"]["other_cpu_share"], report["new"]["other_cpu_share"]
    if old is not None and new is not None and abs(new - old) > CONTENTION_NOTE:
        console.print(
            f"[yellow]host contention differed: other processes used {old:.0%} (base) vs {new:.0%} (new) "
            "of the CPUs; a verdict may reflect the load, not the code"
        )
    for diff in report["setting_differences"]:
        console.print(f"setting differs: {diff['field']}: {diff['base']!r} -> {diff['new']!r}")
    table = Table(title=f"probe compare: verdict at a {report['threshold']:.0%} minimum effect")
    for column in ("backend", "measure", "base", "new", "new/base [95% CI]", "verdict"):
        table.add_column(column)
    notes = []
    for row in report["measures"]:
        style = VERDICT_STYLE[row["verdict"]]
        table.add_row(
            row["backend"],
            SHORT_NAMES.get(row["measure"], row["measure"]),
            f"{row['base_median']:,.4g}",
            f"{row['new_median']:,.4g}",
            f"{row['ratio']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]",
            f"[{style}]{row['verdict']}",
        )
        if row["note"]:
            notes.append(f"{row['backend']} {SHORT_NAMES.get(row['measure'], row['measure'])}: {row['note']}")
    console.print(table)
    for note in notes:
        console.print(f"[yellow]note[/] {note}")
    console.print(f"interval: {report['method']}, {report['resamples']} resamples")
