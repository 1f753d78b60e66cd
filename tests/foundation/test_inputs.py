"""A process's input record: git blob ids, project-relative paths, declared data, the merge and its refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from soakbench.foundation import inputs
from soakbench.foundation.inputs import (
    INPUTS_DIR,
    InputsError,
    ProcessInputs,
    canonical_name,
    git_blob_id,
    hash_files,
    merge_manifest,
    own_inputs,
    project_relative,
    read_records,
    write_own_inputs,
)


def test_the_blob_id_is_the_one_git_computes(tmp_path: Path) -> None:
    for data in (b"", b"VALUE = 1\n", bytes(range(256)) * 9):
        path = tmp_path / "f"
        path.write_bytes(data)
        expected = subprocess.run(
            ["git", "hash-object", str(path)], capture_output=True, text=True, check=True
        )
        assert git_blob_id(data) == expected.stdout.strip()


def test_only_project_files_outside_environments_are_named(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    assert project_relative(tmp_path / "pkg" / "mod.py", tmp_path) == "pkg/mod.py"
    assert project_relative(tmp_path / ".venv" / "lib" / "x.py", tmp_path) is None
    assert project_relative(Path("/elsewhere/x.py"), tmp_path) is None


def test_hashing_skips_excluded_prefixes_and_vanished_files(tmp_path: Path) -> None:
    (tmp_path / "keep.py").write_text("A = 1\n")
    (tmp_path / "judge").mkdir()
    (tmp_path / "judge" / "verdict.py").write_text("B = 1\n")
    paths = [tmp_path / "keep.py", tmp_path / "judge" / "verdict.py", tmp_path / "gone.py"]
    assert hash_files(paths, tmp_path, exclude=("judge/",)) == {"keep.py": git_blob_id(b"A = 1\n")}


def test_a_declared_directory_stands_for_every_file_under_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inputs, "_data_files", set())
    (tmp_path / "robot" / "meshes").mkdir(parents=True)
    for rel in ("robot/scene.xml", "robot/meshes/a.stl"):
        (tmp_path / rel).write_text(rel)
    inputs.note_data_file(tmp_path / "robot")
    assert [p.relative_to(tmp_path).as_posix() for p in inputs.declared_data_files()] == [
        "robot/meshes/a.stl",
        "robot/scene.xml",
    ]


def test_distribution_names_are_written_as_lock_files_write_them() -> None:
    assert canonical_name("PyYAML") == "pyyaml"
    assert canonical_name("typing_extensions") == "typing-extensions"
    assert canonical_name("zope.interface") == "zope-interface"


def test_records_merge_and_a_disagreement_is_refused() -> None:
    trainer = ProcessInputs("trainer", 1, {"a.py": "1" * 40}, {"torch": "2.6"})
    collector = ProcessInputs("collector", 2, {"a.py": "1" * 40, "b.py": "2" * 40}, {"mujoco": "3.3"})
    merged = merge_manifest([trainer, collector])
    assert merged["files"] == {"a.py": "1" * 40, "b.py": "2" * 40}
    assert merged["distributions"] == {"mujoco": "3.3", "torch": "2.6"}
    assert [p["role"] for p in merged["processes"]] == ["collector", "trainer"]
    changed = ProcessInputs("collector", 2, {"a.py": "3" * 40}, {})
    with pytest.raises(InputsError, match=r"file a\.py"):
        merge_manifest([trainer, changed])


def test_a_process_writes_its_record_and_a_collector_of_evidence_gets_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(inputs.__file__).resolve().parents[1]
    monkeypatch.setenv(inputs.INPUTS_DIR_ENV, str(tmp_path / "extra"))
    written = write_own_inputs(tmp_path / "run" / INPUTS_DIR, "trainer", root)
    doc = json.loads(written.read_text())
    assert doc["role"] == "trainer" and doc["pid"] == os.getpid()
    assert "foundation/inputs.py" in doc["files"] and "pytest" in doc["distributions"]
    assert not any(name.startswith(".venv") for name in doc["files"])
    assert [r.role for r in read_records(tmp_path / "run")] == ["trainer"]
    assert [r.role for r in read_records(tmp_path / "extra")] == ["trainer"]


def test_an_unreadable_record_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / INPUTS_DIR).mkdir()
    (tmp_path / INPUTS_DIR / "trainer-1.json").write_text('{"role": "trainer"}')
    (tmp_path / "run_config.json").write_text("{}")  # not in an inputs folder: not a record
    with pytest.raises(InputsError, match=r"trainer-1\.json"):
        read_records(tmp_path)


def test_the_manifest_records_the_interpreter_and_what_kinds_it_holds() -> None:
    trainer = ProcessInputs("trainer", 1, {"a.py": "1" * 40}, {}, interpreter="3.11.7", native_libraries=True)
    collector = ProcessInputs("collector", 2, {}, {}, interpreter="3.11.7", native_libraries=True)
    merged = merge_manifest([trainer, collector])
    assert merged["interpreter"] == "3.11.7"
    assert merged["recorded"] == ["files", "distributions", "interpreter", "native libraries"]
    without_maps = ProcessInputs("monitor", 3, {}, {}, interpreter="3.11.7")
    assert "native libraries" not in merge_manifest([trainer, without_maps])["recorded"]
    with pytest.raises(InputsError, match="different Pythons"):
        merge_manifest([trainer, ProcessInputs("collector", 2, {}, {}, interpreter="3.12.1")])


def test_a_process_records_its_interpreter_and_the_distributions_of_its_mapped_libraries(
    tmp_path: Path,
) -> None:
    import platform

    record = own_inputs("test", tmp_path)
    assert record.interpreter == platform.python_version()
    assert record.native_libraries is (sys.platform == "linux")
