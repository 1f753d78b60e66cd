"""soakbench: a soak monitor, a phase probe, a support matrix and the compact training runtime they test.

The wheel installs one import package, ``soakbench``, whose subpackages are the repository's rooms:
``soakbench.foundation``, ``soakbench.runtime``, ``soakbench.harness`` and ``soakbench.matrix``. Only
this name lands in site-packages, so a project with its own ``runtime`` or ``matrix`` package can install
and use soakbench beside it.

A checkout keeps the rooms at the repository root, and ``soakbench/`` holds symbolic links to them, which
the wheel build and the type checker follow. Imports in a checkout go to the root's folders themselves
(the search path below): a module's ``__file__`` is then the path git tracks, which the support matrix
records as an input of its evidence, and which a module uses to find the repository's assets.
"""

from pathlib import Path

_HERE = Path(__file__).resolve().parent

if (_HERE / "runtime").is_symlink():  # a checkout; in the wheel the rooms are real folders here
    __path__ = [str(_HERE.parent)]
