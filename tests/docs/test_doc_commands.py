"""Every command shown in README.md and docs/*.md is exercised, so a docs example that drifts from the CLI
fails CI.

Cheap commands run for real. Long ones are checked against the CLI they call: the (sub)command must exist,
every ``--flag`` used must appear in its ``--help``, and for ``train`` the owner and every ``dotted=value``
override must compose and validate.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from soakbench.runtime.config import compose

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(bash|sh|shell|console)\s*\n(.*?)^```", re.S | re.M)
CONSOLE_SCRIPTS = {"train", "soak", "probe", "matrix", "cumps", "extract-metrics"}
# Not ours: shell built-ins and host tools the docs mention; nothing of the project to check.
FOREIGN = {
    "git",
    "export",
    "cd",
    "apt-get",
    "nvidia-smi",
    "source",
    "mkdir",
    "ls",
    "cat",
    "rm",
    "echo",
    "sudo",
    "date",
    "eval",
}
ENV = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"}
# Real runs: (program, first argument) pairs cheap enough to execute, with the exit codes they document.
RUN_FOR_REAL = {
    ("cumps", "status"): {0, 1},
    ("cumps", "doctor"): {0, 1},
    ("matrix", "explain"): {0},
}


@dataclass(frozen=True)
class DocCommand:
    source: str
    argv: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.source}: {shlex.join(self.argv)}"


def _simple_commands(line: str) -> list[list[str]]:
    """Split one logical shell line into simple commands (``&&``, ``;``, ``|``): each ``$(...)``
    substitution is a command of its own and the outer line is checked too (with a placeholder in its
    place), so ``soak run --log-dir /r/$(date)`` still checks ``soak run``; leading ``VAR=value``
    assignments are dropped."""
    inner = re.findall(r"\$\(([^()]*)\)", line)
    outer = re.sub(r"\$\(([^()]*)\)", "SUBSTITUTED", line)
    tokens = shlex.split(outer, comments=True)
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in ("&&", "||", ";", "|"):
            commands.append([])
        else:
            commands[-1].append(token)
    out = []
    for command in commands:
        while command and re.match(r"^[A-Z_][A-Z0-9_]*=", command[0]):
            command = command[1:]
        if command:
            out.append(command)
    return [c for sub in inner for c in _simple_commands(sub)] + out


def doc_commands() -> list[DocCommand]:
    found: list[DocCommand] = []
    for path in DOC_FILES:
        for _lang, body in FENCE.findall(path.read_text()):
            logical = re.sub(r"\\\n\s*", " ", body)
            for line in logical.splitlines():
                line = line.strip().removeprefix("$ ")
                if not line or line.startswith("#"):
                    continue
                for argv in _simple_commands(line):
                    found.append(DocCommand(path.relative_to(ROOT).as_posix(), tuple(argv)))
    return found


def _strip_launcher(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``uv run [--frozen|--no-sync|--extra X] prog ...`` -> ``prog ...``."""
    if argv[:2] != ("uv", "run"):
        return argv
    rest = list(argv[2:])
    while rest and rest[0].startswith("--"):
        flag = rest.pop(0)
        if flag in ("--extra", "--group", "--with") and rest:
            rest.pop(0)
    return tuple(rest)


@functools.cache
def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run once per distinct argv: the docs repeat commands across files, and each start costs a
    Python (often torch) import."""
    return subprocess.run(list(argv), capture_output=True, text=True, env=ENV, timeout=300, cwd=ROOT)


def _help(*argv: str) -> str:
    result = _run(*argv, "--help")
    assert result.returncode == 0, f"`{shlex.join(argv)} --help` failed: {result.stderr[-2000:]}"
    return result.stdout


def _script(prog: str) -> list[str]:
    modules = {
        "train": "soakbench.runtime.cli",
        "soak": "soakbench.harness.soak.cli",
        "probe": "soakbench.harness.probe.cli",
        "matrix": "soakbench.matrix.cli",
        "cumps": "soakbench.harness.cumps.cli",
        "extract-metrics": "soakbench.harness.metrics",
    }
    return [
        sys.executable,
        "-c",
        f"import sys; sys.argv[0] = {prog!r}; from {modules[prog]} import main; main()",
    ]


def _flags(args: tuple[str, ...]) -> list[str]:
    before_dashdash = args[: args.index("--")] if "--" in args else args
    return [a.split("=", 1)[0] for a in before_dashdash if a.startswith("--") and a != "--"]


def _subcommand_path(prog: str, args: tuple[str, ...]) -> list[str]:
    if prog in ("soak", "matrix", "cumps") and args and not args[0].startswith("-"):
        return [args[0]]
    if prog == "probe" and args[:1] in (("compare",), ("history",)):  # `probe --backends ...` has none
        return [args[0]]
    return []


def _check_train(args: tuple[str, ...]) -> None:
    opts: dict[str, str] = {}
    overrides: list[str] = []
    items = list(args)
    while items:
        item = items.pop(0)
        if item in ("--algo", "--task", "--sim"):
            opts[item[2:]] = items.pop(0)
        elif item == "--print-config":
            continue
        else:
            assert "=" in item, f"unexpected train argument {item!r}"
            overrides.append(item)
    compose(opts["algo"], opts["task"], opts["sim"], overrides)  # raises ConfigError on drift


def check(command: DocCommand) -> None:
    argv = _strip_launcher(command.argv)
    if argv[0].endswith(".py"):  # `uv run path/to/script.py ...` runs it with the project's Python
        argv = ("python", *argv)
    prog, args = argv[0], argv[1:]
    if prog in FOREIGN:
        return
    if prog == "make":
        makefile = (ROOT / "Makefile").read_text()
        targets = re.findall(r"^([A-Za-z][\w-]*):", makefile, re.M)
        settable = re.findall(r"^([A-Z_]+) \?=", makefile, re.M)  # what `make VAR=value` may set
        assigned = {arg.split("=", 1)[0] for arg in args if "=" in arg}
        named = {arg for arg in args if "=" not in arg}
        assert named <= set(targets), f"Makefile lacks targets {named - set(targets)}"
        assert assigned <= set(settable), f"Makefile has no overridable {assigned - set(settable)}"
        return
    if prog == "bash":
        script = ROOT / args[0]
        assert script.is_file(), f"{script} does not exist"
        subprocess.run(["bash", "-n", str(script)], check=True)
        return
    if prog in ("python", "python3"):
        if args[:1] == ("-c",):
            result = _run(sys.executable, *args)
            assert result.returncode == 0, f"{command}: {result.stderr[-2000:]}"
            return
        target = [sys.executable, *args[:2]] if args[0] == "-m" else [sys.executable, args[0]]
        rest = args[2:] if args[0] == "-m" else args[1:]
        if target[-1] == "soakbench.runtime.assets.generate_motion":
            result = _run(*target, *rest)
            assert result.returncode == 0, f"{command}: {result.stderr[-2000:]}"
            return
        if not target[-1].endswith(".py") and args[0] != "-m":
            pytest.fail(f"{command}: unknown python target")
        if args[0] != "-m":
            assert (ROOT / args[0]).is_file(), f"{args[0]} does not exist"
        if target[-1].endswith(".py") and "my_job" in target[-1]:
            return  # the placeholder for "any command" under `soak monitor --`
        text = _help(*target)
        missing = [f for f in _flags(rest) if f not in text]
        assert not missing, f"{command}: flags not in --help: {missing}"
        return
    if prog == "pytest":
        text = _help(sys.executable, "-m", "pytest")
        aliases = {"--junitxml": "--junit-xml"}  # pytest registers both spellings, --help shows one
        missing = [f for f in _flags(args) if aliases.get(f, f) not in text]
        assert not missing, f"{command}: flags not in pytest --help: {missing}"
        return
    assert prog in CONSOLE_SCRIPTS, f"{command}: unknown program {prog!r} (add it to the docs test)"
    sub = _subcommand_path(prog, args)
    if (prog, sub[0] if sub else "") in RUN_FOR_REAL:
        result = _run(*_script(prog), *args)
        assert result.returncode in RUN_FOR_REAL[(prog, sub[0])], (
            f"{command}: exit {result.returncode}\n{result.stderr}"
        )
        return
    if prog == "train":
        _check_train(args)
        if "--print-config" in args:
            result = _run(*_script(prog), *args)
            assert result.returncode == 0, f"{command}: {result.stderr}"
        return
    text = _help(*_script(prog), *sub)
    missing = [f for f in _flags(args) if f not in text]
    assert not missing, f"{command}: flags not in --help: {missing}"
    extras = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--extra-override"]
    if prog == "soak" and sub == ["run"] and extras:
        compose("flashsac", "g1_motion_tracking", "mujoco", extras)


COMMANDS = doc_commands()


def test_docs_show_commands() -> None:
    assert len(COMMANDS) > 20, "the docs lost their command examples"
    assert any(c.source == "docs/production-guide.md" for c in COMMANDS)
    programs = {_strip_launcher(c.argv)[0] for c in COMMANDS}
    assert programs >= CONSOLE_SCRIPTS, f"console scripts never shown in docs: {CONSOLE_SCRIPTS - programs}"
    really_run = {(p, a[0]) for p, *a in (_strip_launcher(c.argv) for c in COMMANDS) if a}
    assert set(RUN_FOR_REAL) <= really_run, f"no documented command runs {set(RUN_FOR_REAL) - really_run}"


def test_substitutions_are_checked_inside_and_outside() -> None:
    commands = _simple_commands('TS=$(date -u) && uv run soak run --log-dir "/r/$(date)" --bogus')
    assert ["date", "-u"] in commands and ["date"] in commands
    assert ["uv", "run", "soak", "run", "--log-dir", "/r/SUBSTITUTED", "--bogus"] in commands
    with pytest.raises(AssertionError, match="--bogus"):
        check(DocCommand("inline", ("uv", "run", "soak", "run", "--bogus")))


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_documented_command_matches_the_cli(command: DocCommand) -> None:
    check(command)
