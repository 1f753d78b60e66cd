"""The packages a GPU host lacks, at the pins and hashes of uv's export of the lock.

``uv export --format requirements-txt`` writes every locked package the project needs, with its
environment marker and the sha256 of each of its files. Pruning (``--prune``) what the host already has
drops those packages and whatever only they need; the markers are then evaluated here for the target
interpreter, because pip evaluates a requirement file's markers for the interpreter it runs on, not for
``--python-version``. Pure: export text in, plan out (the uv call itself is :func:`export_argv`).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bundle.files import BundleError, normalize
from bundle.target import Target, marker_holds

_PIN = re.compile(
    r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)\s*(?:;\s*(?P<marker>[^\\]*?))?\s*$"
)
_HASH = re.compile(r"--hash=sha256:(?P<hex>[0-9a-f]{64})")
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass(frozen=True)
class Pin:
    """One package of the export: its pinned version, its marker (None: always) and its files' sha256s."""

    name: str
    version: str
    marker: str | None
    sha256s: tuple[str, ...]


@dataclass(frozen=True)
class PlanEntry:
    """One package to download for the target, with the sha256s any of its files may have."""

    name: str
    version: str
    sha256s: tuple[str, ...]

    def tsv(self) -> str:
        return f"{self.name}\t{self.version}\t{','.join(self.sha256s)}"

    def requirement(self) -> str:
        """The line pip downloads it by: no marker (it was evaluated for the target), every hash."""
        return " ".join([f"{self.name}=={self.version}", *(f"--hash=sha256:{h}" for h in self.sha256s)])


def export_argv(
    uv: str, project: Path, extras: Sequence[str], prune: Iterable[str], hashes: bool = True
) -> list[str]:
    """The ``uv export`` command: the locked packages of the project, its extras and its dev group."""
    argv = [uv, "export", "--frozen", "--project", str(project), "--format", "requirements-txt"]
    argv += ["--no-emit-project", "--no-header", "--no-annotate", *([] if hashes else ["--no-hashes"])]
    for extra in extras:
        argv += ["--extra", extra]
    for name in sorted(set(prune)):
        argv += ["--prune", name]
    return argv


def _logical_lines(text: str) -> list[str]:
    """Backslash continuations joined; blank and comment lines dropped."""
    joined = re.sub(r"\\\r?\n", " ", text)
    return [
        line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


def parse_export(text: str) -> list[Pin]:
    """The pins of a requirements-txt export; anything that is not ``name==version`` is refused."""
    pins = []
    for line in _logical_lines(text):
        head = _HASH.sub("", line).strip()
        match = _PIN.fullmatch(head)
        if match is None:
            raise BundleError(f"uv export: not a pinned package: {line[:200]!r}")
        marker = (match.group("marker") or "").strip() or None
        hashes = tuple(m.group("hex") for m in _HASH.finditer(line))
        pins.append(Pin(normalize(match.group("name")), match.group("version"), marker, hashes))
    return pins


def dev_members(pyproject: Path, group: str = "dev") -> list[str]:
    """The names the project's dependency group lists directly (pyproject.toml, PEP 735)."""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BundleError(f"{pyproject}: cannot read it ({exc})") from None
    entries = data.get("dependency-groups", {}).get(group)
    if not isinstance(entries, list):
        raise BundleError(f"{pyproject}: no [dependency-groups] {group} list")
    names = []
    for entry in entries:
        match = _NAME.match(entry) if isinstance(entry, str) else None
        if match is None:
            raise BundleError(f"{pyproject}: [dependency-groups] {group}: not a requirement: {entry!r}")
        names.append(normalize(match.group(1)))
    return names


def unknown_names(names: Iterable[str], pins: Iterable[Pin], option: str) -> list[str]:
    """Each name that no pin has, as ``--option NAME`` (a typo must fail, not bundle too much)."""
    known = {p.name for p in pins}
    return [f"{option} {n}: not among the lock's packages" for n in names if normalize(n) not in known]


def plan(pins: Sequence[Pin], target: Target) -> list[PlanEntry]:
    """The pins whose marker holds on the target, each with its hashes, by name."""
    env = target.marker_env()
    entries: dict[str, PlanEntry] = {}
    for pin in pins:
        if pin.marker is not None and not marker_holds(pin.marker, env):
            continue
        if not pin.sha256s:
            raise BundleError(
                f"uv export: {pin.name} {pin.version} has no --hash (the export must carry them)"
            )
        if pin.name in entries:
            raise BundleError(f"uv export: {pin.name} is pinned twice for {target.cp_tag}")
        entries[pin.name] = PlanEntry(pin.name, pin.version, pin.sha256s)
    return [entries[name] for name in sorted(entries)]


def read_plan(path: Path) -> list[PlanEntry]:
    entries: list[PlanEntry] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 3 or not all(fields):
            raise BundleError(f"{path}:{number}: not a plan line: {line!r}")
        entries.append(PlanEntry(fields[0], fields[1], tuple(fields[2].split(","))))
    return entries
