"""Native libraries a process maps, read from /proc/PID/maps and mapped back to their distributions."""

from __future__ import annotations

import subprocess
import sys

import pytest

from soakbench.foundation.mapped import is_library, mapped_paths, owners, top_level_names

MAPS = """\
55d0c0a00000-55d0c0a2b000 r--p 00000000 08:01 1 /usr/bin/python3.11
7f00aa000000-7f00ab000000 r-xp 00000000 08:01 2 /venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so
7f00ab000000-7f00ab100000 r-xp 00000000 08:01 3 /venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9
7f00ac000000-7f00ac100000 rw-p 00000000 00:00 0 [heap]
7f00ad000000-7f00ad100000 r-xp 00000000 08:01 4 /usr/lib/x86_64-linux-gnu/libc.so.6
7f00ae000000-7f00ae100000 rw-s 00000000 00:05 5 /dev/shm/soakbench_1_ring (deleted)
7f00af000000-7f00af100000 r--p 00000000 00:00 0
"""


def test_the_maps_text_names_the_files_a_process_maps() -> None:
    assert mapped_paths(MAPS) == {
        "/usr/bin/python3.11",
        "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so",
        "/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
        "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/dev/shm/soakbench_1_ring",
    }


@pytest.mark.parametrize(
    ("path", "library"),
    [
        ("/x/libcudnn.so.9", True),
        ("/x/_core.cpython-311-x86_64-linux-gnu.so", True),
        ("/x/libtorch.so", True),
        ("/usr/bin/python3.11", False),
        ("/dev/shm/soakbench_1_ring", False),
        ("/x/model.sofa", False),
    ],
)
def test_a_shared_object_is_told_from_other_mappings(path: str, library: bool) -> None:
    assert is_library(path) is library


def test_each_library_is_owned_by_its_distribution_and_the_c_library_by_none() -> None:
    paths = mapped_paths(MAPS)
    assert top_level_names(paths) == {"torch", "nvidia"}
    index = {
        "/venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so": ("torch", "2.6.0"),
        "/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9": ("nvidia-cudnn-cu13", "9.1"),
    }
    assert owners(paths, index) == {"nvidia-cudnn-cu13": "9.1", "torch": "2.6.0"}


@pytest.mark.linux_only
def test_a_real_process_that_maps_a_library_without_importing_its_distribution_records_it() -> None:
    # numpy's compiled core is mapped by ctypes alone: no `import numpy` names the distribution
    code = (
        "import ctypes, importlib.util, pathlib\n"
        "core = pathlib.Path(importlib.util.find_spec('numpy').submodule_search_locations[0]) / '_core'\n"
        "ctypes.CDLL(str(next(core.glob('_multiarray_umath*.so'))))\n"
        "import sys; from soakbench.foundation.mapped import mapped_distributions\n"
        "print('numpy' in sys.modules, mapped_distributions().get('numpy'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    imported, version = done.stdout.split()
    import numpy

    assert imported == "False" and version == numpy.__version__
