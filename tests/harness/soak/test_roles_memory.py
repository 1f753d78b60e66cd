"""Per-process memory measures (smaps_rollup) and roles: pure parsing plus a real marked child."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from soakbench.foundation.roles import ROLES, role_from_title, role_title
from soakbench.harness.soak.host.procs import ProcReader, assign_roles, parse_smaps_rollup, role_of, totals_of
from soakbench.harness.soak.host.rollup import RollupSchedule

MIB = 1 << 20

ROLLUP = """56497b837000-7ffd8d513000 ---p 00000000 00:00 0                          [rollup]
Rss:                1692 kB
Pss:                 307 kB
Shared_Clean:       1536 kB
Private_Clean:        40 kB
Private_Dirty:       116 kB
Swap:                  8 kB
SwapPss:               8 kB
"""


def test_smaps_rollup_gives_pss_uss_swap_in_bytes() -> None:
    assert parse_smaps_rollup(ROLLUP) == {
        "pss_bytes": 307 * 1024,
        "uss_bytes": (40 + 116) * 1024,
        "swap_bytes": 8 * 1024,
    }


def test_smaps_rollup_missing_field_is_null_not_zero() -> None:
    text = "\n".join(line for line in ROLLUP.splitlines() if not line.startswith("Private_Dirty"))
    parsed = parse_smaps_rollup(text)
    assert parsed["uss_bytes"] is None and parsed["pss_bytes"] == 307 * 1024


def test_totals_sum_pss_only_when_every_process_has_it() -> None:
    fds = {"eventfd": 0, "shared_memory": 0, "total": 0}
    procs = [
        {"rss_bytes": 10, "pss_bytes": 4, "uss_bytes": 2, "swap_bytes": 0, "threads": 1, "fds": fds,
         "gpu_memory_bytes": None},
        {"rss_bytes": 10, "pss_bytes": 6, "uss_bytes": 3, "swap_bytes": 1, "threads": 1, "fds": fds,
         "gpu_memory_bytes": None},
    ]  # fmt: skip
    totals = totals_of(procs, gpu_available=False)
    assert (totals["pss_bytes"], totals["uss_bytes"], totals["swap_bytes"]) == (10, 5, 1)
    procs[1]["pss_bytes"] = None
    assert totals_of(procs, gpu_available=False)["pss_bytes"] is None


def test_role_marker_wins_then_the_tree_decides() -> None:
    assert role_of("sbk:collector", 20, 10, root_pid=10) == "collector"
    assert role_of("python", 10, 1, root_pid=10) == "trainer"
    assert role_of("python", 20, 10, root_pid=10) == "worker"
    assert role_of("cc1", 30, 20, root_pid=10) == "other"
    assert role_of("sbk:bogus", 20, 10, root_pid=10) == "worker"  # an unknown marker is no marker
    records = [{"name": "sh", "pid": 10, "ppid": 1}, {"name": "sbk:worker", "pid": 31, "ppid": 30}]
    assign_roles(records, root_pid=10)
    assert [r["role"] for r in records] == ["trainer", "worker"]


def test_role_title_round_trip_and_bad_role() -> None:
    for role in ROLES:
        assert role_from_title(role_title(role)) == role
        assert len(role_title(role)) <= 15
    with pytest.raises(ValueError, match="role: must be one of"):
        role_title("boss")  # type: ignore[arg-type]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_NAME are Linux only")
def test_real_marked_child_is_read_with_role_and_memory() -> None:
    code = (
        "import sys, time\n"
        "from soakbench.foundation.roles import mark_process\n"
        "mark_process('collector'); blob = bytearray(32 << 20)\n"
        "print('ready', flush=True); time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env={**os.environ})
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
        reader = ProcReader()
        st = reader.stat(child.pid)
        assert st is not None
        record, _ = reader.sample_process(st, gpu_by_pid=None)
        assign_roles([record], root_pid=os.getpid())
        assert record["role"] == "collector" and record["name"] == "sbk:collector"
        pss, uss = record["pss_bytes"], record["uss_bytes"]
        assert isinstance(pss, int) and isinstance(uss, int)
        assert uss >= 32 << 20 and pss >= uss and record["rss_bytes"] >= pss
        assert record["swap_bytes"] is not None
    finally:
        child.kill()
        child.wait()


def test_costly_rollups_are_read_less_often_and_carry_their_age() -> None:
    reads: list[int] = []
    now = [0.0]

    def slow_read(pid: int) -> dict[str, int | None]:
        reads.append(pid)
        now[0] += 0.012 if pid == 1 else 0.0001  # pid 1 holds many resident pages: a 12 ms read
        return {"pss_bytes": len(reads), "uss_bytes": 0, "swap_bytes": 0}

    schedule = RollupSchedule(slow_read, budget_ms=2.0, max_period=4, clock=lambda: now[0])
    alive = {(1, 100), (2, 100)}

    def sample() -> tuple[int, int]:
        schedule.start_sample(alive)
        return schedule.values(1, 100, MIB)[1], schedule.values(2, 100, MIB)[1]

    ages = [sample() for _ in range(8)]
    # pid 1: 12 ms / 2 ms -> period 6, capped at max_period 4; pid 2 (0.1 ms) is read at every sample
    # except when pid 1's read has spent the sample's 10 ms budget (a never-read process is always read)
    assert ages == [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 0), (2, 0), (3, 0)]
    schedule.start_sample(alive)
    fresh, age = schedule.values(1, 100, MIB)
    assert age == 0
    schedule.start_sample(alive)
    carried, age = schedule.values(1, 100, MIB)
    assert age == 1 and carried == fresh  # repeated, with its age, never re-measured in between
    schedule.start_sample({(2, 100)})
    assert schedule.values(1, 100, MIB)[1] == 0  # a forgotten identity is read afresh


def test_a_sample_stops_reading_at_its_budget_but_nobody_goes_staler_than_max_period() -> None:
    now = [0.0]

    def read(pid: int) -> dict[str, int | None]:
        now[0] += 0.001  # 1 ms per read
        return {"pss_bytes": pid, "uss_bytes": 0, "swap_bytes": 0}

    schedule = RollupSchedule(read, budget_ms=2.0, sample_budget_ms=3.0, max_period=4, clock=lambda: now[0])
    alive = {(pid, 1) for pid in range(10)}
    ages: list[list[int]] = []
    for _ in range(6):
        schedule.start_sample(alive)
        ages.append([schedule.values(pid, 1, MIB)[1] for pid in range(10)])
    assert ages[0] == [0] * 10  # never read before: always read
    assert ages[1] == [0, 0, 0] + [1] * 7  # the budget of 3 ms is spent after three reads
    assert max(max(row) for row in ages) <= 3  # max_period 4: read at least every 4th sample


def test_artifact_schema_enums_match_the_code() -> None:
    from soakbench.foundation.schema import load_schema
    from soakbench.harness.soak.verdicts.per_process import PROCESS_CLASSES

    schema = load_schema("soak-artifact-0.3.0.schema.json")
    per_process = schema["properties"]["resource_summary"]["properties"]["per_process"]
    item = per_process["properties"]["processes"]["items"]["properties"]
    assert tuple(item["role"]["enum"]) == ROLES
    assert schema["$defs"]["process_class"]["enum"] == list(PROCESS_CLASSES)


def test_a_process_whose_rss_moved_is_read_again_at_once() -> None:
    now = [0.0]

    def read(pid: int) -> dict[str, int | None]:
        now[0] += 0.02  # a 20 ms read: period 5 at the 4 ms budget
        return {"pss_bytes": int(now[0] * 1000), "uss_bytes": 0, "swap_bytes": 0}

    schedule = RollupSchedule(read, clock=lambda: now[0])
    alive = {(1, 1)}
    rss = 1024 * MIB
    ages = []
    for step in range(6):
        schedule.start_sample(alive)
        if step >= 3:
            rss += 32 * MIB  # growing: beyond 2 % of 1 GiB each sample
        ages.append(schedule.values(1, 1, rss)[1])
    assert ages == [0, 1, 2, 0, 0, 0]


def test_the_read_budget_and_the_staleness_cap_are_per_second_of_sampling() -> None:
    """At 5 s between samples (4 ms per second: 20 ms a sample) a 60 ms read is due every 3rd sample
    (15 s), not every 15th, a 12 ms one at every sample; the 30 s cap holds a 1 s read to every 6th sample
    at 5 s sampling, not every 30th (150 s)."""
    now = [0.0]

    def read_costing(ms: float) -> Callable[[int], dict[str, int | None]]:
        def read(pid: int) -> dict[str, int | None]:
            now[0] += ms / 1000.0
            return {"pss_bytes": pid, "uss_bytes": 0, "swap_bytes": 0}

        return read

    def ages(ms: float, interval_s: float, samples: int = 13) -> list[int]:
        schedule = RollupSchedule(read_costing(ms), sample_budget_ms=1000.0, clock=lambda: now[0])
        schedule.pace(interval_s)
        out = []
        for _ in range(samples):
            schedule.start_sample({(1, 100)})
            out.append(schedule.values(1, 100, MIB)[1])
        return out

    assert ages(60.0, 5.0) == [0, 1, 2] * 4 + [0]
    assert ages(60.0, 1.0, samples=16) == [*range(15), 0]  # 60 / 4 ms: every 15th sample at 1 s
    assert ages(12.0, 5.0) == [0] * 13
    assert ages(1000.0, 5.0) == [0, 1, 2, 3, 4, 5] * 2 + [0]
    with pytest.raises(ValueError, match="interval_s"):
        RollupSchedule(read_costing(1.0)).pace(0.0)
