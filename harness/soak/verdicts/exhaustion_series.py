"""The series a survival verdict projects, each beside the limit that would end the run (pure).

Reads monitor samples (docs/soak-reference.md, "What one sample holds") and the limits the monitor
recorded (``limits`` of the artifact, harness.soak.host.limits); no I/O. Each ``ExhaustionSeries`` is
one resource of the tree or of one process, the samples of the analysed window and the room it had
left at the end (``headroom``: limit − what the limit's whole domain used):

==================  ======================  =====  ==========================================  =======
class               level                   unit   limit (``limits`` resource)                 scope
==================  ======================  =====  ==========================================  =======
``pss``, ``uss``    ``totals``              bytes  ``memory``: cgroup memory.max or MemTotal   tree
``process_count``,  ``totals``              count  ``tasks``: pids.max, RLIMIT_NPROC,          tree
``threads``,                                       threads-max (the tightest)
``zombies``
``gpu_memory``      ``totals``              bytes  ``gpu_memory``: the devices' NVML totals    tree
``shm_bytes``       ``shm.run_bytes``       bytes  the ``/dev/shm`` filesystem (its free
                                                   space in the sample)                        tree
``disk``            ``disk[i].bytes``       bytes  the path's filesystem (free space in the
                                                   sample)                                     tree
``fds``             a process's fd total    count  that process's soft RLIMIT_NOFILE            process
``map_count``       a process's mappings    count  ``map_count``: vm.max_map_count              process
==================  ======================  =====  ==========================================  =======

A limit read once at the start is shared with everything else on the host: the headroom of a tree
class is ``limit − in_use − (level_end − level_first)``, where ``in_use`` is what the limit's domain
(the cgroup, the host, the user) used when the limit was read and the difference is what the tree grew
since. The level at the end is the peak of the window's last tenth: exhaustion comes at a peak.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from soakbench.foundation.limits import Limit
from soakbench.harness.soak.verdicts.attribution import child_growth, detail_growth, disk_growth, shm_growth

Unit = Literal["bytes", "count"]

#: tree class -> (``totals`` field, unit, ``limits`` resource)
TREE_CLASSES: dict[str, tuple[str, Unit, str]] = {
    "pss": ("pss_bytes", "bytes", "memory"),
    "uss": ("uss_bytes", "bytes", "memory"),
    "process_count": ("process_count", "count", "tasks"),
    "threads": ("threads", "count", "tasks"),
    "zombies": ("zombies", "count", "tasks"),
    "gpu_memory": ("gpu_memory_bytes", "bytes", "gpu_memory"),
}
#: the share of the window at its end whose peak is the level a limit is measured from
END_FRACTION = 0.1
#: a process is projected on its own when the window holds at least this many of its samples
MIN_PROCESS_SAMPLES = 8


def known_limits(section: Mapping[str, Any] | None) -> tuple[Limit, ...]:
    """The limits of an artifact's ``limits`` section (``{read_at_wall, limits: [...]}``); none without."""
    if not isinstance(section, Mapping):
        return ()
    return tuple(Limit.from_json(item) for item in section.get("limits") or () if isinstance(item, Mapping))


@dataclass(frozen=True)
class Room:
    """What stood between a series and its limit at the end of the window."""

    limit: float | None
    source: str
    headroom: float | None


@dataclass(frozen=True, eq=False, kw_only=True)
class ExhaustionSeries:
    """One projected resource: its window samples ``t`` [n] (seconds) and ``x`` [n], its level at the end,
    and its room. ``scope`` is ``tree`` or the process's pid; ``role`` the process's role. ``read`` [n]
    marks the samples whose level was read afresh (a level read on a cost schedule, PSS or a disk walk,
    is carried between reads); None: every sample read it."""

    resource_class: str
    scope: str
    role: str | None
    unit: Unit
    t: np.ndarray
    x: np.ndarray
    level: float
    room: Room
    attribution: tuple[str, ...] = ()
    read: np.ndarray | None = None


#: tree classes whose total is summed from values read on the rollup schedule (``rollup_age_samples``)
ROLLUP_TREE_CLASSES = frozenset({"pss", "uss"})


def _age(value: Any) -> int:
    """A carried value's age in samples (0: read for this sample; a sample without one was read)."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


#: a sample observes a tree sum afresh when members holding at least this share of it were read since
#: the sum's last fresh observation
FRESH_SHARE = 0.5


def tree_reads(samples: Sequence[Mapping[str, Any]], key: str) -> np.ndarray:
    """Which of consecutive ``samples`` observe the tree's sum of ``key`` afresh: those by which the
    members holding most (``FRESH_SHARE``) of the sum were read since its last fresh observation (the
    first sample always). A sum whose large members are carried repeats their old values, however many
    small ones were read (a trainer of GiBs is read every tens of samples, its small helpers at every
    one); and large members read at different samples (the ranks of a job, each read every 30 s on the
    cost schedule) renew the sum together, though no one sample reads half of it."""
    marks = np.zeros(len(samples), dtype=bool)
    last = -1
    for index, sample in enumerate(samples):
        members = [
            (_numeric(proc.get(key)) or 0.0, index - _age(proc.get("rollup_age_samples")))
            for proc in sample.get("processes") or ()
        ]
        total = sum(value for value, _ in members)
        renewed = sum(value for value, read_at in members if read_at > last)
        if last < 0 or total <= 0 or renewed >= FRESH_SHARE * total:
            marks[index], last = True, index
    return marks


def end_level(x: np.ndarray) -> float:
    """The peak of the last ``END_FRACTION`` of ``x`` (at least its last value)."""
    tail = max(1, int(np.ceil(END_FRACTION * x.size)))
    return float(x[-tail:].max())


def _room_from_limits(
    limits: Sequence[Limit], *, first_level: float, level: float, domain_level: float | None = None
) -> Room:
    """The tightest room among ``limits`` (one resource) for a tree series whose level was
    ``first_level`` when the limits were read (the run's first sample) and is ``level`` at the end.
    ``domain_level``: the use of the limit's whole domain at the end, sampled from its usage file (a
    cgroup's working set or task count, every process in it counted): it replaces the use at the start
    plus the tree's growth for the limit that names that file."""
    observable = [lim for lim in limits if lim.value is not None]
    if not observable:
        reasons = "; ".join(f"{lim.source or lim.resource}: {lim.reason}" for lim in limits)
        return Room(limit=None, source=f"not_observable: {reasons or 'no limit recorded'}", headroom=None)
    grown = level - first_level
    rooms = []
    for lim in observable:
        used = float(lim.in_use) + grown if lim.in_use is not None else level
        if lim.usage_file is not None and domain_level is not None:
            used = domain_level
        rooms.append(
            Room(limit=float(lim.value or 0), source=lim.source, headroom=float(lim.value or 0) - used)
        )
    return min(rooms, key=lambda room: room.headroom if room.headroom is not None else float("inf"))


def _window(samples: Sequence[Mapping[str, Any]], t_start: float, t_end: float) -> list[Mapping[str, Any]]:
    return [s for s in samples if t_start <= float(s["t"]) <= t_end]


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _arrays(points: Sequence[tuple[float, float | None]]) -> tuple[np.ndarray, np.ndarray]:
    kept = [(t, v) for t, v in points if v is not None]
    return np.asarray([t for t, _ in kept], dtype=np.float64), np.asarray(
        [v for _, v in kept], dtype=np.float64
    )


def tree_series(
    window: Sequence[Mapping[str, Any]],
    limits: Sequence[Limit],
    *,
    first: Mapping[str, Any],
    history: Sequence[Mapping[str, Any]] = (),
) -> Iterator[ExhaustionSeries]:
    """The tree classes of ``TREE_CLASSES`` that the window's totals carry (``first``: the run's first
    sample, taken when the limits were read; ``history``: the samples up to the window's end, whose
    sparse detail records name the threads that grew)."""
    for name, (key, unit, resource) in TREE_CLASSES.items():
        t, x = _arrays([(float(s["t"]), _numeric((s.get("totals") or {}).get(key))) for s in window])
        if x.size == 0:
            continue
        level = end_level(x)
        first_level = _numeric((first.get("totals") or {}).get(key))
        matching = [lim for lim in limits if lim.resource == resource]
        room = _room_from_limits(
            matching,
            first_level=x[0] if first_level is None else first_level,
            level=level,
            domain_level=_domain_level(window, resource),
        )
        if resource == "gpu_memory" and room.limit is not None:
            room = _gpu_room(window[-1], room)
        grew = _tree_attribution(name, window, history or window)
        read = _read_mask(window, key=key) if name in ROLLUP_TREE_CLASSES else None
        yield ExhaustionSeries(
            resource_class=name,
            scope="tree",
            role=None,
            unit=unit,
            t=t,
            x=x,
            level=level,
            room=room,
            attribution=grew,
            read=read,
        )


def _read_mask(samples: Sequence[Mapping[str, Any]], *, key: str) -> np.ndarray:
    """``tree_reads`` over the samples whose ``totals[key]`` is a number (those ``_arrays`` keeps, in
    order)."""
    return tree_reads([s for s in samples if _numeric((s.get("totals") or {}).get(key)) is not None], key)


def _domain_level(window: Sequence[Mapping[str, Any]], resource: str) -> float | None:
    """The end level (``end_level``) of the window's sampled domain use of ``resource``, or None."""
    _, x = _arrays([(float(s["t"]), _numeric((s.get("domains") or {}).get(resource))) for s in window])
    return end_level(x) if x.size else None


def _tree_attribution(
    name: str, window: Sequence[Mapping[str, Any]], history: Sequence[Mapping[str, Any]]
) -> tuple[str, ...]:
    """What grew in a tree class: the zombies' parents, new child processes, threads by name."""
    if name == "zombies":
        return _zombie_parents(window[-1])
    if name == "process_count":
        return child_growth(window)
    if name == "threads":
        return detail_growth(history, "threads")
    return ()


def _zombie_parents(last: Mapping[str, Any]) -> tuple[str, ...]:
    """The defunct processes of the last sample grouped by the parent that does not reap them, most
    first: ``parent pid 4242: 37 defunct (python)``."""
    by_parent: dict[int, list[str]] = {}
    for zombie in last.get("zombies") or ():
        if isinstance(zombie, Mapping) and isinstance(zombie.get("ppid"), int):
            by_parent.setdefault(int(zombie["ppid"]), []).append(str(zombie.get("name") or "?"))
    ranked = sorted(by_parent.items(), key=lambda item: -len(item[1]))
    return tuple(
        f"parent pid {ppid}: {len(names)} defunct ({', '.join(sorted(set(names))[:3])})"
        for ppid, names in ranked
    )


def _gpu_room(last: Mapping[str, Any], room: Room) -> Room:
    """GPU memory's room from the devices' use in the last sample (NVML counts every process on them)."""
    devices = (last.get("gpu") or {}).get("devices") or []
    used = [_numeric(d.get("used_bytes")) for d in devices if isinstance(d, Mapping)]
    if not used or any(u is None for u in used) or room.limit is None:
        return room
    return Room(limit=room.limit, source=room.source, headroom=room.limit - sum(u or 0.0 for u in used))


def filesystem_series(window: Sequence[Mapping[str, Any]]) -> Iterator[ExhaustionSeries]:
    """``/dev/shm`` bytes of the run's segments and the bytes under each watched path, each against the
    free space its filesystem had in the last sample."""
    last = window[-1]
    shm = last.get("shm")
    if isinstance(shm, Mapping):
        t, x = _arrays([(float(s["t"]), _numeric((s.get("shm") or {}).get("run_bytes"))) for s in window])
        size, used = _numeric(shm.get("fs_size_bytes")), _numeric(shm.get("fs_used_bytes"))
        if x.size and size is not None and used is not None:
            room = Room(
                limit=size, source="statvfs of /dev/shm (free space in the last sample)", headroom=size - used
            )
            grew = shm_growth(window) or tuple(sorted((shm.get("segments") or {}).keys()))
            yield ExhaustionSeries(
                resource_class="shm_bytes",
                scope="tree",
                role=None,
                unit="bytes",
                t=t,
                x=x,
                level=end_level(x),
                room=room,
                attribution=grew,
            )
    for index, entry in enumerate(last.get("disk") or ()):
        path = str(entry.get("path"))
        walked = [(float(s["t"]), e) for s in window if (e := _disk_entry(s, index, path)) is not None]
        t, x = _arrays([(t, _numeric(e.get("bytes"))) for t, e in walked])
        read = np.asarray(
            [_age(e.get("age_samples")) == 0 for _, e in walked if _numeric(e.get("bytes")) is not None],
            dtype=bool,
        )
        size, free = _numeric(entry.get("fs_size_bytes")), _numeric(entry.get("fs_free_bytes"))
        if x.size and size is not None and free is not None:
            room = Room(
                limit=size, source=f"statvfs of {path} (free space in the last sample)", headroom=free
            )
            grew = disk_growth(window, path)
            yield ExhaustionSeries(
                resource_class=f"disk:{path}",
                scope="tree",
                role=None,
                unit="bytes",
                t=t,
                x=x,
                level=end_level(x),
                room=room,
                attribution=grew,
                read=read,
            )


def _disk_entry(sample: Mapping[str, Any], index: int, path: str) -> Mapping[str, Any] | None:
    """The sample's record of the watched ``path`` (at ``index``, as in the last sample), or None."""
    entries = sample.get("disk") or ()
    entry = entries[index] if index < len(entries) else None
    return entry if isinstance(entry, Mapping) and entry.get("path") == path else None


def process_series(
    window: Sequence[Mapping[str, Any]],
    limits: Sequence[Limit],
    history: Sequence[Mapping[str, Any]] = (),
) -> Iterator[ExhaustionSeries]:
    """Each long-lived process's fds (against its own soft RLIMIT_NOFILE) and mappings (against
    vm.max_map_count); ``history``: the samples up to the window's end (their sparse detail records
    name the fd families that grew)."""
    by_identity: dict[tuple[int, int], list[tuple[float, Mapping[str, Any]]]] = {}
    for sample in window:
        for proc in sample.get("processes") or ():
            by_identity.setdefault((int(proc["pid"]), int(proc["start_ticks"])), []).append(
                (float(sample["t"]), proc)
            )
    map_limits = [lim for lim in limits if lim.resource == "map_count" and lim.value is not None]
    for (pid, _), points in sorted(by_identity.items()):
        if len(points) < MIN_PROCESS_SAMPLES:
            continue
        last = points[-1][1]
        role = last.get("role")
        t, x = _arrays([(t, _numeric((p.get("fds") or {}).get("total"))) for t, p in points])
        fd_limit = _numeric(last.get("fd_limit"))
        if x.size:
            level = end_level(x)
            room = (
                Room(limit=fd_limit, source=f"soft RLIMIT_NOFILE of pid {pid}", headroom=fd_limit - level)
                if fd_limit is not None
                else Room(
                    limit=None, source="not_observable: the process's fd limit was not read", headroom=None
                )
            )
            grew = detail_growth(history or window, "fds", pid=str(pid))
            yield ExhaustionSeries(
                resource_class="fds",
                scope=str(pid),
                role=role,
                unit="count",
                t=t,
                x=x,
                level=level,
                room=room,
                attribution=grew + _command(last),
            )
        mapped = [(t, p) for t, p in points if _numeric(p.get("map_count")) is not None]
        t, x = _arrays([(t, _numeric(p.get("map_count"))) for t, p in mapped])
        if x.size and map_limits:
            level, limit = end_level(x), float(map_limits[0].value or 0)
            room = Room(limit=limit, source=map_limits[0].source, headroom=limit - level)
            read = np.asarray([_age(p.get("rollup_age_samples")) == 0 for _, p in mapped], dtype=bool)
            yield ExhaustionSeries(
                resource_class="map_count",
                scope=str(pid),
                role=role,
                unit="count",
                t=t,
                x=x,
                level=level,
                room=room,
                attribution=_command(last),
                read=read,
            )


def _command(proc: Mapping[str, Any]) -> tuple[str, ...]:
    cmdline = proc.get("cmdline") or [proc.get("name") or "?"]
    return ("process: " + " ".join(str(part) for part in cmdline)[:200],)


def exhaustion_series(
    samples: Sequence[Mapping[str, Any]], limits: Sequence[Limit], *, t_start: float, t_end: float
) -> list[ExhaustionSeries]:
    """Every projected series of the window ``[t_start, t_end]`` (seconds on the samples' clock)."""
    window = _window(samples, t_start, t_end)
    if not window:
        return []
    history = [s for s in samples if float(s["t"]) <= t_end]  # attribution: the sparse detail records too
    return [
        *tree_series(window, limits, first=samples[0], history=history),
        *filesystem_series(window),
        *process_series(window, limits, history),
    ]
