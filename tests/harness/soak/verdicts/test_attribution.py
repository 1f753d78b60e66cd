"""What grew, named (harness.soak.verdicts.attribution), on sample records as the sampler writes them."""

from __future__ import annotations

from soakbench.harness.soak.host.detail import fd_group
from soakbench.harness.soak.verdicts.attribution import child_growth, detail_growth, disk_growth, shm_growth


def _sample(t: float, *, events: int, pipes: int, workers: int, ckpt: int, seg: int) -> dict:
    trainer = {
        "pid": 10,
        "cmdline": ["python", "train.py"],
        "detail": {
            "fds": {"/tmp/x/events.out.tfevents.*.host.*.*": events, "pipe": pipes},
            "threads": {"python": 1, "pt_worker_*": workers},
        },
    }
    children = [{"pid": 100 + i, "cmdline": ["python", "-c", f"worker {i}"]} for i in range(workers)]
    return {
        "t": t,
        "processes": [trainer, *children],
        "disk": [{"path": "/run", "children": {"ckpt": ckpt, ".": 4096}}],
        "shm": {"segments": {"torch_1": seg}},
    }


WINDOW = [
    _sample(0.0, events=3, pipes=4, workers=1, ckpt=1 << 20, seg=1 << 20),
    _sample(60.0, events=145, pipes=4, workers=3, ckpt=3 << 30, seg=9 << 20),
]


def test_fd_families_that_grew_are_named_largest_first():
    assert detail_growth(WINDOW, "fds", pid="10") == ("+142 /tmp/x/events.out.tfevents.*.host.*.*",)
    assert detail_growth(WINDOW, "threads") == ("+2 pt_worker_*",)
    assert detail_growth(WINDOW[:1], "fds", pid="10") == ()  # one record: nothing to compare


def test_new_children_are_grouped_by_command_line_with_digits_as_stars():
    assert child_growth(WINDOW) == ("+2 python -c worker *",)


def test_folders_and_segments_that_grew_are_named_with_their_growth():
    assert disk_growth(WINDOW, "/run") == ("ckpt/ +3 GiB",)
    assert shm_growth(WINDOW) == ("torch_1 +8 MiB",)


def test_fd_targets_group_by_family():
    assert fd_group("pipe:[12345]") == "pipe" and fd_group("socket:[9]") == "socket"
    assert (
        fd_group("/tmp/x/events.out.tfevents.1733500000.host.4242.0")
        == "/tmp/x/events.out.tfevents.*.host.*.*"
    )
    assert fd_group("anon_inode:[eventfd]") == "anon_inode:[eventfd]"
