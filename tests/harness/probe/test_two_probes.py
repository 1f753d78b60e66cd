"""``probe compare`` end to end on real CPU probes: A/A pairs, a real slowdown, a small injected one, and
every refusal (different workload or host, schema-invalid or tampered artifacts), plus matrix ingest of
a tampered artifact. No timing thresholds beyond the verdict logic itself: the host is shared."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from soakbench.foundation.schema import sorted_errors
from soakbench.matrix.intake.ingest import ingest
from soakbench.matrix.model import MatrixInputError
from tests.harness.probe.test_cli import _probe as run_probe
from tests.matrix._fixtures import git, make_repo

# one worker runs the module, so its module-scoped real probe pair is made once, not once per worker
pytestmark = pytest.mark.xdist_group("probe-compare")

SMALL = ("--backends", "mujoco", "--num-envs", "16", "--warmup", "2", "--iters", "10")
TINY = (*SMALL, "--processes", "2")
# The fewest processes at which any measure is called (harness.probe.two_probes.MIN_PROCESSES).
CALLABLE = (*SMALL, "--processes", "3")


def _run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return run_probe(*args, env={"COLUMNS": "160"}, timeout=timeout)


def _probe(out: Path, *args: str) -> Path:
    done = _run(*args, "--output", str(out))
    assert done.returncode == 0, done.stderr
    return out


def _compare(base: Path, new: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return _run("compare", str(base), str(new), *flags)


def _edited(source: Path, target: Path, edit: Any) -> Path:
    doc = json.loads(source.read_text())
    edit(doc)
    target.write_text(json.dumps(doc))
    return target


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("aa")
    return _probe(tmp / "a.json", *TINY), _probe(tmp / "b.json", *TINY)


def test_an_a_a_pair_is_never_slower_and_exits_0(pair: tuple[Path, Path], tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    for base, new in (pair, pair[::-1]):
        done = _compare(base, new, "--json-file", str(report_path))
        assert done.returncode == 0, done.stderr
        report = json.loads(report_path.read_text())
        assert not sorted_errors(report, "probe-compare-1.schema.json")
        # At 2 processes a side no measure is called (two medians estimate no noise floor), so every
        # row must come out inconclusive and say why, whatever the host's load did between the runs.
        assert {r["verdict"] for r in report["measures"]} == {"inconclusive"}, report["measures"]
        phases = [r for r in report["measures"] if r["measure"].endswith("_ms")]
        assert phases and all("phase timing" in r["note"] for r in phases)
        rates = [r for r in report["measures"] if not r["measure"].endswith("_ms")]
        assert rates and all("3 processes a side (now 2)" in r["note"] for r in rates)
        assert report["cross_host"] is False
        assert {r["measure"] for r in report["measures"]} >= {"env_control_steps_per_s", "efficiency"}
        assert "verdict" in done.stderr and "env steps/s" in done.stderr  # the rich table


def test_junit_has_a_case_per_measure_and_inconclusive_is_skipped_with_why(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    junit, summary = tmp_path / "compare.xml", tmp_path / "compare.md"
    done = _compare(
        *pair,
        "--junit-xml",
        str(junit),
        "--summary-md",
        str(summary),
        "--json-file",
        str(tmp_path / "r.json"),
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "r.json").read_text())["measures"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "probe.compare"
    cases = {str(c.get("name")): c for c in suite.iter("testcase")}
    assert set(cases) == {f"{r['backend']}.{r['measure']}" for r in rows}
    skipped = cases["mujoco.env_control_steps_per_s"].find("skipped")
    assert skipped is not None and "3 processes a side" in str(skipped.get("message"))
    assert suite.get("failures") == "0"
    assert summary.read_text().startswith("### ✅ probe compare at a 5% minimum effect: passed")


def test_a_bad_junit_path_exits_2_before_comparing(pair: tuple[Path, Path], tmp_path: Path) -> None:
    done = _compare(*pair, "--junit-xml", str(tmp_path / "missing" / "c.xml"))
    assert done.returncode == 2 and "--junit-xml: parent directory" in done.stderr


def test_json_prints_one_document_on_stdout_and_nothing_else(pair: tuple[Path, Path], tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    done = _compare(*pair, "--json", "--json-file", str(report_path))
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)  # raises on anything besides one JSON document
    assert printed == json.loads(report_path.read_text())
    assert not sorted_errors(printed, "probe-compare-1.schema.json")
    assert "probe compare: verdict" in done.stderr  # the table still goes to stderr
    assert _compare(*pair).stdout == ""  # without --json nothing goes to stdout
    done = _compare(*pair, "--json", "--threshold", "0")  # refused: no half document on stdout
    assert done.returncode == 2 and done.stdout == "" and "--threshold" in done.stderr
    legacy = tmp_path / "legacy.json"  # the old `--json PATH` form: a flag takes no value, exit 2
    done = _compare(*pair, "--json", str(legacy))
    assert done.returncode == 2 and done.stdout == "" and not legacy.exists()


def test_bmf_holds_the_new_probe_and_the_ratios(pair: tuple[Path, Path], tmp_path: Path) -> None:
    bmf, report_path = tmp_path / "bmf.json", tmp_path / "report.json"
    done = _compare(*pair, "--bmf", str(bmf), "--json-file", str(report_path))
    assert done.returncode == 0, done.stderr
    document, report = json.loads(bmf.read_text()), json.loads(report_path.read_text())
    assert not sorted_errors(document, "bencher-metric-format.schema.json")
    metrics = document["probe/g1_motion_tracking/mujoco/16envs"]
    assert set(metrics) == {"env_steps_per_s", "efficiency", "env_steps_per_s_ratio", "efficiency_ratio"}
    new = json.loads(pair[1].read_text())["backends"]["mujoco"]["summary"]
    assert metrics["env_steps_per_s"]["value"] == new["env_control_steps_per_s"]["median"]
    row = next(r for r in report["measures"] if r["measure"] == "efficiency")
    assert metrics["efficiency_ratio"] == {
        "value": row["ratio"],
        "lower_value": row["ci_low"],
        "upper_value": row["ci_high"],
    }


def test_a_bad_bmf_path_exits_2_and_writes_nothing(pair: tuple[Path, Path], tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    for bad in ("relative.json", str(tmp_path / "missing" / "b.json"), str(tmp_path)):
        done = _compare(*pair, "--bmf", bad, "--json-file", str(report_path))
        assert done.returncode == 2 and "--bmf" in done.stderr, done.stderr
    assert not list(tmp_path.iterdir())


def test_a_different_workload_is_refused_naming_the_field(pair: tuple[Path, Path], tmp_path: Path) -> None:
    other = _probe(tmp_path / "eight.json", *TINY[:3], "8", *TINY[4:])
    report = tmp_path / "report.json"
    done = _compare(pair[0], other, "--json-file", str(report))
    assert done.returncode == 2 and "settings.num_envs" in done.stderr
    assert not report.exists()


def test_a_different_host_needs_the_flag_and_is_then_announced(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    def move(doc: dict[str, Any]) -> None:
        doc["context"]["host"]["cpu_model"] = "Another CPU"

    elsewhere = _edited(pair[1], tmp_path / "elsewhere.json", move)
    done = _compare(pair[0], elsewhere)
    assert done.returncode == 2 and "context.host" in done.stderr and "--allow-cross-host" in done.stderr
    done = _compare(pair[0], elsewhere, "--allow-cross-host")
    assert done.returncode == 0 and "ACROSS HOSTS" in done.stderr and "Another CPU" in done.stderr


def _tamper_summary(doc: dict[str, Any]) -> None:
    doc["backends"]["mujoco"]["summary"]["env_control_steps_per_s"]["median"] *= 1.5


def _tamper_round(doc: dict[str, Any]) -> None:
    doc["backends"]["mujoco"]["processes"][1]["rounds"][0]["env_control_steps_per_s"] *= 1.5


def _break_schema(doc: dict[str, Any]) -> None:
    del doc["backends"]["mujoco"]["processes"][0]["rounds"][0]["iteration_ms"]


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_tamper_summary, "backends.mujoco.summary"),
        (_tamper_round, "backends.mujoco.processes[1].rounds[0].env_control_steps_per_s"),
        (_break_schema, "backends/mujoco/processes/0/rounds/0"),
    ],
)
def test_tampered_or_invalid_artifacts_are_refused(
    pair: tuple[Path, Path], tmp_path: Path, edit: Any, field: str
) -> None:
    bad = _edited(pair[1], tmp_path / "bad.json", edit)
    report = tmp_path / "report.json"
    done = _compare(pair[0], bad, "--json-file", str(report))
    assert done.returncode == 2 and field in done.stderr, done.stderr
    assert not report.exists()


def test_bad_flags_exit_2(pair: tuple[Path, Path], tmp_path: Path) -> None:
    assert "--threshold" in _compare(*pair, "--threshold", "0").stderr
    done = _compare(*pair, "--json-file", "relative.json")
    assert done.returncode == 2 and "--json-file" in done.stderr
    legacy = _edited(pair[1], tmp_path / "old.json", lambda d: d.update(schema_version="0.3.0"))
    done = _compare(pair[0], legacy)
    assert done.returncode == 2 and "schema_version" in done.stderr


def test_matrix_ingest_refuses_a_tampered_probe(pair: tuple[Path, Path], tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    head = git(repo, "rev-parse", "HEAD")

    def tampered(doc: dict[str, Any]) -> None:
        doc["context"]["source"].update(commit=head, dirty=False)
        doc["backends"]["mujoco"]["processes"][0]["efficiency"] *= 2

    bad = _edited(pair[0], tmp_path / "bad.json", tampered)
    with pytest.raises(MatrixInputError) as caught:
        ingest(repo, bad, platform="linux-cpu")
    assert caught.value.field == "backends.mujoco.processes[0].efficiency"
    assert not (repo / "matrix" / "evidence" / "probe").exists()


@pytest.mark.slow
def test_a_small_injected_slowdown_is_detected_or_sized(tmp_path: Path) -> None:
    """A test-only sleep of 10 % of the iteration: `slower`, or the row says how many rounds it needs
    (or that the host's load moved too much between the runs to call it)."""
    plain = _probe(tmp_path / "plain.json", *CALLABLE)
    base = json.loads(plain.read_text())
    sleep_ms = 0.10 * base["backends"]["mujoco"]["summary"]["phases"]["iteration_ms"]["median"]
    slow = _probe(tmp_path / "slow.json", *CALLABLE, "--test-step-sleep-ms", f"{sleep_ms:.4f}")
    report_path = tmp_path / "report.json"
    done = _compare(plain, slow, "--json-file", str(report_path))
    assert done.returncode == 0, done.stderr
    report = json.loads(report_path.read_text())
    assert {"field": "settings.test_step_sleep_ms", "base": 0.0, "new": float(f"{sleep_ms:.4f}")} in report[
        "setting_differences"
    ]
    env = next(r for r in report["measures"] if r["measure"] == "env_control_steps_per_s")
    assert env["verdict"] != "faster"
    assert env["verdict"] == "slower" or (
        env["verdict"] == "inconclusive"
        and ("rounds per process" in env["note"] or "of the CPUs" in env["note"])
    )
