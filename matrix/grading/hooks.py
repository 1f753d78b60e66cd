"""Test-only hooks recorded in a piece of evidence: evidence made with one never counts.

Two hooks can reach a soak or probe artifact:

- ``probe --test-step-sleep-ms`` (hidden) sleeps inside every timed env step. A probe artifact records it
  as ``settings.test_step_sleep_ms`` (probe 0.4.0 on) and, when given, in its ``command`` argv.
- ``training.test_*`` runtime settings (``training.test_fault`` injects a learner exception at
  ``training.test_fault_iteration``). A soak run passes them to ``train`` as overrides, so a soak artifact
  records them in ``run_settings.extra_overrides`` and in the trainer ``command``; a monitored command
  carries them in its ``command``.

A hook at its default (``0``, ``null``, ``false``) is not a hook. A JUnit summary records no settings of
the tests it counts (tests use the hooks by design), so it has none to check.

Pure: ``hooks_in(kind, doc) -> list[str]``, each entry ``<where>: <key>=<value>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from soakbench.harness.two_runs.fields import dig

PROBE_SETTINGS: tuple[str, ...] = ("test_step_sleep_ms",)  # the probe's test-only settings
PROBE_FLAGS: dict[str, str] = {"--test-step-sleep-ms": "test_step_sleep_ms"}  # its option -> setting
RUN_SETTINGS: tuple[str, ...] = (  # the runtime's
    "training.test_fault",
    "training.test_fault_iteration",
    "training.test_fault_rank",
)
_OVERRIDE = re.compile(r"^\s*[+~]?\s*(training\.test_[A-Za-z0-9_]*)\s*=(.*)$", re.DOTALL)


def is_default(value: Any) -> bool:
    """A hook value that leaves the hook off: absent/null, zero or false."""
    return value is None or (isinstance(value, bool | int | float) and value == 0)


def parse_value(raw: str) -> Any:
    """An override's value as the runtime's YAML grammar reads it; unparsable text stays text (a hook)."""
    try:
        return yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        return raw


def override_hooks(items: Iterable[Any], where: str) -> list[str]:
    """``training.test_*=<value>`` overrides (or argv tokens) in ``items`` whose value is not the default."""
    found = []
    for item in items:
        match = _OVERRIDE.match(item) if isinstance(item, str) else None
        if match and not is_default(parse_value(match[2])):
            found.append(f"{where}: {match[1]}={match[2].strip()}")
    return found


def flag_hooks(argv: Iterable[Any], where: str) -> list[str]:
    """``--test-step-sleep-ms VALUE`` / ``--test-step-sleep-ms=VALUE`` in a probe argv, when not 0."""
    tokens = [t for t in argv if isinstance(t, str)]
    found = []
    for position, token in enumerate(tokens):
        flag, sep, value = token.partition("=")
        if flag not in PROBE_FLAGS:
            continue
        if not sep:
            value = tokens[position + 1] if position + 1 < len(tokens) else ""
        if not is_default(parse_value(value)):
            found.append(f"{where}: {flag} {value}")
    return found


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def hooks_in(kind: str, doc: Any) -> list[str]:
    """Every test-only hook ``doc`` (a ``soak`` or ``probe`` artifact) records at a non-default value."""
    if not isinstance(doc, Mapping):
        return []
    command = _list(doc.get("command"))
    if kind == "probe":
        settings = [
            f"settings.{name}={dig(doc, f'settings.{name}')}"
            for name in PROBE_SETTINGS
            if not is_default(dig(doc, f"settings.{name}"))
        ]
        return settings + flag_hooks(command, "command")
    if kind == "soak":
        extra = _list(dig(doc, "run_settings.extra_overrides"))
        return override_hooks(extra, "run_settings.extra_overrides") + override_hooks(command, "command")
    return []
