"""foundation.atomic.write_atomic: all or nothing, mode applied, no temp file left behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from soakbench.foundation.atomic import write_atomic


def test_writes_text_and_bytes_with_mode(tmp_path: Path) -> None:
    text = write_atomic(tmp_path / "a.txt", "héllo\n")
    assert text.read_bytes() == "héllo\n".encode()
    assert stat.S_IMODE(text.stat().st_mode) == 0o644
    private = write_atomic(tmp_path / "b.bin", b"\x00\x01", mode=0o600)
    assert private.read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin"]


def test_replaces_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "doc.json"
    write_atomic(target, "old")
    write_atomic(target, "new")
    assert target.read_text() == "new"


def test_failure_keeps_old_file_and_removes_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "doc.json"
    write_atomic(target, "old")

    def refuse(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_missing_parent_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_atomic(tmp_path / "absent" / "x.txt", "x")
