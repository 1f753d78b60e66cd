"""Grading: filed evidence read back and normalized into facts (schema, platform facts, test-only
hooks, soak verdicts re-derived from their samples), the grade policy that turns a cell's policy and
its evidence into a grade with blockers, the audit of test bindings, and ``compute``, which reads a
repository's evidence and grades every cell of its inventory.

Soak and probe verdicts are re-derived with the harness's own judgement code.
May import: foundation, harness, matrix.model, matrix.schema_check, matrix.declared, matrix.freshness,
matrix.grading.
"""

from matrix.grading.audit import CellMarker, audit, bound_to, collect_markers
from matrix.grading.build import (
    FreshnessRule,
    MatrixState,
    attach_freshness,
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
from matrix.grading.evidence import (
    ARTIFACT_SCHEMAS,
    INDEX_REL,
    INDEX_VERSION,
    JUNIT_SCHEMA,
    VERSION_FIELD,
    artifact_version_problem,
    detect_kind,
    names_cell,
)
from matrix.grading.hooks import hooks_in
from matrix.grading.policy import freshness
from matrix.grading.rederive import check_soak_evidence, samples_file

__all__ = [
    "ARTIFACT_SCHEMAS",
    "INDEX_REL",
    "INDEX_VERSION",
    "JUNIT_SCHEMA",
    "VERSION_FIELD",
    "CellMarker",
    "FreshnessRule",
    "MatrixState",
    "artifact_version_problem",
    "attach_freshness",
    "audit",
    "bound_to",
    "check_soak_evidence",
    "collect_markers",
    "compute",
    "detect_kind",
    "evidence_roots",
    "filed_samples_rel",
    "fingerprint_paths",
    "freshness",
    "grade_all",
    "hooks_in",
    "load_index",
    "names_cell",
    "normalize_entry",
    "read_json",
    "samples_file",
    "soak_report_rel",
    "soak_samples_rel",
]
