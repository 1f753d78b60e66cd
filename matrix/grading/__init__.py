"""Grading: filed evidence read back and normalized into facts (schema, platform facts, test-only
hooks, soak verdicts re-derived from their samples), the grade policy that turns a cell's policy and
its evidence into a grade with blockers, the audit of test bindings, and ``compute``, which reads a
repository's evidence and grades every cell of its inventory.

Soak and probe verdicts are re-derived with the harness's own judgement code.
May import: foundation, harness, matrix.model, matrix.schema_check, matrix.declared, matrix.freshness,
matrix.grading.
"""

from soakbench.matrix.grading.audit import CellMarker, audit, bound_to, collect_markers
from soakbench.matrix.grading.bound_tests import BoundTest, bound_tests, completeness, describe_missing
from soakbench.matrix.grading.build import (
    FreshnessRule,
    MatrixState,
    attach_bound_tests,
    attach_freshness,
    bound_tests_at,
    compute,
    evidence_roots,
    filed_samples_rel,
    fingerprint_paths,
    grade_all,
    load_index,
    normalize_entry,
    read_json,
    soak_report_rel,
    soak_samples_rel,
)
from soakbench.matrix.grading.evidence import (
    ARTIFACT_SCHEMAS,
    INDEX_REL,
    INDEX_VERSION,
    JUNIT_SCHEMA,
    VERSION_FIELD,
    artifact_version_problem,
    detect_kind,
    names_cell,
)
from soakbench.matrix.grading.hooks import hooks_in
from soakbench.matrix.grading.manifest_guard import manifest_problems
from soakbench.matrix.grading.policy import freshness
from soakbench.matrix.grading.rederive import check_soak_evidence, samples_file

__all__ = [
    "ARTIFACT_SCHEMAS",
    "INDEX_REL",
    "INDEX_VERSION",
    "JUNIT_SCHEMA",
    "VERSION_FIELD",
    "BoundTest",
    "CellMarker",
    "FreshnessRule",
    "MatrixState",
    "artifact_version_problem",
    "attach_bound_tests",
    "attach_freshness",
    "audit",
    "bound_tests",
    "bound_tests_at",
    "bound_to",
    "check_soak_evidence",
    "collect_markers",
    "completeness",
    "compute",
    "describe_missing",
    "detect_kind",
    "evidence_roots",
    "filed_samples_rel",
    "fingerprint_paths",
    "freshness",
    "grade_all",
    "hooks_in",
    "load_index",
    "manifest_problems",
    "names_cell",
    "normalize_entry",
    "read_json",
    "samples_file",
    "soak_report_rel",
    "soak_samples_rel",
]
