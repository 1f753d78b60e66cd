"""The options of `soak run` and `soak monitor` are declared once: one frozen record each command builds
its settings from, by keyword."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from soakbench.harness.soak.cli import build_app
from soakbench.harness.soak.command_options import MonitorOptions, RunOptions, WatchOptions, typer_command
from soakbench.harness.soak.options import Live

REPO = Path(__file__).resolve().parents[3]
PACKAGES = ("foundation", "runtime", "harness", "matrix", "scripts", "benchmarks")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@pytest.mark.parametrize("command", ["run", "monitor"])
def test_every_shared_option_is_a_flag_of_both_commands(command: str) -> None:
    shown = CliRunner().invoke(build_app(), [command, "--help"], env={"COLUMNS": "240"}).output
    for item in dataclasses.fields(MonitorOptions):
        assert _flag(item.name) in shown, f"soak {command} lacks {_flag(item.name)}"


def test_monitor_parses_into_its_records_and_settings(tmp_path: Path) -> None:
    seen: list[object] = []
    command = typer_command(lambda *records: seen.extend(records), (WatchOptions, MonitorOptions))
    import typer

    app = typer.Typer()
    app.command("main")(command)
    app.command("other")(lambda: None)  # two commands: typer then parses the name
    args = ["main", "--log-dir", str(tmp_path / "run"), "--output", str(tmp_path / "s.json")]
    args += ["--min-duration-seconds", "7", "--allow-signal-death", "collector", "--quiet-progress"]
    args += ["--live", "off", "--", "python3", "-c", "pass"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    watched, shared = seen
    assert isinstance(watched, WatchOptions) and watched.command == ["python3", "-c", "pass"]
    assert isinstance(shared, MonitorOptions) and shared.live is Live.off
    settings = shared.settings(command=tuple(watched.command), mode="monitor", run_settings={})
    assert (settings.min_duration_s, settings.allow_signal_deaths) == (7.0, ("collector",))
    assert settings.progress_every_s == 60.0  # --quiet-progress: a line every --progress-every seconds
    assert settings.gates.min_duration_s == 7.0


def test_run_keeps_its_own_default_budget() -> None:
    shown = CliRunner().invoke(build_app(), ["run", "--help"], env={"COLUMNS": "240"}).output
    line = next(x for x in shown.splitlines() if "--min-duration-seconds" in x)
    assert "[default: 1800.0]" in line
    monitor = CliRunner().invoke(build_app(), ["monitor", "--help"], env={"COLUMNS": "240"}).output
    line = next(x for x in monitor.splitlines() if "--min-duration-seconds" in x)
    assert "[default: 0.0]" in line and "1800" not in line


def test_two_records_cannot_declare_one_option() -> None:
    with pytest.raises(TypeError, match="same option"):
        typer_command(lambda *r: None, (MonitorOptions, MonitorOptions))


def test_a_default_for_no_option_is_refused() -> None:
    with pytest.raises(TypeError, match=r"defaults for no option of its records: \['min_duration_second'\]"):
        typer_command(lambda *r: None, (MonitorOptions,), {"min_duration_second": 1.0})


def test_route_and_shared_records_do_not_overlap() -> None:
    names = [f.name for r in (RunOptions, WatchOptions, MonitorOptions) for f in dataclasses.fields(r)]
    assert len(names) == len(set(names))


def test_no_call_passes_ten_or_more_positional_arguments() -> None:
    """Two swapped arguments in a long positional call go unnoticed; such calls take keywords."""
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and len(node.args) >= 10:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} ({len(node.args)} positional)")
    assert found == []
