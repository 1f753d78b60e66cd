"""scripts/gpu/bundle/target.py: markers evaluated for the target interpreter, and which wheels
install on it. Synthetic inputs only."""

from __future__ import annotations

import pytest
from bundle import target as bundle_target
from bundle.files import BundleError, parse_wheel_name


@pytest.mark.parametrize(
    ("marker", "version", "expected"),
    [
        ("python_full_version < '3.12'", "3.11", True),
        ("python_full_version >= '3.12' and python_full_version < '3.14'", "3.12", True),
        ("python_full_version == '3.14.*' and sys_platform != 'win32'", "3.14", True),
        ("python_full_version == '3.14.*'", "3.12", False),
        ("sys_platform == 'emscripten' or sys_platform == 'win32'", "3.12", False),
        (
            "(platform_machine == 'aarch64' or platform_machine == 'x86_64') and sys_platform == 'linux'",
            "3.12",
            True,
        ),
        ("platform_python_implementation != 'PyPy'", "3.12", True),
        ("'3.12' <= python_version", "3.12", True),
    ],
)
def test_markers(marker: str, version: str, expected: bool) -> None:
    assert bundle_target.marker_holds(marker, bundle_target.Target(version).marker_env()) is expected


def test_unknown_marker_variable_fails_closed() -> None:
    with pytest.raises(BundleError, match="does not evaluate"):
        bundle_target.marker_holds("platform_release == '6'", bundle_target.Target("3.12").marker_env())


@pytest.mark.parametrize(
    ("filename", "fits"),
    [
        ("rpds_py-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", True),
        ("w-1-py3-none-manylinux_2_28_x86_64.whl", True),
        ("w-1-py3-none-manylinux_2_34_x86_64.whl", False),
        ("w-1-py3-none-manylinux_2_28_aarch64.whl", False),
        ("w-1-cp311-cp311-manylinux_2_28_x86_64.whl", False),
        ("w-1-cp310-abi3-manylinux_2_17_x86_64.whl", True),
        ("w-1-cp312-cp312-musllinux_1_2_x86_64.whl", False),
        ("w-1-py2.py3-none-any.whl", True),
    ],
)
def test_wheel_fits_cp312_glibc_228_x86_64(filename: str, fits: bool) -> None:
    assert bundle_target.wheel_fits(parse_wheel_name(filename), bundle_target.Target("3.12")) is fits
