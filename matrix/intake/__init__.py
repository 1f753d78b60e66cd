"""Intake of evidence: ``matrix ingest`` validates one soak or probe artifact or pytest JUnit XML (read
into a JUnit summary, with each bound cell's inputs) and files it under ``matrix/evidence/``, judging it
as ``matrix generate`` will.

May import: foundation, harness, matrix.model, matrix.schema_check, matrix.fileio, matrix.declared,
matrix.freshness, matrix.grading, matrix.intake.
"""

from soakbench.matrix.intake.ingest import ingest

__all__ = [
    "ingest",
]
