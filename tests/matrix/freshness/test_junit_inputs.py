"""The inputs of a cell's Tested evidence (pure): what its bound tests import, name by string and run."""

from __future__ import annotations

from soakbench.matrix.freshness.junit_inputs import Resolution, junit_manifest, named_modules

LOCK = """
version = 1
[[package]]
name = "mujoco"
version = "3.3.0"
source = { registry = "https://example.invalid/simple" }
[[package]]
name = "mujoco-core"
version = "3.3.1"
source = { registry = "https://example.invalid/simple" }
[[package]]
name = "numpy"
version = "2.0.0"
source = { registry = "https://example.invalid/simple" }
"""

FILES = {
    "soakbench/__init__.py": b"",
    "pyproject.toml": b'[tool.pytest.ini_options]\naddopts = "-p harness.addopts_plugin"\n',
    "matrix/pytest_cell.py": b"",
    "harness/__init__.py": b"",
    "harness/addopts_plugin.py": b"",
    "harness/soak/__init__.py": b"",
    "harness/soak/cli.py": b"from soakbench.harness.soak import loop\n",
    "harness/soak/loop.py": b"import numpy\n",
    "harness/unused.py": b"",
    "tests/conftest.py": b'pytest_plugins = ["tests.lane"]\n',
    "tests/lane.py": b"",
    "tests/test_cell.py": (
        b"import subprocess, sys\nimport mujoco\n\n"
        b"def test_soak():\n"
        b'    subprocess.run([sys.executable, "-m", "soakbench.harness.soak.cli", "run", "matrix.png"])\n'
    ),
    "runtime/assets/robots/g1/scene.xml": b"<mujoco/>",
    "runtime/assets/motions/clip.npz": b"clip",
}
TREE = {path: f"{i:040x}" for i, path in enumerate(FILES)}


def test_a_cells_tests_record_what_they_name_by_string_and_the_plugin_that_wrote_the_xml() -> None:
    manifest = junit_manifest(
        ["tests/test_cell.py"],
        TREE,
        FILES.get,
        ((), ("runtime/assets/robots/g1/",)),
        Resolution(LOCK, {"mujoco": ("mujoco", "mujoco-core"), "numpy": ("numpy",)}),
    )
    files = set(manifest["files"])
    assert {"tests/lane.py", "harness/addopts_plugin.py", "matrix/pytest_cell.py"} <= files  # plugins
    assert {"harness/soak/cli.py", "harness/soak/loop.py"} <= files  # run in a subprocess, and its imports
    assert "harness/unused.py" not in files
    assert "runtime/assets/robots/g1/scene.xml" in files and "runtime/assets/motions/clip.npz" not in files
    # every distribution behind `import mujoco`, and numpy, which the subprocess's code imports
    assert manifest["distributions"] == {"mujoco": "3.3.0", "mujoco-core": "3.3.1", "numpy": "2.0.0"}


def test_a_string_that_names_no_module_is_not_an_input() -> None:
    files = {
        "t.py": b'X = ["matrix.png", "a.b", "-m", "not a module"]\n',
        "a/__init__.py": b"",
        "a/b.py": b"",
    }
    assert named_modules(["t.py"], files.get) == ["a/b.py"]


FORKED = """
version = 1
[[package]]
name = "numpy"
version = "2.4.6"
source = { registry = "https://example.invalid/simple" }
resolution-markers = ["python_full_version < '3.12'"]
[[package]]
name = "numpy"
version = "2.5.5"
source = { registry = "https://example.invalid/simple" }
resolution-markers = ["python_full_version >= '3.12'"]
"""


def test_the_lock_is_read_at_the_versions_it_resolves_for_the_lanes_python() -> None:
    files = {"tests/test_n.py": b"import numpy\n"}
    tree = {"tests/test_n.py": "1" * 40}
    manifest = junit_manifest(
        ["tests/test_n.py"], tree, files.get, ((), ()), Resolution(FORKED, {"numpy": ("numpy",)}, "3.11.7")
    )
    assert manifest["distributions"] == {"numpy": "2.4.6"}
    assert manifest["interpreter"] == "3.11.7"
    assert manifest["recorded"] == [
        "files", "distributions", "interpreter", "plugins named by string", "subprocess modules"
    ]  # fmt: skip


def test_a_distribution_the_lane_loaded_is_recorded_at_the_version_it_loaded() -> None:
    files = {"tests/test_n.py": b"import numpy\n"}
    tree = {"tests/test_n.py": "1" * 40}
    loaded = {"numpy": "2.4.7", "pytest": "9.0"}  # the installed numpy drifted from the lock's 2.4.6
    resolution = Resolution(FORKED, {"numpy": ("numpy",)}, "3.11.7", loaded)
    manifest = junit_manifest(["tests/test_n.py"], tree, files.get, ((), ()), resolution)
    assert manifest["distributions"] == {"numpy": "2.4.7"}  # only what the closure reaches, as loaded
    assert "loaded versions" in manifest["recorded"]
