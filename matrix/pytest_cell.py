"""pytest plugin: record ``@pytest.mark.cell(algo, task, backend)`` and run facts in the JUnit XML.

Use: ``pytest -p soakbench.matrix.pytest_cell --matrix-platform linux-cpu --matrix-lane cpu --junitxml=PATH``.
Each bound testcase gets a ``cell`` property (``algo/task/backend``, or ``algo/task/backend/ranks=N``
for a marker with ``ranks=N``: a job of N ranks); the suite gets ``matrix.commit``,
``matrix.dirty``, ``matrix.worktree_digest``, ``matrix.system``, ``matrix.python`` (the interpreter),
``matrix.gpu_available``, ``matrix.platform`` and ``matrix.lane``, measured when the session starts, and
``matrix.distributions`` (JSON: every distribution the test processes imported or whose native libraries
they mapped, at the version installed; an xdist worker's included), when it ends.

``--matrix-only-cell CELL`` (repeatable) runs only the tests bound to those cells: the incremental
collection (``collect_cpu_evidence.sh --only stale``) reruns the bound tests of the cells whose JUnit
evidence a change made historical, not the whole lane. A cell with no bound test is a usage error.
"""

from __future__ import annotations

import argparse
import json
import platform as platform_module
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from soakbench.foundation.cells import CELL_FORMAT, parse_cell
from soakbench.matrix.model import CELL_PROPERTY, LANES, PLATFORMS, SUITE_PREFIX, cell_property

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_REFUSAL = "matrix_only_cell_refusal"  # an xdist worker's refusal, carried to the controller
_refusal_key = pytest.StashKey[str]()
_LOADED = "matrix_loaded_distributions"  # what an xdist worker's tests loaded, carried to the controller
_loaded_key = pytest.StashKey[dict[str, str]]()


def _name(value: str) -> str:
    """A platform or lane name (which one the inventory allows, ``matrix ingest`` checks)."""
    if not _NAME.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a name ([a-z0-9][a-z0-9_.-]*)")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("matrix", "support-matrix evidence")
    group.addoption(
        "--matrix-platform",
        type=_name,
        default=None,
        help=f"platform this lane runs as: one of the inventory's ({', '.join(PLATFORMS)}, or a project's own)",
    )
    group.addoption(
        "--matrix-lane",
        type=_name,
        default=None,
        help=f"CI lane name recorded in the JUnit XML: one of the inventory's ({', '.join(LANES)}, or a "
        "project's own)",
    )
    group.addoption(
        "--matrix-only-cell",
        action="append",
        type=_cell,
        default=[],
        metavar="CELL",
        help=f"run only the tests bound to CELL ({CELL_FORMAT}); repeat for several cells",
    )


def _cell(value: str) -> str:
    """A ``--matrix-only-cell`` value in its one text form (``cell_property``)."""
    parsed = parse_cell(value)
    if parsed is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not a cell: {CELL_FORMAT}")
    return cell_property(*parsed)


def cell_values(item: pytest.Item) -> list[str]:
    """The ``cell`` property of every cell marker on ``item`` (marker args or algo=, task=, backend=;
    ``ranks=N``, an integer >= 2, for a job of N ranks)."""
    out: list[str] = []
    for mark in item.iter_markers(name="cell"):
        args = list(mark.args) + [mark.kwargs[k] for k in ("algo", "task", "backend") if k in mark.kwargs]
        ranks = mark.kwargs.get("ranks", 1)
        if len(args) != 3 or not all(isinstance(a, str) and a and "/" not in a for a in args):
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.cell needs (algo, task, backend), got {mark}"
            )
        if "ranks" in mark.kwargs and (type(ranks) is not int or ranks < 2):
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.cell ranks must be an integer >= 2 (leave it out for one "
                f"rank), got {ranks!r}"
            )
        out.append(cell_property(args[0], args[1], args[2], ranks))
    return sorted(set(out))


def _strict_xfail(item: pytest.Item) -> None:
    """A bound test that xpasses must fail: JUnit XML writes a non-strict xpass as a plain pass, which
    would count toward Tested. Prepended, the strict copy is the one pytest evaluates."""
    mark = item.get_closest_marker("xfail")
    if mark is not None and "strict" not in mark.kwargs:
        item.add_marker(pytest.mark.xfail(*mark.args, **mark.kwargs, strict=True), append=False)


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``cell`` marker, so a project's own tests need no ``markers`` entry of their own
    (and ``--strict-markers`` accepts it)."""
    config.addinivalue_line(
        "markers", "cell(algo, task, backend, kind=..., ranks=N): binds a test to a support-matrix cell"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    only = set(config.getoption("--matrix-only-cell"))
    bound_anywhere: set[str] = set()
    kept: list[pytest.Item] = []
    for item in items:
        values = cell_values(item)
        bound_anywhere.update(values)
        if only:
            # a run of chosen cells files only those: another cell's tally would hold part of its tests
            values = [value for value in values if value in only]
            if not values:
                continue
        for value in values:
            item.user_properties.append((CELL_PROPERTY, value))
        if values:
            _strict_xfail(item)
        kept.append(item)
    if only:
        _keep_only(config, items, kept, only, bound_anywhere)


def _keep_only(
    config: pytest.Config, items: list[pytest.Item], kept: list[pytest.Item], only: set[str], bound: set[str]
) -> None:
    """Deselect every test not bound to one of ``only``; a named cell that no collected test is bound to
    (``bound``: every cell some collected test is bound to) stops the run, so a mistyped cell never files
    an empty lane."""
    unbound = sorted(only - bound)
    if unbound:
        _refuse(
            config,
            f"--matrix-only-cell: no collected test is bound to {', '.join(unbound)}; "
            f"bound cells: {', '.join(sorted(bound)) or 'none'}",
        )
        kept = []
    kept_ids = {id(item) for item in kept}
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept_ids])
    items[:] = kept


def _refuse(config: pytest.Config, message: str) -> None:
    """Stop a run that would file nothing for a named cell. An xdist worker cannot show a usage error
    (the controller reports a crash instead), so it runs nothing and hands the message to the controller."""
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is None:
        raise pytest.UsageError(message)
    workeroutput[_REFUSAL] = message


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    output = getattr(node, "workeroutput", {})
    if message := output.get(_REFUSAL):
        node.config.stash[_refusal_key] = message
    node.config.stash.setdefault(_loaded_key, {}).update(output.get(_LOADED) or {})


@pytest.hookimpl(tryfirst=True)  # before the JUnit XML is written, and before xdist sends a worker's output
def pytest_sessionfinish(session: pytest.Session) -> None:
    message = session.config.stash.get(_refusal_key, None)
    if message:
        sys.stderr.write(f"ERROR: {message}\n")
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
    _record_loaded(session.config)


def loaded_distributions() -> dict[str, str]:
    """The distributions this process imported or whose native libraries it mapped, at the versions
    installed: what the tests actually ran (the lock says what they should have)."""
    from soakbench.foundation.inputs import canonical_name, imported_distributions
    from soakbench.foundation.mapped import mapped_distributions

    mapped = {canonical_name(k): v for k, v in (mapped_distributions() or {}).items()}
    return {**imported_distributions(), **mapped}


def _record_loaded(config: pytest.Config) -> None:
    """A worker hands what it loaded to the controller; the process that writes the JUnit XML records
    the union (its own and every worker's) as ``matrix.distributions``."""
    from _pytest.junitxml import xml_key

    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_LOADED] = loaded_distributions()
        return
    xml = config.stash.get(xml_key, None)
    if xml is not None:
        workers: dict[str, str] = config.stash.get(_loaded_key, {})
        loaded = {**loaded_distributions(), **workers}
        xml.add_global_property(SUITE_PREFIX + "distributions", json.dumps(dict(sorted(loaded.items()))))


def pytest_sessionstart(session: pytest.Session) -> None:
    from _pytest.junitxml import xml_key

    xml = session.config.stash.get(xml_key, None)
    if xml is None:
        return
    from soakbench.foundation.nvml import gpu_snapshot
    from soakbench.harness.context import source_context

    source = source_context(Path(str(session.config.rootpath)))
    facts = {
        "commit": source["commit"] or "",
        "dirty": "true" if source["dirty"] or source["dirty"] is None else "false",
        "worktree_digest": source["worktree_digest"] or "",
        "system": platform_module.system(),
        "python": platform_module.python_version(),
        "gpu_available": "true" if gpu_snapshot()["available"] else "false",
        "platform": session.config.getoption("--matrix-platform") or "",
        "lane": session.config.getoption("--matrix-lane") or "",
    }
    for name, value in facts.items():
        xml.add_global_property(SUITE_PREFIX + name, value)
