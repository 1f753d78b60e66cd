"""Run artifacts in ``log_dir``: run_config.json, progress.jsonl, run_summary.json, checkpoints.

Every JSON document is validated against its shipped schema (``foundation/schemas/``) before it is
written, and written with ``foundation.atomic.write_atomic``, so a reader never sees half a file.
progress.jsonl is append-only: each record is one complete line written with a single ``write``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from soakbench.foundation.atomic import write_atomic
from soakbench.foundation.schema import sorted_errors

RUN_CONFIG_SCHEMA = "run-config-1.schema.json"
RUN_SUMMARY_SCHEMA = "run-summary-1.schema.json"
RUNTIME_MANIFEST_SCHEMA = "runtime-manifest-1.schema.json"
PROGRESS_SCHEMA_VERSION = 1
MANIFEST_SCHEMA_VERSION = 1


class ArtifactError(ValueError):
    """An artifact failed its schema; the message names the file, the JSON path and the problem."""


def validate(document: Mapping[str, Any], schema_name: str, label: str = "document") -> None:
    """Raise :class:`ArtifactError` listing every violation of ``schema_name`` (path: message)."""
    errors = sorted_errors(document, schema_name)
    if errors:
        lines = [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors[:10]]
        raise ArtifactError(f"{label} violates {schema_name}:\n  " + "\n  ".join(lines))


def atomic_write_json(path: Path, document: Mapping[str, Any]) -> None:
    """Serialize ``document`` (sorted keys, indented, no NaN) and write it atomically."""
    text = json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"
    write_atomic(path, text)


def prepare_log_dir(log_dir: str | os.PathLike[str] | None) -> Path:
    """Check ``log_dir`` is absolute and new or empty, then create it. Raises ArtifactError."""
    if log_dir is None:
        raise ArtifactError("log_dir is required: pass log_dir=/absolute/path/of/a/new/run/dir")
    path = Path(log_dir)
    if not path.is_absolute():
        raise ArtifactError(f"log_dir must be an absolute path, got {str(log_dir)!r}")
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ArtifactError(f"log_dir {path} exists and is not an empty directory; choose a new path")
    path.mkdir(parents=True, exist_ok=True)
    return path


def build_run_config(config: Mapping[str, Any], created_unix_s: float | None = None) -> dict[str, Any]:
    """The run_config.json document from the resolved config as a plain mapping."""
    cfg = dict(config)
    return {
        "schema_version": 1,
        "owner": cfg.get("owner", {}),
        "cuda_process_sharing": {"configured": cfg["training"]["cuda_process_sharing"]},
        "config": cfg,
        "created_unix_s": time.time() if created_unix_s is None else created_unix_s,
    }


def write_run_config(log_dir: Path, document: Mapping[str, Any]) -> Path:
    validate(document, RUN_CONFIG_SCHEMA, "run_config.json")
    path = Path(log_dir) / "run_config.json"
    atomic_write_json(path, document)
    return path


def write_run_summary(log_dir: Path, document: Mapping[str, Any]) -> Path:
    validate(document, RUN_SUMMARY_SCHEMA, "run_summary.json")
    path = Path(log_dir) / "run_summary.json"
    atomic_write_json(path, document)
    return path


def read_run_summary(path: Path) -> dict[str, Any]:
    """Load and validate a run_summary.json (consumers validate what they read)."""
    try:
        document: dict[str, Any] = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path}: cannot read run summary: {exc}") from None
    validate(document, RUN_SUMMARY_SCHEMA, str(path))  # the schema's root is an object
    return document


class ProgressLog:
    """Append-only progress.jsonl; one complete JSON object per line, flushed per record."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self._clock = clock
        self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.records = 0

    def write(self, record: Mapping[str, Any]) -> dict[str, Any]:
        full = {"schema": PROGRESS_SCHEMA_VERSION, "time": self._clock(), **record}
        self._fh.write(json.dumps(full, sort_keys=True, allow_nan=False) + "\n")
        self._fh.flush()
        self.records += 1
        return full

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


def save_checkpoint(
    directory: Path, iteration: int, payload: Mapping[str, Any], name: str | None = None
) -> Path:
    """``torch.save`` ``payload`` to ``directory/<name or ckpt_<iteration>.pt>`` atomically."""
    import io

    import torch

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    torch.save(dict(payload), buffer)
    path = directory / (name or f"ckpt_{iteration:08d}.pt")
    write_atomic(path, buffer.getvalue())
    return path
