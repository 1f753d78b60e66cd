"""Intake of evidence: ``matrix ingest`` validates one soak or probe artifact or pytest JUnit XML (read
into a JUnit summary, with each bound cell's inputs) and files it under ``matrix/evidence/``, judging it
as ``matrix generate`` will.

Imports the rooms below it: declared, freshness, grading.
"""

from matrix.intake.ingest import ingest

__all__ = [
    "ingest",
]
