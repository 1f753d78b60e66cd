"""Support-matrix vocabulary: platforms, grades, cell policies, evidence facts and the input error.

Everything here is plain data (frozen dataclasses); no I/O, no clocks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PLATFORMS: tuple[str, ...] = ("linux-cuda", "linux-cpu", "macos-mps")
# Ascending; a cell shows the highest grade whose requirements (and all lower ones) hold.
GRADES: tuple[str, ...] = ("Unsupported", "Registered", "Configured", "Tested", "Benchmarked", "Recommended")
GRADE_MEANING: dict[str, str] = {
    "Unsupported": "declared fail-closed in the inventory, with the reason",
    "Registered": "the task and the backend exist in the runtime registries",
    "Configured": "the owner YAML composes and validates for this platform",
    "Tested": "fresh test-lane JUnit evidence: every bound test passed (none failed, skipped or xfailed), "
    "at least the inventory's minimum",
    "Benchmarked": "fresh, clean, passing probe and soak artifacts for this cell and platform, the soak at "
    "the cell's budget",
    "Recommended": "Benchmarked, a dated recommendation record, and a soak at the canonical budget",
}
EVIDENCE_KINDS: tuple[str, ...] = ("junit", "soak", "probe")
LANES: tuple[str, ...] = ("cpu", "cuda", "mps")
# What a bound test exercises (``@pytest.mark.cell(..., kind=...)``): a real ``train`` run, a fault injected
# into a real run, a soak monitor over a real run, or the cell's in-process path (compose, env, learner).
TEST_KINDS: tuple[str, ...] = ("train", "fault", "soak", "smoke")
# What every platform offers, stated explicitly: configuration is validated "as if" on it.
PLATFORM_SYSTEM: dict[str, str] = {"linux-cuda": "Linux", "linux-cpu": "Linux", "macos-mps": "Darwin"}


@dataclass(frozen=True)
class InputManifest:
    """Project files (POSIX path -> git blob id) and distributions (name -> version) a piece of evidence
    was made from, and the roles of the processes that recorded them."""

    files: Mapping[str, str]
    distributions: Mapping[str, str]
    roles: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()  # a manifest derived from input roots: a file added under them is a change
    interpreter: str | None = None  # the Python that ran (``3.11.7``); None: not recorded
    # which kinds of input the collector recorded (RECORDED_INPUTS); evidence made before a kind was
    # recorded is said to leave it unrecorded
    recorded: frozenset[str] = frozenset({"files", "distributions"})


#: The kinds of input a manifest can record; one made before a kind existed leaves that kind unrecorded.
RECORDED_INPUTS: tuple[str, ...] = (
    "files",
    "distributions",
    "interpreter",
    "native libraries",
    "plugins named by string",
    "subprocess modules",
    "loaded versions",
)
#: What each evidence kind's manifest should record: a soak's or probe's processes record themselves
#: (a subprocess is one of them, and each records the versions it loaded); a JUnit summary's manifest is
#: read statically from its commit, its distributions at the versions the lane's processes loaded.
EXPECTED_INPUTS: dict[str, tuple[str, ...]] = {
    "soak": RECORDED_INPUTS[:4],
    "probe": RECORDED_INPUTS[:4],
    "junit": (*RECORDED_INPUTS[:3], *RECORDED_INPUTS[4:]),
}


def unrecorded_inputs(kind: str, manifest: InputManifest | None) -> tuple[str, ...]:
    """The kinds of input ``kind`` evidence should record that ``manifest`` does not (all of them when
    there is no manifest)."""
    expected = EXPECTED_INPUTS.get(kind, ())
    recorded = manifest.recorded if manifest is not None else frozenset()
    return tuple(k for k in expected if k not in recorded)


class MatrixInputError(Exception):
    """Bad input: names the file and the field; the CLI prints it and exits 2 having written nothing."""

    def __init__(self, file: str, field: str, message: str) -> None:
        super().__init__(f"{file}: {field}: {message}")
        self.file = file
        self.field = field


# (algo, task, backend, ranks): what ``@pytest.mark.cell(algo, task, backend, ranks=N)`` names.
Binding = tuple[str, str, str, int]
# How a JUnit XML carries them (``-p soakbench.matrix.pytest_cell`` writes it, ``matrix ingest`` reads it): a testcase
# property ``cell`` per bound cell, and the run facts as suite properties ``matrix.*``.
CELL_PROPERTY = "cell"
SUITE_PREFIX = "matrix."
RANKS_PREFIX = "ranks="


def cell_property(algo: str, task: str, backend: str, ranks: int = 1) -> str:
    """The ``cell`` property value: ``algo/task/backend``, and ``/ranks=N`` appended for N > 1."""
    return f"{algo}/{task}/{backend}" + (f"/{RANKS_PREFIX}{ranks}" if ranks > 1 else "")


def under_roots(path: str, roots: Sequence[str]) -> bool:
    """True when ``path`` is one of ``roots`` or lies in a folder root (``lib/`` or ``lib``)."""
    return any(path == r.rstrip("/") or path.startswith(r.rstrip("/") + "/") for r in roots)


def ranks_suffix(ranks: int) -> str:
    """`` (N ranks)`` for a job of several ranks, empty for one (single-rank labels stay as they were)."""
    return f" ({ranks} ranks)" if ranks > 1 else ""


def cell_label(algo: str, task: str, backend: str, platform: str, ranks: int = 1) -> str:
    """The one label form of a cell: ``sac/g1_walk_flat/mujoco@linux-cpu (2 ranks)``."""
    return f"{algo}/{task}/{backend}@{platform}{ranks_suffix(ranks)}"


def marker_text(binding: Binding) -> str:
    """``cell(algo, task, backend)``, with ``, ranks=N`` for a job of several ranks."""
    algo, task, backend, ranks = binding
    return f"cell({algo}, {task}, {backend}{f', ranks={ranks}' if ranks > 1 else ''})"


@dataclass(frozen=True, order=True)
class CellKey:
    """One matrix cell: entrypoint (algo) x task x backend x platform x ranks (the trainer's processes:
    1, or a torchrun job of that many ranks on one host)."""

    algo: str
    task: str
    backend: str
    platform: str
    ranks: int = 1

    def label(self) -> str:
        """``algo/task/backend@platform``, with `` (N ranks)`` appended for a job of several ranks."""
        return cell_label(self.algo, self.task, self.backend, self.platform, self.ranks)

    def binding(self) -> Binding:
        """What a test marker binds to: ``(algo, task, backend, ranks)`` (any platform)."""
        return self.algo, self.task, self.backend, self.ranks

    def marker(self) -> str:
        """How a test names this cell in messages: ``cell(sac, g1_walk_flat, mujoco, ranks=2)``."""
        return marker_text(self.binding())


@dataclass(frozen=True)
class SoakBudget:
    """Minimum soak a cell needs: wall duration (s), vector envs, collector iterations. A project's own
    inventory may leave envs and iterations out (None: not required; its trainer may have neither)."""

    min_duration_s: float
    num_envs: int | None
    iterations: int | None
    must_survive_s: float | None = None  # a soak must vouch for this run length (``--must-survive``)

    def shortfalls(self, duration_s: float | None, num_envs: int | None, iterations: int | None) -> list[str]:
        """Human-readable reasons a measured soak is under this budget (empty when it meets it)."""
        out: list[str] = []
        if duration_s is None or duration_s < self.min_duration_s:
            out.append(f"duration {duration_s} s < {self.min_duration_s} s")
        if self.num_envs is not None and (num_envs is None or num_envs < self.num_envs):
            out.append(f"num_envs {num_envs} < {self.num_envs}")
        if self.iterations is not None and (iterations is None or iterations < self.iterations):
            out.append(f"iterations {iterations} < {self.iterations}")
        return out

    def parts(self) -> list[str]:
        """``["600 s", "64 envs", "5000 iterations"]`` (a part not required is left out)."""
        parts = [f"{self.min_duration_s} s"]
        parts += [f"{self.num_envs} envs"] if self.num_envs is not None else []
        parts += [f"{self.iterations} iterations"] if self.iterations is not None else []
        if self.must_survive_s is not None:
            parts.append(f"survives {self.must_survive_s / 3600.0:g} h")
        return parts

    def describe(self) -> str:
        """``600 s, 64 envs and 5000 iterations`` (a part not required is left out)."""
        parts = self.parts()
        return ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]


@dataclass(frozen=True)
class Recommendation:
    """An explicit, dated repository decision to recommend a cell."""

    decision: str  # "recommend" promotes; "withhold" records a decision not to
    date: str  # ISO date, YYYY-MM-DD
    rationale: str


@dataclass(frozen=True)
class CellPolicy:
    """What one inventory cell requires. ``unsupported_reason`` set means declared fail-closed."""

    key: CellKey
    unsupported_reason: str | None = None
    test_lane: str | None = None
    min_passed: int = 1  # bound tests that must pass in the lane; every bound test must pass
    test_kinds: tuple[str, ...] = ()  # each needs at least one bound test of that kind (see TEST_KINDS)
    probe_required: bool = True
    soak: SoakBudget | None = None
    recommendation: Recommendation | None = None
    # A project's own inventory: the files and folders that are this cell's own code (its input roots).
    inputs: tuple[str, ...] = ()
    # A project's own inventory: the host system of the cell's platform (its soak sampler follows it).
    system: str | None = None


@dataclass(frozen=True)
class Project:
    """What a project's own inventory declares about itself (None for this runtime's inventory): its
    name, the input roots of every cell (files and folders whose change stales all its evidence), its
    platforms in column order, the names each axis may take, its test lanes, and per platform the host
    system its evidence must record."""

    name: str
    inputs: tuple[str, ...]
    platforms: tuple[str, ...]
    names: Mapping[str, frozenset[str]]
    lanes: tuple[str, ...] = LANES
    systems: Mapping[str, str] = field(default_factory=lambda: dict(PLATFORM_SYSTEM))


@dataclass(frozen=True)
class Inventory:
    """The validated inventory: canonical soak budget and the cells, sorted by platform then name;
    ``project`` set when it is a project's own inventory (matrix.declared.project)."""

    schema_version: int
    canonical_soak: SoakBudget
    cells: tuple[CellPolicy, ...]
    project: Project | None = None

    @property
    def platforms(self) -> tuple[str, ...]:
        """The platforms its cells may name, in column order."""
        return self.project.platforms if self.project is not None else PLATFORMS

    @property
    def lanes(self) -> tuple[str, ...]:
        """The test lanes its cells may name."""
        return self.project.lanes if self.project is not None else LANES

    @property
    def systems(self) -> Mapping[str, str]:
        """Per platform, the host system its evidence must record."""
        return self.project.systems if self.project is not None else PLATFORM_SYSTEM

    def roots_of(self, key: CellKey) -> tuple[str, ...]:
        """A project's input roots of ``key`` (its own and the project's); () for this runtime's cells."""
        if self.project is None:
            return ()
        own = next((c.inputs for c in self.cells if c.key == key), ())
        return tuple(sorted({*self.project.inputs, *own}))


@dataclass(frozen=True)
class BoundTally:
    """Outcomes of the tests bound to one (algo, task, backend, ranks) in one JUnit summary."""

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0


@dataclass(frozen=True)
class SoakSurvival:
    """What a soak's survival verdict vouches for (its artifact's ``survival``, re-derived from its
    samples at ingest and generate): the target it was judged against (s, None: none), the verdict, and
    the shortest lower bound on the time to exhaustion over its classes (h, None: none runs out)."""

    target_s: float | None
    verdict: str
    horizon_hours: float | None

    @classmethod
    def of(cls, section: Any) -> SoakSurvival | None:
        """The survival a soak artifact records (its ``survival`` section, 0.4.0), or None without one."""
        if not isinstance(section, Mapping) or not isinstance(section.get("verdict"), str):
            return None
        target, horizon = section.get("target_seconds"), section.get("horizon_hours")
        return cls(
            target_s=float(target) if isinstance(target, int | float) else None,
            verdict=str(section["verdict"]),
            horizon_hours=float(horizon) if isinstance(horizon, int | float) else None,
        )

    def text(self) -> str:
        """``survives 8 h (horizon >= 31 h on its host)``, or what it said instead."""
        target = "" if self.target_s is None else f" {self.target_s / 3600.0:g} h"
        horizon = (
            "" if self.horizon_hours is None else f" (horizon >= {self.horizon_hours:.3g} h on its host)"
        )
        return f"{self.verdict}{target}{horizon}"


@dataclass(frozen=True)
class EvidenceFacts:
    """One filed piece of evidence, normalized from its file at generation time.

    ``problems`` are reasons it can never count (schema-invalid, tampered, platform contradiction);
    ``fresh``: every input its manifest recorded is unchanged at HEAD (a JUnit summary: for some bound
    cell), or, without a manifest, the runtime fingerprint at ``commit`` is HEAD's. ``ranks`` is the rank count
    a soak ran with; None covers every rank count (a probe measures physics in isolation; a JUnit
    summary binds each test to its own rank count in ``tests``).
    """

    id: str
    kind: str  # junit | soak | probe
    file: str  # repo-relative POSIX path
    platform: str
    lane: str | None
    commit: str | None
    dirty: bool | None
    passed: bool
    status_detail: str
    fresh: bool = False
    fingerprint: str | None = None
    problems: tuple[str, ...] = ()
    # (algo or None for "any algo", task, backend) this evidence speaks about.
    covers: tuple[tuple[str | None, str, str], ...] = ()
    ranks: int | None = 1
    tests: dict[Binding, BoundTally] = field(default_factory=dict)
    duration_s: float | None = None
    num_envs: int | None = None
    iterations: int | None = None
    time: str | None = None  # as carried by the evidence itself
    sampler: str = (
        "linux"  # a soak's process sampler (matrix.grading.soak_sampler); Linux before samplers existed
    )
    unchecked: tuple[str, ...] = ()  # criteria that sampler declared it could not check
    survival: SoakSurvival | None = None  # a soak's survival verdict (a 0.3.0 artifact has none)
    # What produced it (matrix.freshness): a soak's or probe's manifest; a JUnit summary's, per bound cell.
    inputs: InputManifest | None = None
    cell_inputs: Mapping[Binding, InputManifest] = field(default_factory=dict)
    inputs_note: str | None = None  # why no manifest is used (then the runtime fingerprint judges it)
    # Why it is historical: for the whole evidence (key None) or, for a JUnit summary, per bound cell.
    stale: Mapping[Binding | None, str] = field(default_factory=dict)
    # A JUnit summary's test ids per bound cell, and, against the tests its commit's sources bind to each
    # cell (matrix.grading.bound_tests): those it lacks, and the kinds of those bound tests.
    test_ids: Mapping[Binding, tuple[str, ...]] = field(default_factory=dict)
    missing_tests: Mapping[Binding, tuple[str, ...]] = field(default_factory=dict)
    bound_kinds: Mapping[Binding, frozenset[str]] = field(default_factory=dict)

    def stale_reason(self, key: CellKey) -> str | None:
        """Why this evidence is historical for ``key``, None when it is fresh for it."""
        if self.kind == "junit" and key.binding() in self.stale:
            return self.stale[key.binding()]
        if self.kind == "junit" and key.binding() in self.cell_inputs:
            return None
        return None if self.fresh else self.stale.get(None, "runtime fingerprint differs from HEAD's")

    def covers_cell(self, key: CellKey) -> bool:
        """True when this evidence is about key's algo/task/backend and rank count (any platform)."""
        if self.kind == "junit":
            return key.binding() in self.tests
        if self.ranks is not None and self.ranks != key.ranks:
            return False
        return any(
            (algo is None or algo == key.algo) and task == key.task and backend == key.backend
            for algo, task, backend in self.covers
        )


@dataclass(frozen=True)
class EvidenceVerdict:
    """How one piece of evidence was judged for one cell."""

    id: str
    kind: str
    file: str
    freshness: str  # fresh | historical | invalid
    counts: bool
    verdict: str
    # kinds of input its manifest does not record (RECORDED_INPUTS): a change to them cannot stale it
    unrecorded: tuple[str, ...] = ()


@dataclass(frozen=True)
class CellResult:
    """The graded cell."""

    policy: CellPolicy
    grade: str
    blockers: tuple[tuple[str, tuple[str, ...]], ...]  # (grade above the reached one, reasons)
    evidence: tuple[EvidenceVerdict, ...]
    notes: tuple[str, ...] = ()
