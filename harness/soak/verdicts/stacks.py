"""Pure pieces of the stacks captured before a kill: py-spy's JSON dump to threads and frames, why a dump
failed, which frames are project code, and the report's view of a capture.

A frame is project code when its file lies under one of the capture's project roots (the monitored
command's working directory and the directory of each ``.py`` file named on its command line; the
artifact lists them as ``forensics.project_roots``), and not inside an installed package
(``site-packages``/``dist-packages``) or an interpreter prefix (``excluded``), so a virtual environment
inside the project is not mistaken for project code.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

FailureKind = Literal["ptrace_denied", "not_python", "process_gone", "timeout", "tool_error"]

#: substrings of py-spy's stderr, in order: the first match names the failure.
_FAILURE_MARKERS: tuple[tuple[str, FailureKind], ...] = (
    ("permission denied", "ptrace_denied"),
    ("operation not permitted", "ptrace_denied"),
    ("os error 1)", "ptrace_denied"),
    ("failed to find python version", "not_python"),
    ("check that the process is running", "process_gone"),
    ("no such process", "process_gone"),
)


def failure_kind(stderr: str) -> FailureKind:
    """What a failed ``py-spy dump`` ran into, from its stderr."""
    text = stderr.lower()
    for marker, kind in _FAILURE_MARKERS:
        if marker in text:
            return kind
    return "tool_error"


def error_line(stderr: str, limit: int = 300) -> str:
    """py-spy's own error sentence (its ``Error:`` line, else the first line), cut to ``limit``."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    chosen = next((line for line in lines if line.startswith("Error:")), lines[0] if lines else "")
    return chosen if len(chosen) <= limit else chosen[: limit - 3] + "..."


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def is_project_file(filename: str, roots: Sequence[str], excluded: Sequence[str]) -> bool:
    """True when ``filename`` is project code (module docstring rule)."""
    if not filename.startswith("/"):
        return False
    path = os.path.normpath(filename)
    if {"site-packages", "dist-packages"} & set(path.split("/")):
        return False
    if any(_under(path, e) for e in excluded):
        return False
    return any(_under(path, r) for r in roots)


def _frame(raw: Mapping[str, Any], roots: Sequence[str], excluded: Sequence[str]) -> dict[str, Any]:
    filename = str(raw.get("filename") or "")
    native = raw.get("module") is not None  # py-spy names the shared object of a native frame
    line = raw.get("line")
    return {
        "function": str(raw.get("name") or "?"),
        "file": filename,
        "line": line if isinstance(line, int) and line > 0 else None,
        "native": native,
        "project": not native and is_project_file(filename, roots, excluded),
    }


def parse_dump(text: str, roots: Sequence[str], excluded: Sequence[str]) -> list[dict[str, Any]]:
    """Threads of one ``py-spy dump --json`` (innermost frame first). Raises ValueError on output that is
    not py-spy's JSON list of threads."""
    data = json.loads(text)
    if not isinstance(data, list) or not all(isinstance(t, Mapping) for t in data):
        raise ValueError("py-spy output is not a JSON list of threads")
    threads = []
    for raw in data:
        frames = raw.get("frames")
        if not isinstance(frames, list):
            raise ValueError("py-spy thread without a frames list")
        threads.append(
            {
                "tid": raw.get("os_thread_id") if isinstance(raw.get("os_thread_id"), int) else None,
                "name": raw.get("thread_name") if isinstance(raw.get("thread_name"), str) else None,
                "active": bool(raw.get("active")),
                "owns_gil": bool(raw.get("owns_gil")),
                "frames": [_frame(f, roots, excluded) for f in frames if isinstance(f, Mapping)],
            }
        )
    return threads


def first_project_frame(frames: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the innermost project frame of a thread, or None."""
    return next((i for i, f in enumerate(frames) if f.get("project")), None)


def capture_views(forensics: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The report's view of ``forensics.captures``: each thread's frames gain ``highlight`` on the
    innermost project frame. Empty for an artifact without forensics."""
    if not isinstance(forensics, Mapping):
        return []
    views = []
    for capture in forensics.get("captures") or []:
        processes = []
        for proc in capture["processes"]:
            stack = dict(proc["stack"])
            threads = []
            for thread in stack.get("threads") or []:
                mark = first_project_frame(thread["frames"])
                frames = [{**f, "highlight": i == mark} for i, f in enumerate(thread["frames"])]
                threads.append({**thread, "frames": frames})
            stack["threads"] = threads
            processes.append({**proc, "stack": stack})
        views.append({**capture, "processes": processes})
    return views
