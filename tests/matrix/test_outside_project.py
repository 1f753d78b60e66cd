"""An outside project graded end to end: its own inventory, a real `soak monitor --cell` over its own
trainer (a main process and 2 workers), JUnit from its own tests with the cell plugin (`python -m pytest -p
soakbench.matrix.pytest_cell` from a root with `matrix` and `runtime` packages of its own), then `matrix ingest`,
`generate` and `check` in its repository. Its cell reaches Benchmarked without importing the runtime; a
commit to an unrelated file leaves it fresh, one to its trainer makes exactly its cells historical. The
bad-input messages of a project's inventory and of `--cell` are checked alongside (pure, fast)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from soakbench.harness.soak.loop.settings import SettingsError
from soakbench.harness.soak.route import monitor_cell
from soakbench.matrix import cli as matrix_cli
from soakbench.matrix.declared.inventory import parse_inventory
from soakbench.matrix.freshness import tree_fingerprint
from soakbench.matrix.model import MatrixInputError
from soakbench.matrix.publishing.render import BEGIN_MARKER, END_MARKER
from tests.matrix._fixtures import INVENTORY, REGISTRY, commit_all, git

INVENTORY_YAML = """\
schema_version: 1
project:
  name: toyproject
  facts: declared
  axes: {algo: [toy, other], task: [count], backend: [py]}
  platforms: [{name: linux-arm64, system: Linux}]
  lanes: [arm64]
  inputs: [settings.toml]
canonical_soak: {min_duration_s: 3600}
cells:
  - algo: toy
    task: count
    backend: py
    platform: linux-arm64
    inputs: [trainer.py]
    tests: {lane: arm64, min_passed: 1, kinds: [soak]}
    probe_required: false
    soak: {min_duration_s: 1}
  - algo: other
    task: count
    backend: py
    platform: linux-arm64
    inputs: [other.py]
    tests: {lane: arm64, min_passed: 1}
    probe_required: false
    soak: {min_duration_s: 1}
"""

TRAINER = '''\
"""A toy trainer: a main process and 2 worker processes count for a few seconds (LOG_DIR [SECONDS])."""
import json
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path


def count(n):
    return sum(i * i for i in range(n))


def worker(stop):
    while not stop.is_set():
        count(2000)
        time.sleep(0.02)


def main():
    log_dir, seconds = Path(sys.argv[1]), float(sys.argv[2])
    log_dir.mkdir(parents=True, exist_ok=True)
    ctx = mp.get_context("fork")
    stop = ctx.Event()
    workers = [ctx.Process(target=worker, args=(stop,)) for _ in range(2)]
    for w in workers:
        w.start()
    end, tick = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        record = {"schema": 1, "time": time.time(), "iteration": tick, "pid": os.getpid()}
        with open(log_dir / "progress.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\\n")
        tick += 1
        time.sleep(0.2)
    stop.set()
    for w in workers:
        w.join()


if __name__ == "__main__":
    main()
'''

FILES = {
    "trainer.py": TRAINER,
    "other.py": "def count(n):\n    return n * (n - 1) // 2\n",
    "settings.toml": "steps = 3\n",
    "README.md": "# toyproject\n",
    ".gitignore": "__pycache__/\n.pytest_cache/\n",
    "pytest.ini": "[pytest]\npythonpath = .\n",  # no markers entry: matrix.pytest_cell registers `cell`
    "tests/test_toy.py": (
        "import pytest\nimport trainer\n\n\n@pytest.mark.cell('toy', 'count', 'py', kind='soak')\n"
        "def test_counts():\n    assert trainer.count(3) == 5\n"
    ),
    "tests/test_other.py": (
        "import pytest\nimport other\n\n\n@pytest.mark.cell('other', 'count', 'py', kind='smoke')\n"
        "def test_counts():\n    assert other.count(3) == 3\n"
    ),
    # Packages named as soakbench's rooms are: the project's own, found first, beside the plugin
    "matrix/__init__.py": "OWNER = 'toyproject'\n",
    "runtime/__init__.py": "OWNER = 'toyproject'\n",
    "tests/test_own_packages.py": (
        "import matrix\nimport runtime\n\n\ndef test_the_project_keeps_its_own_names():\n"
        "    assert matrix.OWNER == runtime.OWNER == 'toyproject'\n"
    ),
    "matrix/inventory.yaml": INVENTORY_YAML,
    "docs/support-matrix.md": f"# toyproject support\n\n{BEGIN_MARKER}\n{END_MARKER}\n",
}
QUIET = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}


def _project(root: Path) -> Path:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "t")
    commit_all(root, "toy trainer")
    return root


def _junit(repo: Path, out: Path) -> None:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "soakbench.matrix.pytest_cell", "-p", "no:cacheprovider",
            "--strict-markers", "--matrix-platform", "linux-arm64", "--matrix-lane", "arm64", f"--junitxml={out}",
            "tests"]  # fmt: skip
    done = subprocess.run(argv, cwd=repo, env=QUIET, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def _soak(repo: Path, runs: Path) -> Path:
    output = runs / "soak.json"
    argv = [
        sys.executable, "-m", "soakbench.harness.soak.cli", "monitor", "--cell", "toy/count/py",
        "--log-dir", str(runs / "run"), "--output", str(output), "--sample-interval-seconds", "0.2",
        "--min-trend-samples", "8", "--startup-timeout-seconds", "20", "--stale-progress-seconds", "5",
        "--post-shutdown-grace-seconds", "0.5", "--min-duration-seconds", "1", "--live", "off",
        "--shm-attribution", "evidence",
        # 6 s of trainer at 0.2 s sampling leaves ~25 trend samples against --min-trend-samples 8; 3 s left
        # 8-9, one late sample short of failing on a loaded machine (tests/test_wheel.py runs 6 s likewise)
        "--", sys.executable, str(repo / "trainer.py"), str(runs / "run"), "6",
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=repo, env=QUIET, capture_output=True, text=True, timeout=120, check=False)
    assert output.is_file(), f"soak monitor wrote no {output} (exit {done.returncode}): {done.stderr[-3000:]}"
    art = json.loads(output.read_text())
    assert done.returncode == 0, (art["failure_reason"], done.stderr[-2000:])
    assert art["mode"] == "monitor" and art["run_settings"] == {
        "cell": {"algo": "toy", "task": "count", "backend": "py"}
    }
    assert art["context"]["source"]["commit"] == git(repo, "rev-parse", "HEAD")  # the project's, not ours
    return output


def _matrix(repo: Path, *args: str) -> str:
    result = CliRunner().invoke(matrix_cli.app, [*args, "--repo", str(repo)])
    assert result.exit_code == 0, result.output
    return result.output


def _cells(repo: Path) -> dict[str, dict[str, Any]]:
    doc = json.loads((repo / "reports" / "support-matrix.json").read_text())
    return {c["algo"]: c for c in doc["cells"]}


def _check_without_runtime(repo: Path) -> None:
    """`matrix check` in a fresh interpreter: it passes, imports no torch, MuJoCo or Warp, and asks
    nothing of the runtime's registries or configuration."""
    code = (
        "import sys\nfrom soakbench.matrix.cli import app\ntry:\n    app(['check', '--repo', sys.argv[1]])\n"
        "except SystemExit as exc:\n    code = exc.code\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'mujoco', 'warp') "
        "or m in ('soakbench.runtime.config', 'soakbench.runtime.tasks', 'soakbench.runtime.learners'))\n"
        "print('exit', code, 'heavy', heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(repo)], capture_output=True, text=True, check=False
    )
    assert done.stdout.strip().endswith("exit 0 heavy []"), done.stdout + done.stderr


@pytest.fixture
def no_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """A project's own inventory never asks this runtime for its facts."""

    def refuse() -> None:
        raise AssertionError("the runtime's facts were asked for a project's own inventory")

    monkeypatch.setattr(matrix_cli, "runtime_inputs", refuse)


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.linux_only
@pytest.mark.usefixtures("no_runtime")
def test_outside_trainer_reaches_benchmarked_and_its_own_changes_stale_it(tmp_path: Path) -> None:
    repo = _project(tmp_path / "toyproject")
    runs = tmp_path / "runs"
    _junit(repo, runs / "junit.xml")
    soak = _soak(repo, runs)
    _matrix(repo, "ingest", str(runs / "junit.xml"))
    index = (repo / "matrix" / "evidence" / "index.json").read_bytes()
    typo = json.loads(soak.read_text())
    typo["run_settings"]["cell"]["task"] = "cuont"  # as `soak monitor --cell toy/cuont/py` records it
    (runs / "typo.json").write_text(json.dumps(typo))
    refused = CliRunner().invoke(matrix_cli.app, ["ingest", str(runs / "typo.json"), "--platform", "linux-arm64",
                                                  "--repo", str(repo)])  # fmt: skip
    assert refused.exit_code == 2, refused.output
    assert (
        "run_settings.cell: toy/cuont/py names no cell of the inventory on linux-arm64; allowed: "
        in " ".join(refused.output.split())
    )
    assert (repo / "matrix" / "evidence" / "index.json").read_bytes() == index  # nothing filed
    assert "covers: toy/count/py" in _matrix(repo, "ingest", str(soak), "--platform", "linux-arm64")
    _matrix(repo, "generate")
    _check_without_runtime(repo)
    cells = _cells(repo)
    assert cells["toy"]["grade"] == "Benchmarked", cells["toy"]["blockers"]
    assert cells["other"]["grade"] == "Tested", cells["other"]["blockers"]
    page = (repo / "docs" / "support-matrix.md").read_text()
    assert "declared in the project's own inventory" in page and "Backend capabilities" not in page
    assert "| py @ linux-arm64 |" in page
    html = (repo / "reports" / "support-matrix.html").read_text()
    assert "<title>toyproject support matrix</title>" in html and "soakbench" not in html
    commit_all(repo, "file the evidence")

    (repo / "README.md").write_text("# toyproject\n\nUnrelated words.\n")
    commit_all(repo, "docs")
    assert "HEAD~1..HEAD: no cell's evidence goes historical" in _matrix(
        repo, "affected", "--since", "HEAD~1"
    )
    _matrix(repo, "generate")
    assert {a: c["grade"] for a, c in _cells(repo).items()} == {"toy": "Benchmarked", "other": "Tested"}

    (repo / "trainer.py").write_text(TRAINER.replace("count(2000)", "count(3000)"))
    commit_all(repo, "trainer: more work per step")
    affected = _matrix(repo, "affected", "--since", "HEAD~1")
    assert "HEAD~1..HEAD makes the evidence of 1 cell(s) historical:" in affected
    assert "toy/count/py@linux-arm64: soak" in affected and "toy/count/py@linux-arm64: junit" in affected
    _matrix(repo, "generate")
    _matrix(repo, "check")
    assert {a: c["grade"] for a, c in _cells(repo).items()} == {"toy": "Configured", "other": "Tested"}
    explained = _matrix(repo, "explain", "toy", "count", "py", "linux-arm64")
    assert "historical: trainer.py changed since" in explained


def _refused(repo: Path, *args: str) -> str:
    result = CliRunner().invoke(matrix_cli.app, [*args, "--repo", str(repo)])
    assert result.exit_code == 2, result.output
    return " ".join(result.output.split())


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("inputs: [settings.toml]", "inputs: [setings.toml]", "project.inputs[0]"),
        ("inputs: [trainer.py]", "inputs: [trainer.py, src/]", "cells[0].inputs[1]"),
        ("inputs: [other.py]", "inputs: [other.pyy]", "cells[1].inputs[0]"),
    ],
)
def test_an_input_root_must_exist_at_head(tmp_path: Path, old: str, new: str, field: str) -> None:
    """A mistyped root would hash as absent at every commit: its cells' evidence would stay fresh for ever."""
    repo = _project(tmp_path / "toyproject")
    (repo / "matrix" / "inventory.yaml").write_text(INVENTORY_YAML.replace(old, new))
    commit_all(repo, "a mistyped root")
    for command in (["generate"], ["check"], ["affected", "--since", "HEAD"]):
        said = _refused(repo, *command)
        assert f"{field}: no file or folder at HEAD" in said, said
    assert not (repo / "reports").exists()  # nothing written


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("inputs: [settings.toml]", "inputs: []", r"project\.inputs: schema violation: \[\] should be non-empty"),
        ("inputs: [trainer.py]", "inputs: []", r"cells\[0\]\.inputs: schema violation"),
        ("soak: {min_duration_s: 1}", "soak: {min_duration_s: 1, num_envs: 8}", r"cells\[0\]\.soak: .*'num_envs'"),
        ("{min_duration_s: 3600}", "{min_duration_s: 3600, iterations: 10}", r"canonical_soak: .*'iterations'"),
    ],
)  # fmt: skip
def test_empty_roots_and_env_budgets_are_refused(old: str, new: str, field: str) -> None:
    assert old in INVENTORY_YAML
    with pytest.raises(MatrixInputError, match=field):
        parse_inventory(_document(INVENTORY_YAML.replace(old, new, 1)), None, "inv.yaml")


def test_a_fingerprint_over_no_paths_is_refused(tmp_path: Path) -> None:
    repo = _project(tmp_path / "toyproject")
    with pytest.raises(ValueError, match="at least one path"):
        tree_fingerprint(repo, git(repo, "rev-parse", "HEAD"), ())


def test_the_plugin_registers_the_cell_marker(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "soakbench.matrix.pytest_cell",
        "-p",
        "no:cacheprovider",
        "--markers",
    ]
    done = subprocess.run(
        argv, cwd=tmp_path, env=QUIET, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        "@pytest.mark.cell(algo, task, backend, kind=..., ranks=N): binds a test to a support-matrix cell"
        in (done.stdout)
    )


def _document(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


def test_unknown_platform_names_the_field_and_the_allowed_values() -> None:
    runtime = _document(INVENTORY.replace("platform: linux-cpu\n", "platform: linux-arm64\n", 1))
    with pytest.raises(MatrixInputError, match=r"cells\[1\]\.platform: unknown platform 'linux-arm64'; "
                       r"allowed: linux-cuda, linux-cpu, macos-mps"):  # fmt: skip
        parse_inventory(runtime, REGISTRY, "inv.yaml")
    project = _document(
        INVENTORY_YAML.replace("platform: linux-arm64\n", "platform: [linux-arm64, linux-cuda]\n")
    )
    with pytest.raises(MatrixInputError, match=r"cells\[0\]\.platform: unknown platform 'linux-cuda'; "
                       r"allowed \(declared in project.platforms\): linux-arm64"):  # fmt: skip
        parse_inventory(project, None, "inv.yaml")


def test_project_inventory_declares_its_own_names_and_budgets() -> None:
    inventory = parse_inventory(_document(INVENTORY_YAML), None, "inv.yaml")
    assert inventory.project is not None and inventory.platforms == ("linux-arm64",)
    assert inventory.lanes == ("arm64",) and inventory.systems == {"linux-arm64": "Linux"}
    toy = next(c for c in inventory.cells if c.key.algo == "toy")
    assert toy.soak is not None and toy.soak.num_envs is None and toy.soak.shortfalls(2.0, None, None) == []
    assert inventory.roots_of(toy.key) == ("settings.toml", "trainer.py")
    bad = _document(INVENTORY_YAML.replace("algo: other\n", "algo: sac\n"))
    with pytest.raises(MatrixInputError, match=r"cells\[1\]\.algo: unknown algo \(not in project.axes\)"):
        parse_inventory(bad, None, "inv.yaml")
    broken = _document(INVENTORY_YAML.replace("facts: declared", "facts: runtime"))
    with pytest.raises(MatrixInputError, match=r"project\.facts: schema violation"):
        parse_inventory(broken, None, "inv.yaml")


@pytest.mark.parametrize("text", ["toy/count", "toy//py", "toy/count/py/ranks=1", "a/b/c/ranks=x", "a/b/c/d"])
def test_monitor_cell_refuses_a_malformed_cell(text: str) -> None:
    with pytest.raises(SettingsError, match=r"--cell .*ALGO/TASK/BACKEND"):
        monitor_cell(text)


def test_monitor_cell_records_ranks_only_for_several() -> None:
    assert monitor_cell("toy/count/py") == {"cell": {"algo": "toy", "task": "count", "backend": "py"}}
    assert monitor_cell("toy/count/py/ranks=2")["cell"]["ranks"] == 2
