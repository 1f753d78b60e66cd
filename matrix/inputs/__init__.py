"""What each piece of evidence depends on, and whether it still holds at HEAD.

Public surface: :class:`InputManifest` and :func:`parse_manifest` (the manifest an artifact carries),
:func:`changed_inputs` and :func:`describe_changes` (per-input freshness, pure), :func:`locked_versions`
(a ``uv.lock``'s pins), :func:`import_closure` (a project's own static import graph) and
:func:`junit_manifest` (the inputs of a cell's bound tests at a commit).
"""

from matrix.inputs.closure import import_closure, module_path
from matrix.inputs.junit_inputs import junit_manifest
from matrix.inputs.lock import dependency_closure, locked_versions
from matrix.inputs.manifest import (
    InputChange,
    changed_inputs,
    describe_changes,
    parse_manifest,
)
from matrix.model import InputManifest

__all__ = [
    "InputChange",
    "InputManifest",
    "changed_inputs",
    "dependency_closure",
    "describe_changes",
    "import_closure",
    "junit_manifest",
    "locked_versions",
    "module_path",
    "parse_manifest",
]
