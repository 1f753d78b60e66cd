"""`cumps` control paths and cleanup: the 107-byte socket path limit, and the leftover control files
of a dead daemon cleared only where that is proven safe (fake MPS control binary and NVML)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from soakbench.foundation import mps
from soakbench.foundation.mps_cleanup import clear_dead_control
from tests.harness.cumps._host import (
    UUID_A,
    UUID_B,
    gpu,
    invoke,
    record_of,
    set_gpus,
    stale_record,
    wait_gone,
)

# CUDA MPS control and its liveness checks are Linux-only (/proc).
pytestmark = pytest.mark.linux_only


def test_socket_path_limit_is_107_bytes(tmp_path: Path) -> None:
    # "/control" is 8 bytes: a 99-byte pipe directory gives exactly the 107 bytes sun_path allows.
    fits = Path("/" + "p" * 98)
    assert mps.check_control_path(fits, "--pipe-dir", "hint") == fits
    with pytest.raises(mps.CumpsError, match=r"is 108 bytes, over the 107-byte limit.*; hint"):
        mps.check_control_path(Path("/" + "p" * 99), "--pipe-dir", "hint")
    with pytest.raises(mps.CumpsError, match="is 108 bytes"):  # bytes, not characters
        mps.check_control_path(Path("/" + "é" + "p" * 97), "--pipe-dir", "hint")
    # The limit is the kernel's: a socket at a 107-byte path binds.
    short = Path(tempfile.mkdtemp(prefix="sun-", dir="/tmp"))
    try:
        path = short / ("s" * (mps.SOCKET_PATH_LIMIT - len(os.fsencode(str(short))) - 1))
        assert len(os.fsencode(str(path))) == mps.SOCKET_PATH_LIMIT
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
            bound.bind(str(path))
    finally:
        shutil.rmtree(short)


def test_too_long_pipe_dir_is_refused_before_anything_changes(host: Path) -> None:
    long_pipe = host / ("p" * (110 - len(str(host))))
    code, output = invoke("start", "--pipe-dir", str(long_pipe))
    assert code == 2 and "--pipe-dir" in output and "107-byte limit" in output, output
    assert f"{long_pipe}/control is {len(str(long_pipe)) + 8} bytes" in output
    long_name = "n" * 100  # the default /…/cumps/<name>/pipe/control is then over the limit
    code, output = invoke("start", "--name", long_name)
    assert code == 2 and "the default pipe directory" in output and "107-byte limit" in output
    assert "pass a shorter --name" in output
    assert not long_pipe.exists() and not (host / "cumps").exists()
    assert not (host / "cache/soakbench/cumps").exists()


def test_quarantine_clears_a_dead_daemons_control_files_only(
    host: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    set_gpus(monkeypatch, [gpu(UUID_A), gpu(UUID_B)])
    assert invoke("start", "--gpus", "0", "--name", "dead")[0] == 0
    assert invoke("start", "--gpus", "1", "--name", "alive")[0] == 0
    dead, alive = record_of(host, "dead"), record_of(host, "alive")
    os.kill(dead["control_pid"], signal.SIGKILL)  # a crash: no quit, files stay behind
    assert wait_gone(dead["control_pid"])
    dead_pipe, alive_pipe = Path(dead["pipe_dir"]), Path(alive["pipe_dir"])
    outside = host / "outside"
    outside.write_text("not the daemon's")
    (dead_pipe / "control_link").symlink_to(outside)
    assert mps.pipe_kind(dead_pipe) == kind and (dead_pipe / "control_lock").exists()
    # A stale record naming the live daemon's pipe directory must not cost that daemon its socket.
    mps.write_record(replace(mps.DaemonRecord(**dead), name="forged", pipe_dir=str(alive_pipe)))

    code, output = invoke("start", "--gpus", "0", "--name", "dead")
    assert code == 0, output
    assert f"removed leftover {dead_pipe / 'control'} of the dead daemon dead" in output
    assert f"removed leftover {dead_pipe / 'control_lock'} of the dead daemon dead" in output
    assert f"left {dead_pipe / 'control_link'} (not a socket, FIFO or regular file) in place" in output
    assert f"left {alive_pipe} untouched: a live recorded daemon serves {alive_pipe}" in output
    assert output.count("quarantined stale record") == 2
    assert outside.read_text() == "not the daemon's" and (dead_pipe / "control_link").is_symlink()
    assert mps.pipe_kind(alive_pipe) == kind and (alive_pipe / "control_lock").exists()
    reasons = list((host / "cache/soakbench/cumps/quarantine").glob("dead.*.reason.txt"))
    assert len(reasons) == 1 and f"removed leftover {dead_pipe / 'control'}" in reasons[0].read_text()
    assert record_of(host, "dead")["control_pipe_kind"] == kind, "the restarted daemon serves again"
    assert invoke("stop", "--name", "alive")[0] == 0 and invoke("stop", "--name", "dead")[0] == 0


def test_clear_dead_control_refuses_what_it_cannot_prove(host: Path) -> None:
    pipe = host / "p"
    pipe.mkdir()
    (pipe / "control").write_text("")
    other_host = stale_record("theirs", host_name="another-host")
    theirs = replace(other_host, pipe_dir=str(pipe))
    assert clear_dead_control(theirs, []).skipped == "the record was written by another uid or host"
    me = os.getpid()
    ticks = mps.start_ticks(me)
    alive = replace(theirs, host=socket.gethostname(), control_pid=me, control_start_ticks=ticks or 0)
    assert clear_dead_control(alive, []).skipped == "its control process is alive"
    linked = host / "linked"
    linked.symlink_to(pipe)
    dead = stale_record("dead-linked")
    via_link = replace(dead, pipe_dir=str(linked))
    skipped = clear_dead_control(via_link, []).skipped
    assert skipped is not None and "without following links" in skipped
    assert (pipe / "control").exists()
    assert clear_dead_control(replace(dead, pipe_dir=str(pipe)), []).removed == (pipe / "control",)
