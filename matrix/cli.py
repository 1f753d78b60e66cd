"""``matrix``: ingest evidence, generate the support matrix, check it for drift, explain one cell."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from soakbench.foundation.extras import TRAIN, require
from soakbench.harness.ci.options import JunitXml, SummaryMd
from soakbench.harness.ci.outputs import CiOutputError, CiOutputs
from soakbench.matrix.declared import (
    INVENTORY_REL,
    CapabilityQuery,
    ConfiguredCheck,
    DeclaredFacts,
    FactsSource,
    Registry,
    RuntimeFacts,
    SourcesOf,
    check_roots_at_head,
    is_project_inventory,
    load_inventory,
    load_registry,
    parse_inventory,
    read_inventory,
    runtime_capabilities,
    runtime_cell_sources,
    runtime_configured,
)
from soakbench.matrix.fileio import write_all_atomic
from soakbench.matrix.freshness import (
    GitQueryError,
    affected_cells,
    commit_state,
    head_commit,
    repo_root,
    stale_cells,
    tree_blobs,
    worktree_state,
)
from soakbench.matrix.grading import (
    CellMarker,
    MatrixState,
    audit,
    bound_to,
    collect_markers,
    compute,
    describe_missing,
    fingerprint_paths,
    grade_all,
)
from soakbench.matrix.intake import ingest
from soakbench.matrix.model import (
    EVIDENCE_KINDS,
    LANES,
    PLATFORMS,
    CellKey,
    CellResult,
    Inventory,
    MatrixInputError,
    cell_property,
)
from soakbench.matrix.prune import (
    DEFAULT_KEEP,
    apply_prune,
    evidence_age,
    historical_count,
    plan_prune,
    store_warning,
)
from soakbench.matrix.publishing import PAGE_REL, check_suite, render_all

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
out = Console(highlight=False, soft_wrap=True, markup=False)  # evidence text holds [..] test ids
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
RepoOption = Annotated[
    Path | None, typer.Option("--repo", help="repository root (default: the git work tree containing cwd)")
]


def runtime_inputs() -> tuple[Registry, ConfiguredCheck]:
    """The real runtime registries and configuration check (tests replace this function)."""
    return load_registry(), runtime_configured


def source_inputs() -> SourcesOf:
    """What names each cell's entry files and data (the runtime's own; tests replace this function)."""
    return runtime_cell_sources


def capability_inputs() -> CapabilityQuery:
    """The backends' own capability declarations, resolved per platform (tests may replace this)."""
    return runtime_capabilities


def _fail(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}", markup=True)  # a message's [..] is text, not markup
    return typer.Exit(2)


def _repo(repo: Path | None) -> Path:
    return repo_root(repo or Path.cwd())


def _inputs() -> tuple[Registry, ConfiguredCheck]:
    try:
        return runtime_inputs()
    except ImportError as exc:
        raise MatrixInputError(
            "runtime", "import", f"the runtime registries cannot be imported: {exc}"
        ) from None


def project_inventory(repo: Path) -> Inventory | None:
    """``repo``'s inventory when it is a project's own (it declares its facts; nothing of the runtime is
    imported), None for this runtime's inventory or none at all. Each input root it declares must exist
    at HEAD."""
    if not (repo / INVENTORY_REL).is_file():
        return None
    document = read_inventory(repo)
    if not is_project_inventory(document):
        return None
    inventory = parse_inventory(document, None, INVENTORY_REL)
    check_roots_at_head(document, tree_blobs(repo, head_commit(repo)), INVENTORY_REL)
    return inventory


def _loaded(repo: Path) -> tuple[MatrixState, FactsSource]:
    """The graded matrix of ``repo`` and the facts source its inventory names: a project's own
    declaration, or this runtime's registries, configuration and backends."""
    project = project_inventory(repo)
    if project is not None:
        declared = DeclaredFacts(project)
        return compute(repo, project, declared), declared
    registry, configured = _inputs()
    inventory = load_inventory(repo, registry)
    facts = RuntimeFacts(registry, configured, capability_inputs(), source_inputs())
    try:
        return compute(repo, inventory, facts), facts
    except ImportError as exc:
        raise MatrixInputError(
            "runtime", "import", f"the backends' capability declarations cannot be imported: {exc}"
        ) from None


def _state(repo: Path) -> MatrixState:
    return _loaded(repo)[0]


def _page(repo: Path) -> str:
    try:
        return (repo / PAGE_REL).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MatrixInputError(
            PAGE_REL, "$", "the hand-written page with the generated-block markers is missing"
        ) from None


def generated_files(repo: Path, state: MatrixState | None = None) -> dict[str, str]:
    """Repo-relative path -> generated text, computed in memory (from ``state`` when given)."""
    return render_all(state or _state(repo), _page(repo))


@app.command("ingest")
def ingest_cmd(
    path: Annotated[
        Path, typer.Argument(help="soak artifact JSON, probe artifact JSON, or pytest JUnit XML")
    ],
    kind: Annotated[str | None, typer.Option(help="junit | soak | probe (default: detected)")] = None,
    platform: Annotated[
        str | None, typer.Option(help=f"one of the inventory's platforms ({', '.join(PLATFORMS)} here)")
    ] = None,
    lane: Annotated[
        str | None, typer.Option(help=f"JUnit only: one of the inventory's lanes ({', '.join(LANES)} here)")
    ] = None,
    repo: RepoOption = None,
) -> None:
    """Validate one piece of evidence and file it under matrix/evidence/ (exit 2, nothing written, if bad)."""
    try:
        root = _repo(repo)
        project = project_inventory(root)
        if project is None:  # this runtime's own cells: their sources are read from its registries
            require(TRAIN, "matrix ingest")
        sources = DeclaredFacts(project).cell_sources if project is not None else source_inputs()
        result = ingest(
            root, path, kind=kind, platform=platform, lane=lane, sources_of=sources, inventory=project
        )
    except (MatrixInputError, GitQueryError) as exc:
        raise _fail(str(exc)) from None
    verb = "filed" if result.created else "already filed"
    out.print(f"{verb}: {result.file} (id {result.id})")
    out.print(f"covers: {', '.join(result.covers) or 'no cells'}")
    if not result.fresh:
        out.print(
            "note: an input of it changed since its commit, so it is shown as historical and does not count"
        )
    out.print("next: uv run matrix generate, then commit matrix/evidence/, docs/ and reports/ together")


@app.command("generate")
def generate_cmd(repo: RepoOption = None) -> None:
    """Regenerate docs/support-matrix.md (generated block), reports/support-matrix.html and .json."""
    try:
        root = _repo(repo)
        state = _state(root)
        files = generated_files(root, state)
        changed = {root / rel: text.encode() for rel, text in files.items() if _read(root / rel) != text}
        write_all_atomic(changed)
    except (MatrixInputError, GitQueryError) as exc:
        raise _fail(str(exc)) from None
    for rel in files:
        out.print(f"{'wrote' if root / rel in changed else 'unchanged'}: {rel}")
    for ev in state.evidence:
        for binding, labels in sorted(ev.missing_tests.items()):
            said = describe_missing(labels, ev.commit or "")
            out.print(f"does not count for {cell_property(*binding)}: {ev.id}: {said}")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None


def file_drift(rel: str, current: str | None, text: str, context_lines: int = 20) -> list[str]:
    """Diff summary lines of one generated output against the file on disk ([] when they agree)."""
    if current == text:
        return []
    if current is None:
        return [f"{rel}: missing or unreadable (run: uv run matrix generate)"]
    diff = list(
        difflib.unified_diff(
            current.splitlines(),
            text.splitlines(),
            f"{rel} (committed)",
            f"{rel} (regenerated)",
            lineterm="",
            n=1,
        )
    )
    changed = sum(1 for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---")))
    lines = [f"{rel}: differs ({changed} changed lines)", *("    " + d for d in diff[:context_lines])]
    if len(diff) > context_lines:
        lines.append(f"    ... {len(diff) - context_lines} more diff lines")
    return lines


def drift_by_file(files: dict[str, str], root: Path) -> dict[str, list[str]]:
    """Per generated output, its diff summary lines ([] when the committed file is current)."""
    return {rel: file_drift(rel, _read(root / rel), text) for rel, text in files.items()}


@app.command("check")
def check_cmd(
    repo: RepoOption = None,
    junit_xml: JunitXml = None,
    summary_md: SummaryMd = None,
) -> None:
    """Regenerate in memory and audit the test bindings; exit 1 when the committed outputs differ or a
    cell marker and the inventory disagree."""
    try:
        ci = CiOutputs.resolve(junit_xml, summary_md)
        root = _repo(repo)
        state = _state(root)
        per_file = drift_by_file(generated_files(root, state), root)
    except (MatrixInputError, GitQueryError, CiOutputError) as exc:
        raise _fail(str(exc)) from None
    summary = [line for lines in per_file.values() for line in lines]
    findings = audit(state.inventory, collect_markers(root))
    try:
        for path in ci.emit([check_suite(per_file, findings)]):
            err.print(f"ci: {path}", markup=False)
    except CiOutputError as exc:
        raise _fail(str(exc)) from None
    warning = store_warning(state.evidence)
    if warning:
        err.print(f"warning: {warning}", markup=False)
    if findings:
        err.print("test bindings and matrix/inventory.yaml disagree:")
        for line in findings:
            err.print(f"  {line}", markup=False)
        err.print(
            "fix: mark a real test of the cell with @pytest.mark.cell(algo, task, backend, kind=...) "
            "(and ranks=N for a cell of N ranks)"
        )
    if summary:
        err.print("support matrix is out of date (hand edit, new evidence, or a runtime change):")
        for line in summary:
            err.print(line, markup=False)
        err.print("fix: uv run matrix generate, review, commit")
    if findings or summary:
        raise typer.Exit(1)
    out.print("support matrix is up to date")
    out.print("test bindings agree with the inventory: every marker names a cell, every cell has its tests")


@app.command("prune")
def prune_cmd(
    keep_historical: Annotated[
        int,
        typer.Option(
            "--keep-historical",
            min=0,
            help="historical pieces kept per cell, kind and platform (newest first)",
        ),
    ] = DEFAULT_KEEP,
    repo: RepoOption = None,
) -> None:
    """Remove surplus historical evidence and its index entries, and regenerate the outputs (fresh
    evidence is never removed; git history keeps what is removed)."""
    try:
        root = _repo(repo)
        state, facts = _loaded(root)
        keys = [r.policy.key for r in state.results]
        plan = plan_prune(state.evidence, keys, keep_historical, evidence_age(root, state.evidence))
        if not plan.remove:
            out.print(f"nothing to prune: {historical_count(state.evidence)} historical evidence files kept")
            return
        deleted = apply_prune(
            root,
            state,
            plan,
            _page(root),
            lambda kept: grade_all(state.inventory, kept, facts),
        )
    except (MatrixInputError, GitQueryError) as exc:
        raise _fail(str(exc)) from None
    for rel in deleted:
        out.print(f"removed: {rel}")
    out.print(
        f"pruned {len(plan.remove)} historical evidence files; kept {historical_count(plan.keep)} historical "
        f"and {len(plan.keep) - historical_count(plan.keep)} other; regenerated the matrix"
    )
    out.print(
        "next: commit matrix/evidence/, docs/ and reports/ together (git history keeps the removed files)"
    )


def _policy_lines(result: CellResult, bound: Sequence[CellMarker]) -> list[str]:
    """The Tested and Benchmarked rules of a supported cell, and the tests bound to it."""
    p = result.policy
    assert p.soak is not None
    kinds = f"; bound kinds required: {', '.join(p.test_kinds)}" if p.test_kinds else ""
    lines = [
        f"  Tested needs: lane {p.test_lane!r} JUnit evidence that holds every test bound to the cell at its "
        f"commit, all passed, at least {p.min_passed}, none failed, skipped or xfailed{kinds}",
        f"  Benchmarked needs: {'a passing probe and ' if p.probe_required else ''}a passing soak of at "
        f"least {p.soak.describe()}",
        f"  bound tests in tests/ (read by matrix check): {len(bound)}",
    ]
    lines.extend(f"    - {m.describe()}" for m in bound)
    missing = [k for k in p.test_kinds if k not in {m.kind for m in bound}]
    if missing:
        lines.append(f"    missing: a bound test of kind {', '.join(missing)}")
    return lines


def explain_lines(result: CellResult, bound: Sequence[CellMarker] = ()) -> list[str]:
    """The explanation printed by ``matrix explain`` (``bound``: the markers binding tests to the cell)."""
    p = result.policy
    lines = [f"{p.key.label()}: {result.grade}"]
    if p.unsupported_reason:
        lines.append(f"  declared unsupported (fail-closed): {p.unsupported_reason}")
    else:
        lines.extend(_policy_lines(result, bound))
        rec = p.recommendation
        lines.append(
            f"  recommendation: {f'{rec.decision} ({rec.date}): {rec.rationale}' if rec else 'none'}"
        )
    lines.append(f"  evidence considered: {len(result.evidence)}")
    for v in result.evidence:
        lines.append(
            f"    - {v.id} [{v.kind}, {v.freshness}] {'COUNTS' if v.counts else 'not counted'}: {v.verdict}"
        )
        if v.unrecorded:  # made before these were recorded: a change to them cannot make it historical
            lines.append(f"      unrecorded inputs: {', '.join(v.unrecorded)}")
    for grade, reasons in result.blockers:
        lines.append(f"  not {grade}:")
        lines.extend(f"    - {r}" for r in reasons)
    lines.extend(f"  note: {n}" for n in result.notes)
    return lines


RanksOption = Annotated[
    int,
    typer.Option("--ranks", help="the cell's rank count: 1 (default), or N for a torchrun job of N ranks"),
]


@app.command("explain")
def explain_cmd(
    algo: str, task: str, backend: str, platform: str, ranks: RanksOption = 1, repo: RepoOption = None
) -> None:
    """Print a cell's grade, every piece of evidence considered with its verdict, and each higher grade's blockers."""
    if ranks < 1:
        raise _fail(f"--ranks: {ranks} is not a rank count; give 1 (the default) or N >= 2 ranks")
    try:
        root = _repo(repo)
        state = _state(root)
    except (MatrixInputError, GitQueryError) as exc:
        raise _fail(str(exc)) from None
    key = CellKey(algo, task, backend, platform, ranks)
    match = [r for r in state.results if r.policy.key == key]
    if not match:
        known = sorted(r.policy.key.label() for r in state.results)
        close = difflib.get_close_matches(key.label(), known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; declared cells: {len(known)}"
        raise _fail(f"matrix/inventory.yaml: cells: no cell {key.label()} is declared{hint}")
    for line in explain_lines(match[0], bound_to(collect_markers(root), key)):
        out.print(line, markup=False)


@app.command("affected")
def affected_cmd(
    since: Annotated[
        str | None,
        typer.Option(help="judge the change REV..HEAD (default: the working tree's uncommitted changes)"),
    ] = None,
    repo: RepoOption = None,
) -> None:
    """List the cells whose evidence a change makes historical, by kind, with the input that changed."""
    try:
        root = _repo(repo)
        state = _state(root)
        paths = fingerprint_paths(state.inventory)
        before = commit_state(root, since or "HEAD", paths=paths)
        after = commit_state(root, "HEAD", paths=paths) if since is not None else worktree_state(root, paths)
    except (MatrixInputError, GitQueryError) as exc:
        raise _fail(str(exc)) from None
    found = affected_cells(state.results, state.evidence, before, after)
    change = f"{since}..HEAD" if since is not None else "the uncommitted changes"
    if not found:
        out.print(f"{change}: no cell's evidence goes historical")
        return
    out.print(f"{change} makes the evidence of {len({a.key for a in found})} cell(s) historical:")
    for item in found:
        out.print(f"  {item.key.label()}: {item.kind} ({item.evidence}): {item.cause} changed", markup=False)


@app.command("stale")
def stale_cmd(
    kind: Annotated[str, typer.Option(help="junit | soak | probe")],
    platform: Annotated[
        str, typer.Option(help=f"one of the inventory's platforms ({', '.join(PLATFORMS)} here)")
    ] = "linux-cpu",
    words: Annotated[
        bool, typer.Option(help="print 'algo task backend ranks' per line, for scripts")
    ] = False,
    repo: RepoOption = None,
) -> None:
    """List the supported cells of a platform whose evidence of one kind does not count at HEAD: what an
    incremental collection collects (scripts/matrix/collect_cpu_evidence.sh --only stale)."""
    try:
        state = _state(_repo(repo))
    except (MatrixInputError, GitQueryError) as exc:
        raise _fail(str(exc)) from None
    platforms = state.inventory.platforms
    if kind not in EVIDENCE_KINDS or platform not in platforms:
        raise _fail(
            f"--kind must be one of {', '.join(EVIDENCE_KINDS)}; --platform one of {', '.join(platforms)}"
        )
    for key in stale_cells(state.results, kind, platform):
        out.print(f"{key.algo} {key.task} {key.backend} {key.ranks}" if words else key.label(), markup=False)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
